// Invariant CRC of RoCEv2 frames (IBTA Annex A17.3.3; rocev2.md §2).
//
// The ICRC is the Ethernet CRC-32 over: 8 bytes of 0xFF (standing for the masked LRH that
// RoCEv2 does not carry), then the IP header .. pad with the variant fields set to all ones
// (IPv4 TOS, TTL, header checksum; IPv6 traffic class, flow label, hop limit; UDP checksum;
// BTH byte 4). It is sent least-significant byte first, like an Ethernet FCS.
//
// icrc_compute() runs DPDK's rte_net_crc (PCLMULQDQ / AVX-512 folding) over the frame in one
// contiguous pass: it temporarily writes the 0xFF prefix over the 8 bytes before the IP header
// (the tail of the Ethernet header, which is not covered) and masks the variant fields in place,
// then restores every byte it touched. The frame must therefore be writable and contiguous.
#pragma once

#include <cstdint>

#include "dataplane/wire/frame.h"

namespace urnic::wire {

// Selects the fastest rte_net_crc implementation this CPU supports. Idempotent; called by EAL
// bring-up and by the first icrc_compute().
void icrc_init() noexcept;

// The ICRC value of the frame described by `l` (uses l3_off, l4_off, ipv6, icrc_off).
uint32_t icrc_compute(uint8_t* frame, const FrameLayout& l) noexcept;

// Stores the ICRC at l.icrc_off, least-significant byte first.
void icrc_write(uint8_t* frame, const FrameLayout& l) noexcept;

// True when the ICRC on the wire matches the frame.
bool icrc_check(uint8_t* frame, const FrameLayout& l) noexcept;

// A bitwise reference implementation of the same function (rxe_icrc.c semantics: crc32_le
// seeded with 0xDEBB20E3, inverted), independent of DPDK; used by the tests to cross-check.
uint32_t icrc_reference(const uint8_t* frame, const FrameLayout& l) noexcept;

}  // namespace urnic::wire
