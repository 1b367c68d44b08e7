// Wire header structs: sizes, big-endian field encoding and the bit-field accessors.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "dataplane/wire/frame.h"
#include "dataplane/wire/headers.h"

namespace urnic::wire {
namespace {

template <typename H>
std::vector<uint8_t> bytes_of(const H& h) {
  std::vector<uint8_t> v(sizeof(H));
  std::memcpy(v.data(), &h, sizeof(H));
  return v;
}

TEST(WireHeaders, BigEndianStorage) {
  Reth r{};
  r.va = Be64::of(0x0102030405060708ull);
  r.rkey = Be32::of(0xA1B2C3D4);
  r.dma_length = Be32::of(0x10);
  const std::vector<uint8_t> want = {1, 2, 3, 4, 5, 6, 7, 8, 0xA1, 0xB2, 0xC3, 0xD4, 0, 0, 0, 0x10};
  EXPECT_EQ(bytes_of(r), want);
  EXPECT_EQ(r.va.get(), 0x0102030405060708ull);
}

TEST(WireHeaders, BthSubFields) {
  Bth b{};
  b.opcode = 0x0A;
  Bth::Se::set(b, 1u);
  Bth::PadCnt::set(b, 3u);
  Bth::TVer::set(b, 0u);
  b.pkey = Be16::of(0xFFFF);
  Bth::Becn::set(b, 1u);
  Bth::DestQp::set(b, 0xABCDEFu);
  Bth::AckReq::set(b, 1u);
  Bth::Psn::set(b, 0x123456u);
  const std::vector<uint8_t> want = {0x0A, 0xB0, 0xFF, 0xFF, 0x40, 0xAB,
                                     0xCD, 0xEF, 0x80, 0x12, 0x34, 0x56};
  EXPECT_EQ(bytes_of(b), want);
  // Setting one sub-field leaves its neighbours alone.
  Bth::Psn::set(b, 0xFFFFFFFFu);
  EXPECT_EQ(Bth::Psn::get(b), 0xFFFFFFu);
  EXPECT_EQ(Bth::AckReq::get(b), 1u);
  Bth::DestQp::set(b, 0u);
  EXPECT_EQ(Bth::Becn::get(b), 1u);
  EXPECT_EQ(Bth::Se::get(b), 1u);
  EXPECT_EQ(Bth::PadCnt::get(b), 3u);
}

TEST(WireHeaders, AethAndDeth) {
  Aeth a{};
  Aeth::Syndrome::set(a, 0x60u);
  Aeth::Msn::set(a, 7u);
  EXPECT_EQ(bytes_of(a), (std::vector<uint8_t>{0x60, 0, 0, 7}));
  Deth d{};
  d.qkey = Be32::of(0x80010000);
  Deth::SrcQp::set(d, 1u);
  EXPECT_EQ(bytes_of(d), (std::vector<uint8_t>{0x80, 0x01, 0, 0, 0, 0, 0, 1}));
}

TEST(WireHeaders, Ipv6VersionClassFlow) {
  Ipv6Hdr h{};
  Ipv6Hdr::Version::set(h, 6u);
  Ipv6Hdr::TrafficClass::set(h, 0x02u);
  Ipv6Hdr::FlowLabel::set(h, 0x12345u);
  EXPECT_EQ(h.vtc_flow.get(), 0x60212345u);
}

TEST(WireHeaders, BuildsIpv6AndIpv4WithSamePayload) {
  NetHeaders net;
  net.src_mac = {2, 0, 0, 0, 0, 1};
  net.dst_mac = {2, 0, 0, 0, 0, 2};
  TransportHeaders th;
  th.bth.opcode = opc::kWriteOnlyImm;
  th.bth.pkey = Be16::of(kDefaultPkey);
  Bth::DestQp::set(th.bth, 0x12u);
  th.reth.rkey = Be32::of(0x99);
  th.imm.imm = Be32::of(0xCAFEBABE);
  const std::vector<uint8_t> payload = {1, 2, 3, 4, 5, 6, 7};
  for (bool v6 : {false, true}) {
    net.ipv6 = v6;
    std::vector<uint8_t> buf(256);
    const uint32_t n = build_frame(buf, net, th, payload);
    ASSERT_EQ(n, frame_length(net, th.bth.opcode, 7));
    ParsedFrame f;
    ASSERT_EQ(parse(buf.data(), n, f), ParseError::kOk);
    EXPECT_EQ(f.l.ipv6, v6);
    EXPECT_EQ(f.l.pad, 1);
    EXPECT_EQ(f.imm().imm.get(), 0xCAFEBABEu);
    EXPECT_EQ(f.reth().rkey.get(), 0x99u);
    EXPECT_EQ(std::vector<uint8_t>(f.payload().begin(), f.payload().end()), payload);
    EXPECT_EQ(buf[f.l.payload_off + 7], 0);  // pad byte is zero
  }
}

TEST(WireHeaders, BuildRejectsTooSmallBufferAndUnknownOpcode) {
  NetHeaders net;
  TransportHeaders th;
  th.bth.opcode = opc::kSendOnly;
  std::vector<uint8_t> small(40);
  EXPECT_EQ(build_frame(small, net, th, {}), 0u);
  th.bth.opcode = 0x15;
  std::vector<uint8_t> big(256);
  EXPECT_EQ(build_frame(big, net, th, {}), 0u);
}

}  // namespace
}  // namespace urnic::wire

namespace urnic::wire {
namespace {

// A QP's prebuilt network headers (NetTemplate) give the same bytes as building every field:
// random address vectors (IPv4 and IPv6, with and without VLAN, any TOS, TTL, IP ID, DF, UDP
// source port), every valid opcode, payloads of 0 to 4 096 bytes (every pad). The IPv4 checksum
// comes from the template's sum plus the length, so sums that carry (high TOS, TTL and ID
// bytes) are covered, and the result is checked to verify as a header checksum.
TEST(WireHeaders, NetTemplateBuildsTheSameHeadersAsTheFields) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  auto rnd = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  uint32_t frames = 0;
  for (int round = 0; round < 400; ++round) {
    NetHeaders net;
    for (auto& b : net.src_mac) b = static_cast<uint8_t>(rnd());
    for (auto& b : net.dst_mac) b = static_cast<uint8_t>(rnd());
    net.vlan = (rnd() & 1) != 0;
    net.vlan_tci = static_cast<uint16_t>(rnd());
    net.ipv6 = (rnd() & 1) != 0;
    net.src_ip4 = static_cast<uint32_t>(rnd());
    net.dst_ip4 = round < 8 ? 0xFFFFFFFFu : static_cast<uint32_t>(rnd());
    for (auto& b : net.src_ip6) b = static_cast<uint8_t>(rnd());
    for (auto& b : net.dst_ip6) b = static_cast<uint8_t>(rnd());
    net.traffic_class = static_cast<uint8_t>(rnd());
    net.hop_limit = static_cast<uint8_t>(rnd());
    net.flow_label = static_cast<uint32_t>(rnd()) & 0xFFFFF;
    net.ip_id = static_cast<uint16_t>(rnd());
    net.df = (rnd() & 1) != 0;
    net.udp_sport = static_cast<uint16_t>(rnd());
    const NetTemplate t = make_net_template(net);
    ASSERT_TRUE(t.valid());
    for (uint32_t opcode = 0; opcode < 256; ++opcode) {
      if (!kOpcodeTable[opcode].valid()) continue;
      TransportHeaders th;
      th.bth.opcode = static_cast<uint8_t>(opcode);
      Bth::DestQp::set(th.bth, static_cast<uint32_t>(rnd()) & 0xFFFFFF);
      Bth::Psn::set(th.bth, static_cast<uint32_t>(rnd()) & 0xFFFFFF);
      th.reth.va = Be64::of(rnd());
      Aeth::Msn::set(th.aeth, static_cast<uint32_t>(rnd()) & 0xFFFFFF);
      const auto plen = static_cast<uint32_t>(round < 8 ? 4096 - round : rnd() % 4097);
      const uint32_t n = frame_length(net, th.bth.opcode, plen);
      ASSERT_EQ(frame_length(t, th.bth.opcode, plen), n);
      std::vector<uint8_t> a(n, 0xAA), b(n, 0xAA);
      const uint32_t off_a = build_headers(a.data(), net, th, plen);
      const uint32_t off_b = build_headers(b.data(), t, th, plen);
      ASSERT_EQ(off_a, off_b);
      ASSERT_EQ(a, b) << "opcode " << opcode << " payload " << plen << " ipv6 " << net.ipv6
                      << " vlan " << net.vlan;
      if (!net.ipv6) {
        EXPECT_EQ(ipv4_checksum(b.data() + (net.vlan ? 18 : 14)), 0);
      }
      ++frames;
    }
  }
  EXPECT_GT(frames, 400u * 20);
}

}  // namespace
}  // namespace urnic::wire
