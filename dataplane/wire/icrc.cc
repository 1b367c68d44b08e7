#include "dataplane/wire/icrc.h"

#include <array>

#include "dataplane/wire/crc32.h"

namespace urnic::wire {
namespace {

// Prefix standing for the masked IB LRH (A17.3.3).
constexpr uint32_t kLrhPrefix = 8;

// OR masks over the first ICRC bytes, from 8 bytes before the IP header: the LRH prefix (all
// ones) and the variant fields (IPv4 TOS, TTL, header checksum; IPv6 traffic class, flow label,
// hop limit; UDP checksum; BTH byte 4), through whole 16-byte lanes that contain BTH byte 4: 48
// bytes over IPv4, 64 over IPv6 (the parser and the builder allow no IP options, so the UDP
// header is at a fixed distance from the IP header).
constexpr uint32_t kMaskLen4 = 48, kMaskLen6 = 64;
using IcrcMask = std::array<uint8_t, kMaskLen6>;

constexpr IcrcMask make_mask(bool ipv6) noexcept {
  IcrcMask m{};
  for (uint32_t i = 0; i < kLrhPrefix; ++i) m[i] = 0xFF;
  constexpr uint32_t ip = kLrhPrefix;
  if (ipv6) {
    m[ip] = 0x0F;  // traffic class high nibble; the version nibble is covered
    m[ip + 1] = m[ip + 2] = m[ip + 3] = m[ip + 7] = 0xFF;
  } else {
    m[ip + 1] = m[ip + 8] = m[ip + 10] = m[ip + 11] = 0xFF;
  }
  const uint32_t udp = ip + (ipv6 ? sizeof(Ipv6Hdr) : sizeof(Ipv4Hdr));
  m[udp + 6] = m[udp + 7] = 0xFF;
  m[udp + sizeof(UdpHdr) + 4] = 0xFF;  // BTH byte 4 (FECN, BECN, reserved)
  return m;
}

constexpr IcrcMask kMask4 = make_mask(false), kMask6 = make_mask(true);
static_assert(kLrhPrefix + sizeof(Ipv4Hdr) + sizeof(UdpHdr) + 4 < kMaskLen4);
static_assert(kLrhPrefix + sizeof(Ipv6Hdr) + sizeof(UdpHdr) + 4 < kMaskLen6);
static_assert(kMaskLen4 <= kLrhPrefix + sizeof(Ipv4Hdr) + sizeof(UdpHdr) + sizeof(Bth));
static_assert(kMaskLen6 <= kLrhPrefix + sizeof(Ipv6Hdr) + sizeof(UdpHdr) + sizeof(Bth));

}  // namespace

// The same masks from 4 bytes before the IP header (icrc.h icrc_frame_state).
namespace icrc_detail {
namespace {
constexpr LeadMask make_lead_mask(bool ipv6) noexcept {
  const IcrcMask m = make_mask(ipv6);
  LeadMask lead{};
  for (uint32_t i = kLeadSkip; i < m.size(); ++i) lead[i - kLeadSkip] = m[i];
  return lead;
}
}  // namespace
constexpr LeadMask kLead[2] = {make_lead_mask(false), make_lead_mask(true)};
// Every masked byte lies in the span the one-pass kernel masks (48 bytes, 64 over IPv6).
static_assert(kMaskLen4 - kLeadSkip <= kLeadMaskLen[0] && kMaskLen6 - kLeadSkip <= kLeadMaskLen[1]);
}  // namespace icrc_detail

uint32_t icrc_header_crc(const uint8_t* frame, const FrameLayout& l, uint32_t hdr_end) noexcept {
  // The 8 bytes before the IP header (the end of the Ethernet header) are read and counted as
  // all ones through the mask; nothing is written.
  const uint32_t start = l.l3_off - kLrhPrefix;
  const uint32_t n = l.ipv6 ? kMaskLen6 : kMaskLen4;
  const uint32_t state =
      crc32_update_masked(~0u, frame + start, (l.ipv6 ? kMask6 : kMask4).data(), n);
  if (start + n == hdr_end) return state;
  return crc32_update(state, frame + start + n, hdr_end - (start + n));
}

void icrc_init() noexcept { crc32_init(); }

uint32_t icrc_reference(const uint8_t* frame, const FrameLayout& l) noexcept {
  auto update = [](uint32_t crc, uint8_t b) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1u) ? 0xEDB88320u : 0u);
    return crc;
  };
  // 0xDEBB20E3 = crc32_le(0xFFFFFFFF, 8 x 0xFF): the inverted initial value already run over
  // the LRH prefix (rxe_icrc.c).
  uint32_t crc = 0xDEBB20E3u;
  for (uint32_t i = l.l3_off; i < l.icrc_off; ++i) {
    uint8_t b = frame[i];
    const uint32_t ip = i - l.l3_off;
    if (i < l.l4_off) {
      if (l.ipv6) {
        if (ip == 0) b |= 0x0F;
        if (ip == 1 || ip == 2 || ip == 3 || ip == 7) b = 0xFF;
      } else if (ip == 1 || ip == 8 || ip == 10 || ip == 11) {
        b = 0xFF;
      }
    } else if (i == l.l4_off + 6u || i == l.l4_off + 7u || i == l.l4_off + 8u + 4u) {
      b = 0xFF;  // UDP checksum, BTH byte 4
    }
    crc = update(crc, b);
  }
  return ~crc;
}

}  // namespace urnic::wire
