// The one RoCEv2 frame parser and the one frame builder, for IPv4 and IPv6 (IBTA Annex A17.4),
// used by every dataplane stage and by the tests.
//
// Parsing never reads outside [data, data + len): every offset is checked against the frame
// length and against the IP and UDP lengths before it is used, and a malformed frame yields a
// ParseError that the caller counts (house style rule 21) instead of a crash.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "dataplane/wire/headers.h"
#include "dataplane/wire/opcode.h"

namespace urnic::wire {

enum class ParseError : uint8_t {
  kOk = 0,
  kTruncated,          // frame shorter than the headers it claims
  kNotIp,              // EtherType is neither IPv4 nor IPv6 (ARP etc. go to the control path)
  kBadIpVersion,       // IP version field disagrees with the EtherType
  kIpOptions,          // IPv4 IHL != 5 or IPv6 next header != UDP (A17.4.5: no options)
  kIpFragment,         // IPv4 MF set or a fragment offset: RoCEv2 is never fragmented
  kNotUdp,             // IP protocol is not UDP
  kWrongUdpPort,       // UDP destination port is not 4791
  kIpLengthMismatch,   // IP total/payload length larger than the frame, or smaller than UDP
  kUdpLengthMismatch,  // UDP length disagrees with the IP length
  kBadTver,            // BTH TVer != 0 (IBTA §9.2, BTH; rxe hdr_check "bad tver")
  kBadPkey,            // P_Key is not the default partition 0xFFFF
  kUnknownOpcode,      // opcode not in the table (reserved, RD, vendor)
  kHeaderTruncated,    // UDP payload too short for BTH + extension headers + ICRC
  kPadTooLarge,        // PadCnt larger than the bytes that follow the headers
  kPayloadNotAllowed,  // payload on an opcode that carries none (ACK, READ request, atomics)
  kBadIcrc,            // ICRC mismatch (reported by the ICRC check, not by parse())
  kCount,
};

std::string_view to_string(ParseError e) noexcept;

// Where the parts of a frame are. Offsets are from the first byte of the Ethernet header.
struct FrameLayout {
  uint16_t l3_off = 0;       // IP header
  uint16_t l4_off = 0;       // UDP header
  uint16_t bth_off = 0;      // BTH
  uint16_t payload_off = 0;  // first payload byte (after the extension headers)
  uint16_t icrc_off = 0;     // ICRC; equals the end of the RoCE part (IP length may be < frame)
  uint32_t payload_len = 0;  // payload bytes, without pad
  uint8_t pad = 0;           // PadCnt
  bool ipv6 = false;
  bool vlan = false;

  constexpr uint32_t frame_len() const noexcept { return icrc_off + kIcrcLen; }
};

struct ParsedFrame {
  uint8_t* data = nullptr;  // the frame
  FrameLayout l;
  uint8_t opcode = 0;
  uint32_t mask = 0;  // kOpcodeTable[opcode].mask, computed once (house style rule 10)

  const OpcodeInfo& info() const noexcept { return kOpcodeTable[opcode]; }
  bool has(uint32_t bits) const noexcept { return (mask & bits) == bits; }
  const EthHdr& eth() const noexcept { return *reinterpret_cast<const EthHdr*>(data); }
  const Ipv4Hdr& ipv4() const noexcept { return at<Ipv4Hdr>(l.l3_off); }
  const Ipv6Hdr& ipv6() const noexcept { return at<Ipv6Hdr>(l.l3_off); }
  const UdpHdr& udp() const noexcept { return at<UdpHdr>(l.l4_off); }
  const Bth& bth() const noexcept { return at<Bth>(l.bth_off); }
  // Extension headers: valid only when `mask` has the header's bit.
  const Deth& deth() const noexcept { return ext<Deth>(Hdr::kDeth); }
  const Reth& reth() const noexcept { return ext<Reth>(Hdr::kReth); }
  const AtomicEth& atomic_eth() const noexcept { return ext<AtomicEth>(Hdr::kAtomicEth); }
  const Aeth& aeth() const noexcept { return ext<Aeth>(Hdr::kAeth); }
  const AtomicAckEth& atomic_ack() const noexcept { return ext<AtomicAckEth>(Hdr::kAtomicAckEth); }
  const ImmDt& imm() const noexcept { return ext<ImmDt>(Hdr::kImmDt); }
  const Ieth& ieth() const noexcept { return ext<Ieth>(Hdr::kIeth); }
  std::span<const uint8_t> payload() const noexcept {
    return {data + l.payload_off, l.payload_len};
  }

 private:
  template <typename H>
  const H& at(uint32_t off) const noexcept {
    return *reinterpret_cast<const H*>(data + off);
  }
  template <typename H>
  const H& ext(Hdr h) const noexcept {
    return at<H>(l.bth_off + kOpcodeTable[opcode].off(h));
  }
};

// Validates the Ethernet, IP, UDP and BTH framing and the opcode's header lengths. Does not
// check the ICRC (see icrc.h) so that the caller decides when to pay for it.
ParseError parse(uint8_t* data, size_t len, ParsedFrame& out) noexcept;

// ---- Building --------------------------------------------------------------------------------

// Link, network and UDP parameters of a frame: what a QP's address vector fixes (IBTA §10.2.1
// GRH fields mapped onto IP as in A17.4.5). Host byte order.
struct NetHeaders {
  MacAddr src_mac{};
  MacAddr dst_mac{};
  bool vlan = false;
  uint16_t vlan_tci = 0;
  bool ipv6 = false;
  uint32_t src_ip4 = 0;
  uint32_t dst_ip4 = 0;
  Ipv6Addr src_ip6{};
  Ipv6Addr dst_ip6{};
  uint8_t traffic_class = 0;  // IPv4 TOS / IPv6 traffic class
  uint8_t hop_limit = 64;     // IPv4 TTL / IPv6 hop limit
  uint32_t flow_label = 0;    // IPv6 only
  uint16_t ip_id = 0;         // IPv4 only; covered by the ICRC, so fixed before it is computed
  bool df = true;             // IPv4 DF: RoCEv2 frames are never fragmented
  uint16_t udp_sport = 0xC000;
  uint16_t udp_checksum = 0;  // 0 on transmit; kept only to re-build captured frames exactly
};

// The transport headers of a frame as wire structs. build_frame() copies the BTH (with PadCnt
// set from the payload length) and exactly the extension headers the opcode calls for.
struct TransportHeaders {
  Bth bth{};
  Deth deth{};
  Reth reth{};
  AtomicEth atomic_eth{};
  Aeth aeth{};
  AtomicAckEth atomic_ack{};
  ImmDt imm{};
  Ieth ieth{};
  CnpPad cnp{};
};

// Size of L2 .. last extension header for this opcode and these net headers.
uint32_t header_length(const NetHeaders& net, uint8_t opcode) noexcept;

// Largest frame build_frame() can produce for a payload of `payload_len` bytes.
inline uint32_t frame_length(const NetHeaders& net, uint8_t opcode, uint32_t payload_len) noexcept {
  return header_length(net, opcode) + payload_len + ((4 - (payload_len & 3)) & 3) + kIcrcLen;
}

// Writes the headers for a frame carrying `payload_len` payload bytes into `out`, and returns
// the offset at which the caller places the payload (or 0 if the opcode is unknown). Lengths,
// PadCnt and the IPv4 header checksum are filled in; pad and ICRC are written by finish_frame().
uint32_t build_headers(uint8_t* out, const NetHeaders& net, const TransportHeaders& th,
                       uint32_t payload_len) noexcept;

// A QP's network headers prebuilt once per address vector (issue 13 item 2): Ethernet (and
// VLAN), IP and UDP as build_headers() writes them, with the IP and UDP lengths and the IPv4
// checksum zero. build_headers(out, template, ...) copies them and patches the lengths and the
// checksum, which it derives from the sum of the fixed fields (RFC 1071: the ones' complement
// sum is order-free, so the length is added to it): the same bytes as build_headers(out, net,
// ...), without writing a dozen fields and summing the IPv4 header for every frame.
struct NetTemplate {
  static constexpr uint32_t kMaxLen = 14 + 4 + 40 + 8;  // Ethernet, VLAN tag, IPv6, UDP
  std::array<uint8_t, kMaxLen> bytes{};
  uint8_t len = 0;  // bytes of headers before the BTH; 0: no template (no address vector yet)
  uint8_t l3_off = 0;
  uint8_t l4_off = 0;
  bool ipv6 = false;
  uint32_t ip_sum = 0;  // IPv4: the ones' complement sum of the header as stored, unfolded
  bool valid() const noexcept { return len != 0; }
};
NetTemplate make_net_template(const NetHeaders& net) noexcept;
// build_headers() from a template: the same bytes as from the NetHeaders it was made of.
uint32_t build_headers(uint8_t* out, const NetTemplate& t, const TransportHeaders& th,
                       uint32_t payload_len) noexcept;
// Frame length for `payload_len` payload bytes, as frame_length() for the template's headers.
inline uint32_t frame_length(const NetTemplate& t, uint8_t opcode, uint32_t payload_len) noexcept {
  return t.len + kOpcodeTable[opcode].length + payload_len + ((4 - (payload_len & 3)) & 3) +
         kIcrcLen;
}

// The fused TX path (issue 13): the ICRC register over the LRH prefix and the masked headers of
// a frame whose headers build_headers() wrote (icrc.h icrc_header_crc); the payload copy then
// continues it (crc32_copy) and finish_frame_crc() pads, runs it over the pad and stores the
// ICRC. The same frame as finish_frame() makes, with the payload read once instead of twice.
uint32_t header_crc(const uint8_t* out, const NetHeaders& net, uint8_t opcode,
                    uint32_t payload_len) noexcept;
uint32_t finish_frame_crc(uint8_t* out, const NetHeaders& net, uint8_t opcode, uint32_t payload_len,
                          uint32_t state) noexcept;

// Writes the zero pad and the ICRC after a payload placed by the caller; returns the frame
// length. `out` must hold frame_length() bytes.
uint32_t finish_frame(uint8_t* out, const NetHeaders& net, uint8_t opcode,
                      uint32_t payload_len) noexcept;

// build_headers + copy of `payload` + finish_frame. Returns 0 if `cap` is too small.
uint32_t build_frame(std::span<uint8_t> out, const NetHeaders& net, const TransportHeaders& th,
                     std::span<const uint8_t> payload) noexcept;

// The inverse of build_frame for a parsed frame: the parameters that re-build it byte for byte.
NetHeaders net_headers_of(const ParsedFrame& f) noexcept;
TransportHeaders transport_headers_of(const ParsedFrame& f) noexcept;

// One's-complement checksum of the 20-byte IPv4 header at `h` (RFC 791 §3.1): with its checksum
// field 0, the value to put there; over a filled-in header, 0 when it is right.
uint16_t ipv4_checksum(const uint8_t* h) noexcept;
// RFC 1071: an unfolded ones' complement sum of 16-bit words folded to 16 bits and complemented,
// the value a checksum field carries.
constexpr uint16_t checksum_fold(uint32_t sum) noexcept {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// An ARP request or reply (RFC 826, IPv4 over Ethernet) from `src_mac` / `src_ip` to `dst_mac`
// about `tha` / `tpa`, zero-padded to the 60-byte Ethernet minimum: kArpFrameLen bytes at `out`.
inline constexpr uint32_t kArpFrameLen = 60;
void build_arp(uint8_t* out, uint16_t oper, const MacAddr& src_mac, uint32_t src_ip,
               const MacAddr& dst_mac, const MacAddr& tha, uint32_t tpa) noexcept;

// Linux's rdma_get_udp_sport(0, lqpn, rqpn) (include/rdma/ib_verbs.h): symmetric per-connection
// UDP source port in 0xC000-0xFFFF, so both ends of an RC connection use the same 5-tuple.
constexpr uint16_t udp_sport_for(uint32_t lqpn, uint32_t rqpn) noexcept {
  uint64_t v = static_cast<uint64_t>(lqpn) * rqpn;
  v ^= v >> 20;
  v ^= v >> 40;
  const uint32_t fl = static_cast<uint32_t>(v & 0xFFFFF);
  return static_cast<uint16_t>(((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)) | 0xC000);
}
static_assert(udp_sport_for(0x11, 0x12) == 0xC132 && udp_sport_for(0x123, 0x456) == 0xEDD1);

}  // namespace urnic::wire
