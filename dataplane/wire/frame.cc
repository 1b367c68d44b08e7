#include "dataplane/wire/frame.h"

#include <array>
#include <cstring>

#include "dataplane/wire/crc32.h"
#include "dataplane/wire/icrc.h"

namespace urnic::wire {

namespace {

constexpr std::array<std::string_view, static_cast<size_t>(ParseError::kCount)> kParseErrorNames = {
    "ok",
    "truncated",
    "not_ip",
    "bad_ip_version",
    "ip_options",
    "ip_fragment",
    "not_udp",
    "wrong_udp_port",
    "ip_length_mismatch",
    "udp_length_mismatch",
    "bad_tver",
    "bad_pkey",
    "unknown_opcode",
    "header_truncated",
    "pad_too_large",
    "payload_not_allowed",
    "bad_icrc"};

inline uint16_t load_be16(const uint8_t* p) noexcept {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}

// The ones' complement sum of the 20-byte IPv4 header at `h`, unfolded (checksum_fold).
uint32_t ipv4_sum(const uint8_t* h) noexcept {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += load_be16(h + i);
  return sum;
}

constexpr uint32_t l2_len(const NetHeaders& net) noexcept {
  return sizeof(EthHdr) + (net.vlan ? sizeof(VlanTag) : 0);
}
constexpr uint32_t l3_len(const NetHeaders& net) noexcept {
  return net.ipv6 ? sizeof(Ipv6Hdr) : sizeof(Ipv4Hdr);
}
constexpr uint8_t pad_for(uint32_t payload_len) noexcept {
  return static_cast<uint8_t>((4 - (payload_len & 3)) & 3);
}

FrameLayout layout_for(const NetHeaders& net, uint8_t opcode, uint32_t payload_len) noexcept {
  FrameLayout l;
  l.vlan = net.vlan;
  l.ipv6 = net.ipv6;
  l.l3_off = static_cast<uint16_t>(l2_len(net));
  l.l4_off = static_cast<uint16_t>(l.l3_off + l3_len(net));
  l.bth_off = static_cast<uint16_t>(l.l4_off + sizeof(UdpHdr));
  l.payload_off = static_cast<uint16_t>(l.bth_off + kOpcodeTable[opcode].length);
  l.payload_len = payload_len;
  l.pad = pad_for(payload_len);
  l.icrc_off = static_cast<uint16_t>(l.payload_off + payload_len + l.pad);
  return l;
}

// Calls f(Hdr, header) for each extension header field of a TransportHeaders (const or not),
// in wire order: build() writes the ones the opcode carries, transport_headers_of() reads them.
template <class Th, class F>
void for_each_ext_header(Th& th, F&& f) {
  f(Hdr::kDeth, th.deth);
  f(Hdr::kReth, th.reth);
  f(Hdr::kAtomicEth, th.atomic_eth);
  f(Hdr::kAeth, th.aeth);
  f(Hdr::kAtomicAckEth, th.atomic_ack);
  f(Hdr::kImmDt, th.imm);
  f(Hdr::kIeth, th.ieth);
  f(Hdr::kCnpPad, th.cnp);
}

// The BTH (PadCnt set to `pad`) and the extension headers the opcode carries, at `bth`.
void write_transport(uint8_t* bth, const OpcodeInfo& info, const TransportHeaders& th,
                     uint8_t pad) noexcept {
  auto* b = reinterpret_cast<Bth*>(bth);
  *b = th.bth;
  Bth::PadCnt::set(*b, pad);
  for_each_ext_header(th, [&](Hdr h, const auto& hdr) {
    if (info.mask & op::hdr_bit(h)) std::memcpy(bth + info.off(h), &hdr, sizeof(hdr));
  });
}

}  // namespace

std::string_view to_string(ParseError e) noexcept {
  const auto i = static_cast<size_t>(e);
  return i < kParseErrorNames.size() ? kParseErrorNames[i] : "unknown";
}

ParseError parse(uint8_t* data, size_t len, ParsedFrame& out) noexcept {
  // Frames above 64 KiB do not exist on Ethernet; refusing them keeps every offset in 16 bits.
  if (len < sizeof(EthHdr) || len > 0xFFFF) return ParseError::kTruncated;
  FrameLayout l;
  uint32_t off = sizeof(EthHdr);
  uint16_t et = load_be16(data + 12);
  if (et == kEtherTypeVlan) {
    if (len < off + sizeof(VlanTag)) return ParseError::kTruncated;
    et = load_be16(data + 16);
    off += sizeof(VlanTag);
    l.vlan = true;
  }
  l.l3_off = static_cast<uint16_t>(off);

  // Network layer. `end` is where the IP packet ends; bytes after it are Ethernet padding.
  uint32_t end = 0;
  if (et == kEtherTypeIpv4) {
    if (len < off + sizeof(Ipv4Hdr)) return ParseError::kTruncated;
    const auto& ip = *reinterpret_cast<const Ipv4Hdr*>(data + off);
    if (ip.version() != 4) return ParseError::kBadIpVersion;
    if (ip.ihl() != 5) return ParseError::kIpOptions;
    // MF flag or a non-zero fragment offset: a fragment (A17.4.5.1 forbids fragmentation).
    if (ip.flags_frag.get() & 0x3FFF) return ParseError::kIpFragment;
    if (ip.protocol != kIpProtoUdp) return ParseError::kNotUdp;
    const uint32_t total = ip.total_length.get();
    if (total < sizeof(Ipv4Hdr) + sizeof(UdpHdr) || off + total > len)
      return ParseError::kIpLengthMismatch;
    end = off + total;
    off += sizeof(Ipv4Hdr);
  } else if (et == kEtherTypeIpv6) {
    if (len < off + sizeof(Ipv6Hdr)) return ParseError::kTruncated;
    const auto& ip = *reinterpret_cast<const Ipv6Hdr*>(data + off);
    if (Ipv6Hdr::Version::get(ip) != 6) return ParseError::kBadIpVersion;
    // RoCEv2 over IPv6 carries no extension headers: the next header is UDP itself.
    if (ip.next_header != kIpProtoUdp) return ParseError::kNotUdp;
    const uint32_t plen = ip.payload_length.get();
    if (plen < sizeof(UdpHdr) || off + sizeof(Ipv6Hdr) + plen > len)
      return ParseError::kIpLengthMismatch;
    end = off + sizeof(Ipv6Hdr) + plen;
    off += sizeof(Ipv6Hdr);
    l.ipv6 = true;
  } else {
    return ParseError::kNotIp;
  }
  l.l4_off = static_cast<uint16_t>(off);

  // Transport: UDP must cover exactly the rest of the IP packet.
  const auto& udp = *reinterpret_cast<const UdpHdr*>(data + off);
  if (udp.dst_port.get() != kRoceV2Port) return ParseError::kWrongUdpPort;
  const uint32_t ulen = udp.length.get();
  if (off + ulen != end) return ParseError::kUdpLengthMismatch;
  off += sizeof(UdpHdr);
  l.bth_off = static_cast<uint16_t>(off);
  if (end < off + sizeof(Bth) + kIcrcLen) return ParseError::kHeaderTruncated;

  const auto& bth = *reinterpret_cast<const Bth*>(data + off);
  if (Bth::TVer::get(bth) != 0) return ParseError::kBadTver;
  // Every urnic QP holds the default partition as a full member (0xFFFF). A packet matches when
  // the low 15 bits agree and one side is a full member (IBTA §10.9.3): 0xFFFF, and 0x7FFF from
  // a limited member of the same partition (urnic-conform limited_pkey_accepted).
  if ((bth.pkey.get() & 0x7FFF) != (kDefaultPkey & 0x7FFF)) return ParseError::kBadPkey;
  const OpcodeInfo& info = kOpcodeTable[bth.opcode];
  if (!info.valid()) return ParseError::kUnknownOpcode;
  if (end < off + info.length + kIcrcLen) return ParseError::kHeaderTruncated;

  l.payload_off = static_cast<uint16_t>(off + info.length);
  l.icrc_off = static_cast<uint16_t>(end - kIcrcLen);
  const uint32_t rest = l.icrc_off - l.payload_off;  // payload + pad
  l.pad = static_cast<uint8_t>(Bth::PadCnt::get(bth));
  if (l.pad > rest) return ParseError::kPadTooLarge;
  l.payload_len = rest - l.pad;
  if (rest != 0 && !(info.mask & op::kPayload)) return ParseError::kPayloadNotAllowed;

  out.data = data;
  out.l = l;
  out.opcode = bth.opcode;
  out.mask = info.mask;
  return ParseError::kOk;
}

uint32_t header_length(const NetHeaders& net, uint8_t opcode) noexcept {
  return l2_len(net) + l3_len(net) + sizeof(UdpHdr) + kOpcodeTable[opcode].length;
}

uint32_t build_headers(uint8_t* out, const NetHeaders& net, const TransportHeaders& th,
                       uint32_t payload_len) noexcept {
  const uint8_t opcode = th.bth.opcode;
  const OpcodeInfo& info = kOpcodeTable[opcode];
  if (!info.valid()) return 0;
  const FrameLayout l = layout_for(net, opcode, payload_len);
  const uint32_t udp_len = l.icrc_off + kIcrcLen - l.l4_off;

  auto* eth = reinterpret_cast<EthHdr*>(out);
  eth->dst = net.dst_mac;
  eth->src = net.src_mac;
  if (net.vlan) {
    eth->ether_type = Be16::of(kEtherTypeVlan);
    auto* tag = reinterpret_cast<VlanTag*>(out + sizeof(EthHdr));
    tag->tci = Be16::of(net.vlan_tci);
    tag->ether_type = Be16::of(net.ipv6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
  } else {
    eth->ether_type = Be16::of(net.ipv6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
  }

  if (net.ipv6) {
    auto* ip = reinterpret_cast<Ipv6Hdr*>(out + l.l3_off);
    ip->vtc_flow = Be32::of(0);
    Ipv6Hdr::Version::set(*ip, 6u);
    Ipv6Hdr::TrafficClass::set(*ip, net.traffic_class);
    Ipv6Hdr::FlowLabel::set(*ip, net.flow_label);
    ip->payload_length = Be16::of(static_cast<uint16_t>(udp_len));
    ip->next_header = kIpProtoUdp;
    ip->hop_limit = net.hop_limit;
    ip->src = net.src_ip6;
    ip->dst = net.dst_ip6;
  } else {
    auto* ip = reinterpret_cast<Ipv4Hdr*>(out + l.l3_off);
    ip->version_ihl = 0x45;
    ip->tos = net.traffic_class;
    ip->total_length = Be16::of(static_cast<uint16_t>(sizeof(Ipv4Hdr) + udp_len));
    ip->id = Be16::of(net.ip_id);
    ip->flags_frag = Be16::of(net.df ? kIpv4FlagDf : 0);
    ip->ttl = net.hop_limit;
    ip->protocol = kIpProtoUdp;
    ip->checksum = Be16::of(0);
    ip->src = Be32::of(net.src_ip4);
    ip->dst = Be32::of(net.dst_ip4);
    ip->checksum = Be16::of(ipv4_checksum(out + l.l3_off));
  }

  auto* udp = reinterpret_cast<UdpHdr*>(out + l.l4_off);
  udp->src_port = Be16::of(net.udp_sport);
  udp->dst_port = Be16::of(kRoceV2Port);
  udp->length = Be16::of(static_cast<uint16_t>(udp_len));
  udp->checksum = Be16::of(net.udp_checksum);

  write_transport(out + l.bth_off, info, th, l.pad);
  return l.payload_off;
}

NetTemplate make_net_template(const NetHeaders& net) noexcept {
  NetTemplate t;
  // The headers of any valid frame, cut before the BTH, with what depends on its length zeroed.
  std::array<uint8_t, NetTemplate::kMaxLen + 64> f{};
  TransportHeaders th;
  th.bth.opcode = opc::kAcknowledge;
  const FrameLayout l = layout_for(net, th.bth.opcode, 0);
  build_headers(f.data(), net, th, 0);
  std::memcpy(t.bytes.data(), f.data(), l.bth_off);
  t.len = static_cast<uint8_t>(l.bth_off);
  t.l3_off = static_cast<uint8_t>(l.l3_off);
  t.l4_off = static_cast<uint8_t>(l.l4_off);
  t.ipv6 = net.ipv6;
  uint8_t* const ip = t.bytes.data() + l.l3_off;
  if (net.ipv6) {
    reinterpret_cast<Ipv6Hdr*>(ip)->payload_length = Be16::of(0);
  } else {
    auto* h = reinterpret_cast<Ipv4Hdr*>(ip);
    h->total_length = Be16::of(0);
    h->checksum = Be16::of(0);
    t.ip_sum = ipv4_sum(ip);
  }
  reinterpret_cast<UdpHdr*>(t.bytes.data() + l.l4_off)->length = Be16::of(0);
  return t;
}

uint32_t build_headers(uint8_t* out, const NetTemplate& t, const TransportHeaders& th,
                       uint32_t payload_len) noexcept {
  const OpcodeInfo& info = kOpcodeTable[th.bth.opcode];
  if (!info.valid() || !t.valid()) return 0;
  // Ethernet + IPv4 + UDP, the common case, as a fixed-size copy the compiler inlines.
  constexpr uint32_t kIpv4Len = sizeof(EthHdr) + sizeof(Ipv4Hdr) + sizeof(UdpHdr);
  if (t.len == kIpv4Len) [[likely]]
    std::memcpy(out, t.bytes.data(), kIpv4Len);
  else
    std::memcpy(out, t.bytes.data(), t.len);
  const uint32_t payload_off = t.len + info.length;
  const uint8_t pad = pad_for(payload_len);
  const uint32_t udp_len = payload_off + payload_len + pad + kIcrcLen - t.l4_off;
  uint8_t* const ip = out + t.l3_off;
  if (t.ipv6) {
    reinterpret_cast<Ipv6Hdr*>(ip)->payload_length = Be16::of(static_cast<uint16_t>(udp_len));
  } else {
    const auto total = static_cast<uint16_t>(sizeof(Ipv4Hdr) + udp_len);
    auto* h = reinterpret_cast<Ipv4Hdr*>(ip);
    h->total_length = Be16::of(total);
    h->checksum = Be16::of(checksum_fold(t.ip_sum + total));
  }
  reinterpret_cast<UdpHdr*>(out + t.l4_off)->length = Be16::of(static_cast<uint16_t>(udp_len));
  write_transport(out + t.len, info, th, pad);
  return payload_off;
}

uint32_t finish_frame(uint8_t* out, const NetHeaders& net, uint8_t opcode,
                      uint32_t payload_len) noexcept {
  const FrameLayout l = layout_for(net, opcode, payload_len);
  // Pad bytes are zero and covered by the ICRC (IBTA §9.2.1.6 / rocev2.md §1.2).
  std::memset(out + l.payload_off + payload_len, 0, l.pad);
  icrc_write(out, l);
  return l.frame_len();
}

uint32_t header_crc(const uint8_t* out, const NetHeaders& net, uint8_t opcode,
                    uint32_t payload_len) noexcept {
  const FrameLayout l = layout_for(net, opcode, payload_len);
  return icrc_header_crc(out, l, l.payload_off);
}

uint32_t finish_frame_crc(uint8_t* out, const NetHeaders& net, uint8_t opcode, uint32_t payload_len,
                          uint32_t state) noexcept {
  const FrameLayout l = layout_for(net, opcode, payload_len);
  uint8_t* pad = out + l.payload_off + payload_len;
  std::memset(pad, 0, l.pad);
  icrc_finish(out, l, crc32_update(state, pad, l.pad));
  return l.frame_len();
}

uint32_t build_frame(std::span<uint8_t> out, const NetHeaders& net, const TransportHeaders& th,
                     std::span<const uint8_t> payload) noexcept {
  const uint8_t opcode = th.bth.opcode;
  if (!kOpcodeTable[opcode].valid()) return 0;
  const auto plen = static_cast<uint32_t>(payload.size());
  if (frame_length(net, opcode, plen) > out.size() || frame_length(net, opcode, plen) > 0xFFFF)
    return 0;
  const uint32_t at = build_headers(out.data(), net, th, plen);
  if (plen != 0) std::memcpy(out.data() + at, payload.data(), plen);
  return finish_frame(out.data(), net, opcode, plen);
}

NetHeaders net_headers_of(const ParsedFrame& f) noexcept {
  NetHeaders n;
  const auto& eth = f.eth();
  n.dst_mac = eth.dst;
  n.src_mac = eth.src;
  n.vlan = f.l.vlan;
  if (f.l.vlan) n.vlan_tci = reinterpret_cast<const VlanTag*>(f.data + sizeof(EthHdr))->tci.get();
  n.ipv6 = f.l.ipv6;
  if (f.l.ipv6) {
    const auto& ip = f.ipv6();
    n.src_ip6 = ip.src;
    n.dst_ip6 = ip.dst;
    n.traffic_class = static_cast<uint8_t>(Ipv6Hdr::TrafficClass::get(ip));
    n.flow_label = Ipv6Hdr::FlowLabel::get(ip);
    n.hop_limit = ip.hop_limit;
  } else {
    const auto& ip = f.ipv4();
    n.src_ip4 = ip.src.get();
    n.dst_ip4 = ip.dst.get();
    n.traffic_class = ip.tos;
    n.hop_limit = ip.ttl;
    n.ip_id = ip.id.get();
    n.df = (ip.flags_frag.get() & kIpv4FlagDf) != 0;
  }
  n.udp_sport = f.udp().src_port.get();
  n.udp_checksum = f.udp().checksum.get();
  return n;
}

TransportHeaders transport_headers_of(const ParsedFrame& f) noexcept {
  TransportHeaders t;
  t.bth = f.bth();
  const OpcodeInfo& info = f.info();
  const uint8_t* base = f.data + f.l.bth_off;
  for_each_ext_header(t, [&](Hdr h, auto& hdr) {
    if (info.mask & op::hdr_bit(h)) std::memcpy(&hdr, base + info.off(h), sizeof(hdr));
  });
  return t;
}

uint16_t ipv4_checksum(const uint8_t* h) noexcept { return checksum_fold(ipv4_sum(h)); }

void build_arp(uint8_t* out, uint16_t oper, const MacAddr& src_mac, uint32_t src_ip,
               const MacAddr& dst_mac, const MacAddr& tha, uint32_t tpa) noexcept {
  std::memset(out, 0, kArpFrameLen);
  auto& eth = *reinterpret_cast<EthHdr*>(out);
  eth.dst = dst_mac;
  eth.src = src_mac;
  eth.ether_type = Be16::of(kEtherTypeArp);
  auto& a = *reinterpret_cast<ArpHdr*>(out + sizeof(EthHdr));
  a.htype = Be16::of(1);
  a.ptype = Be16::of(kEtherTypeIpv4);
  a.hlen = 6;
  a.plen = 4;
  a.oper = Be16::of(oper);
  a.sha = src_mac;
  a.spa = Be32::of(src_ip);
  a.tha = tha;
  a.tpa = Be32::of(tpa);
}

}  // namespace urnic::wire

namespace urnic {

// Every name in the table is a string literal, so data() is NUL-terminated.
const char* parse_error_name(size_t index) noexcept {
  return wire::to_string(static_cast<wire::ParseError>(index)).data();
}

}  // namespace urnic
