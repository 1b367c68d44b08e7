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
//
// Fused with the payload copy (crc32.h): the TX and RX paths may instead compute the ICRC while
// they gather the payload into the frame or scatter it out of it:
//
//   uint32_t s = icrc_header_crc(frame, l, l.payload_off);   // prefix + masked headers
//   for (each piece) s = crc32_copy(s, dst, src, n);           // payload, in frame order
//   s = crc32_update(s, frame + l.payload_off + l.payload_len, l.pad);  // pad (zero on TX)
//   icrc_finish(frame, l, s);               // TX: writes the ICRC
//   bool ok = icrc_finish_check(frame, l, s);  // RX: compares with the ICRC on the wire
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

// The raw CRC-32 register (crc32.h convention) over the 8-byte 0xFF LRH prefix and the frame's
// bytes [l3_off, hdr_end) with the variant fields masked, i.e. the ICRC state where the payload
// starts when hdr_end is l.payload_off. Uses l3_off and ipv6 (the IP header has no options);
// hdr_end must be at least the end of the BTH (l4_off + 20) and at most l.icrc_off. Reads the 8
// bytes before the IP header (counted as all ones) and does not write to the frame: the variant
// fields are masked in registers (crc32_update_masked).
uint32_t icrc_header_crc(const uint8_t* frame, const FrameLayout& l, uint32_t hdr_end) noexcept;

// The ICRC of a raw register that has run over everything up to l.icrc_off.
constexpr uint32_t icrc_value(uint32_t state) noexcept { return ~state; }

// Stores icrc_value(state) at l.icrc_off, least-significant byte first.
void icrc_finish(uint8_t* frame, const FrameLayout& l, uint32_t state) noexcept;

// True when icrc_value(state) equals the ICRC on the wire at l.icrc_off.
bool icrc_finish_check(const uint8_t* frame, const FrameLayout& l, uint32_t state) noexcept;

// A bitwise reference implementation of the same function (rxe_icrc.c semantics: crc32_le
// seeded with 0xDEBB20E3, inverted), independent of DPDK; used by the tests to cross-check.
uint32_t icrc_reference(const uint8_t* frame, const FrameLayout& l) noexcept;

}  // namespace urnic::wire
