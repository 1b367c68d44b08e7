// Invariant CRC of RoCEv2 frames (IBTA Annex A17.3.3; rocev2.md §2).
//
// The ICRC is the Ethernet CRC-32 over: 8 bytes of 0xFF (standing for the masked LRH that
// RoCEv2 does not carry), then the IP header .. pad with the variant fields set to all ones
// (IPv4 TOS, TTL, header checksum; IPv6 traffic class, flow label, hop limit; UDP checksum;
// BTH byte 4). It is sent least-significant byte first, like an Ethernet FCS.
//
// icrc_compute() runs the CRC-32 kernels of crc32.h (AVX-512 VPCLMULQDQ, else PCLMULQDQ, else
// a table) over the frame from 8 bytes before the IP header (the tail of the Ethernet header,
// which is not covered) to the ICRC, with an OR mask over its first 48 (IPv4) or 64 (IPv6)
// bytes that turns those 8 bytes into the 0xFF prefix and the variant fields into ones
// (crc32_update_masked). It does not write to the frame. (Until issue 13 it ran DPDK's
// rte_net_crc after masking the frame in place and restored it; bench_wire measures the masked
// kernel 1.26x (4 KiB) to 3x (256 B) faster (BM_Icrc against BM_IcrcRteInPlace), the in-place
// masking's byte stores stalling the vector loads that read them back.)
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

#include <bit>
#include <cstdint>
#include <cstring>

#include "dataplane/wire/crc32.h"

#include "dataplane/wire/frame.h"

namespace urnic::wire {

// Selects the fastest CRC-32 kernel this CPU supports (crc32_init). Idempotent; called by EAL
// bring-up, else done by the first CRC.
void icrc_init() noexcept;

// The raw CRC-32 register of the whole frame described by `l` (prefix, masked headers,
// payload, pad: everything before l.icrc_off) in one pass of crc32_short_masked, inline: it
// runs for every frame sent and received. The pass starts 4 bytes before the IP header with a
// register of 0: the initial register ~0 XORed into the first four 0xFF bytes of the LRH
// prefix makes them zero, and leading zero bytes do not change a register of 0, so 8 x 0xFF
// from ~0 is 4 x 0xFF from 0; the 4 bytes read there (the end of the Ethernet header) are
// counted as ones through the mask.
namespace icrc_detail {
inline constexpr uint32_t kLeadSkip = 4;
inline constexpr size_t kLeadMaskLen[2] = {48, 64};  // IPv4, IPv6
extern const LeadMask kLead[2];                      // IPv4, IPv6
}  // namespace icrc_detail

inline uint32_t icrc_frame_state(const uint8_t* frame, const FrameLayout& l) noexcept {
  const uint32_t start = l.l3_off - icrc_detail::kLeadSkip;
  return crc32_short_masked(frame + start, l.icrc_off - start, icrc_detail::kLead[l.ipv6],
                            icrc_detail::kLeadMaskLen[l.ipv6]);
}

// The ICRC of a raw register that has run over everything up to l.icrc_off.
constexpr uint32_t icrc_value(uint32_t state) noexcept { return ~state; }

// The ICRC is carried least-significant byte first (A17.3.3): on a little-endian host one
// 32-bit store or load.
static_assert(std::endian::native == std::endian::little);

// Stores icrc_value(state) at l.icrc_off, least-significant byte first.
inline void icrc_finish(uint8_t* frame, const FrameLayout& l, uint32_t state) noexcept {
  const uint32_t crc = icrc_value(state);
  std::memcpy(frame + l.icrc_off, &crc, sizeof crc);
}

// True when icrc_value(state) equals the ICRC on the wire at l.icrc_off.
inline bool icrc_finish_check(const uint8_t* frame, const FrameLayout& l, uint32_t state) noexcept {
  uint32_t wire = 0;
  std::memcpy(&wire, frame + l.icrc_off, sizeof wire);
  return icrc_value(state) == wire;
}

// The ICRC value of the frame described by `l` (uses l3_off, ipv6 and icrc_off).
inline uint32_t icrc_compute(const uint8_t* frame, const FrameLayout& l) noexcept {
  return icrc_value(icrc_frame_state(frame, l));
}

// Stores the ICRC at l.icrc_off, least-significant byte first.
inline void icrc_write(uint8_t* frame, const FrameLayout& l) noexcept {
  icrc_finish(frame, l, icrc_frame_state(frame, l));
}

// True when the ICRC on the wire matches the frame.
inline bool icrc_check(const uint8_t* frame, const FrameLayout& l) noexcept {
  return icrc_finish_check(frame, l, icrc_frame_state(frame, l));
}

// The raw CRC-32 register (crc32.h convention) over the 8-byte 0xFF LRH prefix and the frame's
// bytes [l3_off, hdr_end) with the variant fields masked, i.e. the ICRC state where the payload
// starts when hdr_end is l.payload_off. Uses l3_off and ipv6 (the IP header has no options);
// hdr_end must be at least the end of the BTH (l4_off + 20) and at most l.icrc_off. Reads the 8
// bytes before the IP header (counted as all ones) and does not write to the frame: the variant
// fields are masked in registers (crc32_update_masked).
uint32_t icrc_header_crc(const uint8_t* frame, const FrameLayout& l, uint32_t hdr_end) noexcept;

// A bitwise reference implementation of the same function (rxe_icrc.c semantics: crc32_le
// seeded with 0xDEBB20E3, inverted), independent of crc32.h; used by the tests to cross-check.
uint32_t icrc_reference(const uint8_t* frame, const FrameLayout& l) noexcept;

}  // namespace urnic::wire
