// The ICRC computed while the payload is copied (icrc.h: icrc_header_crc + crc32_copy + pad +
// icrc_finish / icrc_finish_check, issue 13) equals icrc_compute, icrc_reference and the known
// answers, with every CRC-32 implementation this CPU can run: on the shared vectors, and on
// frames from the project's builder (IPv4, IPv6, VLAN; several opcodes; payloads of every
// residue mod 16). A byte changed at any covered offset is detected by the fused check.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "dataplane/wire/crc32.h"
#include "dataplane/wire/frame.h"
#include "dataplane/wire/icrc.h"
#include "test_util.h"

namespace urnic::wire {

// Test names and failure messages show the implementation by name.
void PrintTo(Crc32Impl impl, std::ostream* os) { *os << to_string(impl); }

namespace {

// Payload split points for the copies (in addition to the whole payload in one piece).
const std::vector<std::vector<uint32_t>> kSplits = {{}, {1}, {7, 9}, {16, 16, 5}, {3, 64, 100}};

// TX: `frame` is a complete frame; builds it again in `out` from its headers and its payload,
// the payload copied in pieces by crc32_copy and the ICRC written by icrc_finish.
std::vector<uint8_t> fused_tx(const std::vector<uint8_t>& frame, const FrameLayout& l,
                              const std::vector<uint32_t>& pieces) {
  std::vector<uint8_t> out(frame.size(), 0xEE);
  std::memcpy(out.data(), frame.data(), l.payload_off);  // headers, as build_headers wrote them
  uint32_t s = icrc_header_crc(out.data(), l, l.payload_off);
  uint32_t at = 0;
  for (uint32_t n : pieces) {
    n = std::min(n, l.payload_len - at);
    s = crc32_copy(s, out.data() + l.payload_off + at, frame.data() + l.payload_off + at, n);
    at += n;
  }
  s = crc32_copy(s, out.data() + l.payload_off + at, frame.data() + l.payload_off + at,
                 l.payload_len - at);
  uint8_t* pad = out.data() + l.payload_off + l.payload_len;
  std::memset(pad, 0, l.pad);
  s = crc32_update(s, pad, l.pad);
  icrc_finish(out.data(), l, s);
  return out;
}

// RX: the fused check of `frame` while its payload is copied out in pieces to `payload`.
bool fused_rx(const std::vector<uint8_t>& frame, const FrameLayout& l,
              const std::vector<uint32_t>& pieces, std::vector<uint8_t>& payload) {
  payload.assign(l.payload_len, 0xEE);
  uint32_t s = icrc_header_crc(frame.data(), l, l.payload_off);
  uint32_t at = 0;
  for (uint32_t n : pieces) {
    n = std::min(n, l.payload_len - at);
    s = crc32_copy(s, payload.data() + at, frame.data() + l.payload_off + at, n);
    at += n;
  }
  s = crc32_copy(s, payload.data() + at, frame.data() + l.payload_off + at, l.payload_len - at);
  s = crc32_update(s, frame.data() + l.payload_off + l.payload_len, l.pad);
  return icrc_finish_check(frame.data(), l, s);
}

class IcrcFusedTest : public ::testing::TestWithParam<Crc32Impl> {
 protected:
  void SetUp() override {
    saved_ = crc32_impl();
    if (!crc32_set_impl(GetParam())) GTEST_SKIP() << "CPU lacks " << to_string(GetParam());
  }
  void TearDown() override { crc32_set_impl(saved_); }

  // Every fused form against the whole-frame functions for one parsed frame.
  void check_frame(std::vector<uint8_t> frame, const FrameLayout& l, const std::string& what) {
    const auto orig = frame;
    const uint32_t want = icrc_reference(frame.data(), l);
    EXPECT_EQ(icrc_compute(frame.data(), l), want) << what;
    EXPECT_EQ(icrc_value(icrc_header_crc(frame.data(), l, l.icrc_off)), want) << what;
    const std::span<const uint8_t> payload(frame.data() + l.payload_off, l.payload_len);
    for (const auto& pieces : kSplits) {
      EXPECT_EQ(fused_tx(frame, l, pieces), frame) << what;
      std::vector<uint8_t> copied;
      EXPECT_TRUE(fused_rx(frame, l, pieces, copied)) << what;
      EXPECT_TRUE(std::equal(copied.begin(), copied.end(), payload.begin(), payload.end())) << what;
    }
    EXPECT_EQ(frame, orig) << what << ": the header CRC wrote to the frame";
  }
  Crc32Impl saved_{};
};

TEST_P(IcrcFusedTest, SharedVectors) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::vectors_dir())) {
    if (e.path().extension() != ".hex") continue;
    auto frame = test::read_vector(e.path().filename().string());
    ParsedFrame f;
    ASSERT_EQ(parse(frame.data(), frame.size(), f), ParseError::kOk) << e.path();
    ASSERT_TRUE(icrc_check(frame.data(), f.l)) << e.path();
    check_frame(frame, f.l, e.path().filename().string());
    ++n;
  }
  EXPECT_GE(n, 16u);
}

struct Built {
  std::vector<uint8_t> frame;
  FrameLayout l;
};

Built build(bool ipv6, bool vlan, uint8_t opcode, uint32_t payload_len) {
  NetHeaders net;
  net.src_mac = {2, 0, 0, 0, 0, 1};
  net.dst_mac = {2, 0, 0, 0, 0, 2};
  net.ipv6 = ipv6;
  net.vlan = vlan;
  net.vlan_tci = 0x2064;
  net.src_ip4 = 0xC0000201;
  net.dst_ip4 = 0xC0000202;
  net.src_ip6 = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  net.dst_ip6 = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  net.traffic_class = 0x62;
  net.flow_label = 0x12345;
  TransportHeaders th;
  th.bth.opcode = opcode;
  th.bth.pkey = Be16::of(kDefaultPkey);
  Bth::DestQp::set(th.bth, 0x12u);
  Bth::Psn::set(th.bth, 0xABCDEFu);
  th.reth.va = Be64::of(0x7F0000001000ull);
  th.reth.rkey = Be32::of(0x1234);
  th.reth.dma_length = Be32::of(payload_len);
  th.imm.imm = Be32::of(0xDEADBEEF);
  th.deth.qkey = Be32::of(0x80010000u);
  std::vector<uint8_t> payload(payload_len);
  for (uint32_t i = 0; i < payload_len; ++i) payload[i] = static_cast<uint8_t>(i * 7 + 3);
  Built b;
  b.frame.resize(frame_length(net, opcode, payload_len));
  EXPECT_EQ(build_frame(b.frame, net, th, payload), b.frame.size());
  ParsedFrame f;
  EXPECT_EQ(parse(b.frame.data(), b.frame.size(), f), ParseError::kOk);
  b.l = f.l;
  return b;
}

TEST_P(IcrcFusedTest, BuiltFrames) {
  for (bool ipv6 : {false, true}) {
    for (bool vlan : {false, true}) {
      for (uint8_t op : {opc::kSendOnly, opc::kWriteOnly, opc::kSendOnlyImm, opc::kWriteOnlyImm,
                         opc::kReadRespOnly, opc::kUdSendOnly}) {
        for (uint32_t len : {0u,  1u,  2u,  3u,  4u,  5u,   8u,   13u,  15u,   16u,   17u,
                             31u, 48u, 63u, 64u, 65u, 100u, 255u, 256u, 1024u, 1027u, 4096u}) {
          const Built b = build(ipv6, vlan, op, len);
          check_frame(b.frame, b.l,
                      "ipv6 " + std::to_string(ipv6) + " vlan " + std::to_string(vlan) +
                          " opcode " + std::to_string(op) + " len " + std::to_string(len));
          if (HasFailure()) return;
        }
      }
    }
  }
}

// A byte changed at any offset from the IP header to the ICRC's last byte fails the fused
// check, except in the variant fields (which the ICRC does not cover by design); a byte of the
// Ethernet header, not covered either, does not matter.
TEST_P(IcrcFusedTest, CorruptionAtEveryOffsetIsDetected) {
  for (bool ipv6 : {false, true}) {
    const Built b = build(ipv6, false, opc::kWriteOnly, 333);
    const FrameLayout& l = b.l;
    auto variant = [&](uint32_t i) {
      if (i < l.l3_off) return true;  // not covered
      const uint32_t ip = i - l.l3_off;
      if (i < l.l4_off)
        return l.ipv6 ? (ip >= 1 && ip <= 3) || ip == 7
                      : (ip == 1 || ip == 8 || ip == 10 || ip == 11);
      return i == l.l4_off + 6u || i == l.l4_off + 7u || i == l.bth_off + 4u;
    };
    std::vector<uint8_t> copied;
    ASSERT_TRUE(fused_rx(b.frame, l, {}, copied));
    size_t detected = 0;
    for (uint32_t i = 0; i < b.frame.size(); ++i) {
      for (uint8_t flip : {0x01, 0x80, 0xFF}) {
        auto bad = b.frame;
        bad[i] ^= flip;
        // IPv6 byte 0: the high nibble is the version (covered), the low one traffic class.
        const bool covered = (ipv6 && i == l.l3_off) ? (flip & 0xF0) != 0 : !variant(i);
        for (const auto& pieces : kSplits) {
          EXPECT_EQ(fused_rx(bad, l, pieces, copied), !covered)
              << "ipv6 " << ipv6 << " byte " << i << " flip " << int(flip);
        }
        EXPECT_EQ(icrc_check(bad.data(), l), !covered) << "byte " << i;
        detected += covered;
      }
      if (HasFailure()) return;
    }
    EXPECT_GT(detected, 3 * (b.frame.size() - l.l3_off - 16));
  }
}

INSTANTIATE_TEST_SUITE_P(Impls, IcrcFusedTest,
                         ::testing::Values(Crc32Impl::kPortable, Crc32Impl::kPclmul,
                                           Crc32Impl::kAvx512),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace urnic::wire
