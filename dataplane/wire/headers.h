// RoCEv2 wire headers: Ethernet / IPv4 | IPv6 / UDP / BTH / extension headers (IBTA Vol. 1
// ch. 9.2-9.5, Annex A17). One trivially copyable struct per header, big-endian fields only,
// sub-fields reached through BitField accessors; no bitfields on the wire (house style rule 8).
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

#include "dataplane/wire/endian.h"

namespace urnic::wire {

// ---- Link and network layers -------------------------------------------------------------

using MacAddr = std::array<uint8_t, 6>;
using Ipv6Addr = std::array<uint8_t, 16>;

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800, kEtherTypeIpv6 = 0x86DD, kEtherTypeArp = 0x0806,
                          kEtherTypeVlan = 0x8100;
inline constexpr uint8_t kIpProtoUdp = 17, kIpProtoIcmpv6 = 58;
// IANA "RoCEv2" UDP destination port (IBTA Annex A17.2.1).
inline constexpr uint16_t kRoceV2Port = 4791;

struct EthHdr {
  MacAddr dst;
  MacAddr src;
  Be16 ether_type;
};
static_assert(sizeof(EthHdr) == 14);

struct VlanTag {
  Be16 tci;
  Be16 ether_type;
};
static_assert(sizeof(VlanTag) == 4);

struct Ipv4Hdr {
  uint8_t version_ihl;  // version 4, IHL 5: RoCEv2 never carries IP options.
  uint8_t tos;          // DSCP << 2 | ECN; GRH traffic class (A17.4.5.1). Masked in the ICRC.
  Be16 total_length;
  Be16 id;
  Be16 flags_frag;  // DF set, never fragmented (A17.4.5.1, rxe prepare4()).
  uint8_t ttl;      // GRH hop limit. Masked in the ICRC.
  uint8_t protocol;
  Be16 checksum;  // Masked in the ICRC, so it may be filled in after it.
  Be32 src;
  Be32 dst;

  constexpr uint8_t version() const noexcept { return version_ihl >> 4; }
  constexpr uint8_t ihl() const noexcept { return version_ihl & 0x0f; }
};
static_assert(sizeof(Ipv4Hdr) == 20);
inline constexpr uint16_t kIpv4FlagDf = 0x4000;

struct Ipv6Hdr {
  Be32 vtc_flow;  // version(4) | traffic class(8) | flow label(20)
  Be16 payload_length;
  uint8_t next_header;
  uint8_t hop_limit;
  Ipv6Addr src, dst;

  using Version = BitField<&Ipv6Hdr::vtc_flow, 0xf, 28>;
  using TrafficClass = BitField<&Ipv6Hdr::vtc_flow, 0xff, 20>;
  using FlowLabel = BitField<&Ipv6Hdr::vtc_flow, 0xfffff, 0>;
};
static_assert(sizeof(Ipv6Hdr) == 40);

struct UdpHdr {
  Be16 src_port;  // per-QP entropy (A17.3.1); receivers accept any value, including 0.
  Be16 dst_port;
  Be16 length;    // covers UDP header .. ICRC
  Be16 checksum;  // 0 on transmit (rxe does so for IPv4 and IPv6); ignored on receive.
};
static_assert(sizeof(UdpHdr) == 8);

// ARP for IPv4 over Ethernet (RFC 826). Handled by the control plane.
struct ArpHdr {
  Be16 htype;  // 1 = Ethernet
  Be16 ptype;  // 0x0800
  uint8_t hlen;
  uint8_t plen;
  Be16 oper;  // 1 request, 2 reply
  MacAddr sha;
  Be32 spa;
  MacAddr tha;
  Be32 tpa;
};
static_assert(sizeof(ArpHdr) == 28);
inline constexpr uint16_t kArpRequest = 1, kArpReply = 2;

// ICMPv6 header (RFC 4443) and the neighbour discovery messages (RFC 4861 §4.3-4.4).
struct Icmpv6Hdr {
  uint8_t type;
  uint8_t code;
  Be16 checksum;
};
static_assert(sizeof(Icmpv6Hdr) == 4);
inline constexpr uint8_t kIcmpv6NeighborSolicit = 135, kIcmpv6NeighborAdvert = 136;
struct NdMsg {  // NS and NA share the layout: 4 bytes (reserved / R,S,O flags) + target
  Be32 flags;
  Ipv6Addr target;
};
static_assert(sizeof(NdMsg) == 20);
struct NdLinkLayerOpt {  // source (1) / target (2) link-layer address option, 8 bytes
  uint8_t type;
  uint8_t len;  // in units of 8 bytes
  MacAddr mac;
};
static_assert(sizeof(NdLinkLayerOpt) == 8);
inline constexpr uint32_t kNaRouter = 0x80000000u, kNaSolicited = 0x40000000u,
                          kNaOverride = 0x20000000u;

// ---- InfiniBand transport headers (IBTA Vol. 1 §9.2-9.5) ------------------------------------

// Default partition key (IBTA §10.9.1.2); rxe and ConnectX drop anything else.
inline constexpr uint16_t kDefaultPkey = 0xFFFF;

// Base Transport Header, IBTA §9.2.
struct Bth {
  uint8_t opcode;
  Be8 flags;  // SE | M | PadCnt(2) | TVer(4)
  Be16 pkey;
  Be32 w1;  // FECN | BECN | resv6 | DestQP(24)
  Be32 w2;  // AckReq | resv7 | PSN(24)

  using Se = BitField<&Bth::flags, 0x1, 7>;
  using Mig = BitField<&Bth::flags, 0x1, 6>;
  using PadCnt = BitField<&Bth::flags, 0x3, 4>;
  using TVer = BitField<&Bth::flags, 0xf, 0>;
  using Fecn = BitField<&Bth::w1, 0x1, 31>;
  using Becn = BitField<&Bth::w1, 0x1, 30>;
  using Resv6 = BitField<&Bth::w1, 0x3f, 24>;
  using DestQp = BitField<&Bth::w1, 0xffffff, 0>;
  using AckReq = BitField<&Bth::w2, 0x1, 31>;
  using Resv7 = BitField<&Bth::w2, 0x7f, 24>;
  using Psn = BitField<&Bth::w2, 0xffffff, 0>;
};
static_assert(sizeof(Bth) == 12);

// RDMA Extended Transport Header, §9.3.3.
struct Reth {
  Be64 va;
  Be32 rkey;
  Be32 dma_length;
};
static_assert(sizeof(Reth) == 16);

// ACK Extended Transport Header, §9.3.5: syndrome(8) | MSN(24).
struct Aeth {
  Be32 w;
  using Syndrome = BitField<&Aeth::w, 0xff, 24>;
  using Msn = BitField<&Aeth::w, 0xffffff, 0>;
};

// Atomic Extended Transport Header, §9.3.4.
struct AtomicEth {
  Be64 va;
  Be32 rkey;
  Be64 swap_add;
  Be64 compare;
};
static_assert(sizeof(AtomicEth) == 28);

// Atomic ACK Extended Transport Header, §9.3.6.
struct AtomicAckEth {
  Be64 orig;
};

// Immediate data, §9.3.7: opaque, delivered as-is.
struct ImmDt {
  Be32 imm;
};

// Invalidate Extended Transport Header, §9.3.8.
struct Ieth {
  Be32 rkey;
};

// Datagram Extended Transport Header, §9.3.2: Q_Key | resv8 | SrcQP(24).
struct Deth {
  Be32 qkey;
  Be32 w;
  using SrcQp = BitField<&Deth::w, 0xffffff, 0>;
};

// Reserved body of a Congestion Notification Packet (A17.9.3): 16 zero bytes after the BTH.
struct CnpPad {
  std::array<uint8_t, 16> resv;
};

// The small extension headers, checked together.
static_assert(sizeof(Aeth) == 4);
static_assert(sizeof(AtomicAckEth) == 8);
static_assert(sizeof(ImmDt) == 4);
static_assert(sizeof(Ieth) == 4);
static_assert(sizeof(Deth) == 8);
static_assert(sizeof(CnpPad) == 16);
static_assert(std::is_trivially_copyable_v<Bth> && std::is_trivially_copyable_v<Ipv6Hdr> &&
              std::is_trivially_copyable_v<AtomicEth> && std::is_trivially_copyable_v<Deth>);
static_assert(alignof(Bth) == 1 && alignof(AtomicEth) == 1 && alignof(Ipv4Hdr) == 1);

inline constexpr uint32_t kIcrcLen = 4;

// AETH syndrome encoding, IBTA §9.7.5.1.4 / rxe_hdr.h: bits 6..5 select ACK / RNR NAK / NAK.
namespace aeth {
inline constexpr uint8_t kTypeMask = 0x60, kAck = 0x00, kRnrNak = 0x20, kNak = 0x60;
// The low five bits: the credit count of an ACK, the timer of an RNR NAK, the code of a NAK.
inline constexpr uint8_t kValueMask = 0x1f;
// ACK credit count 31: "no credit information" (what rxe and ConnectX send for RC).
inline constexpr uint8_t kAckNoCredit = 0x1f;
// NAK codes (§9.7.5.2.3).
inline constexpr uint8_t kNakPsnSeqError = 0x00, kNakInvalidRequest = 0x01,
                         kNakRemoteAccessError = 0x02, kNakRemoteOperationalError = 0x03,
                         kNakInvalidRdRequest = 0x04;
}  // namespace aeth

}  // namespace urnic::wire
