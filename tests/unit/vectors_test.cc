// Known-answer tests (issue: wire format and ICRC): every frame in the shared vectors parses,
// has its ICRC verified by icrc_compute (crc32.h) and by the bitwise reference, re-builds byte for
// byte from its parsed fields, and any corrupted covered byte is detected.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "dataplane/wire/frame.h"
#include "dataplane/wire/icrc.h"
#include "test_util.h"

namespace urnic::wire {
namespace {

using test::read_vector;

// Expected ICRC values, from the table in shared/vectors/README.md (agreed by scapy, the rxe
// reference, tshark+Lua, a C++ reference and zlib; the ConnectX-4 Lx CNP by hardware).
const std::map<std::string, uint32_t> kExpected = {
    {"rc_send_only.hex", 0xA6FD5B24},
    {"rc_send_only_pad3.hex", 0xA08C5108},
    {"rc_send_only_imm.hex", 0x8CBB89E2},
    {"rc_send_only_inv.hex", 0x25B9A4C6},
    {"ipv6_rc_send_only.hex", 0x0580CDC6},
    {"rc_write_only.hex", 0x1D2A8224},
    {"rc_read_req.hex", 0xDB77EAFB},
    {"rc_read_resp_only.hex", 0x3A4B036D},
    {"rc_cmp_swap.hex", 0x1F554ABE},
    {"rc_atomic_ack.hex", 0xDF0CC7B7},
    {"rc_ack.hex", 0x87D7BC45},
    {"rc_rnr_nak.hex", 0xB8471317},
    {"rc_nak_seq_err.hex", 0x86AD0758},
    {"cnp.hex", 0xB46E7A60},
    {"cnp_connectx4lx_hw.hex", 0x2A00FD82},
    {"ud_qp1_cm_req.hex", 0xE75D08A0},
};

class VectorTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VectorTest, ParsesAndIcrcMatchesKnownAnswer) {
  auto frame = read_vector(GetParam());
  ASSERT_FALSE(frame.empty());
  ParsedFrame f;
  ASSERT_EQ(parse(frame.data(), frame.size(), f), ParseError::kOk);
  EXPECT_EQ(f.l.frame_len(), frame.size());
  const uint32_t expected = kExpected.at(GetParam());
  EXPECT_EQ(icrc_compute(frame.data(), f.l), expected);
  EXPECT_EQ(icrc_reference(frame.data(), f.l), expected);
  EXPECT_TRUE(icrc_check(frame.data(), f.l));
  // The check restores every byte it masks.
  EXPECT_EQ(frame, read_vector(GetParam()));
}

TEST_P(VectorTest, RebuildsByteIdentically) {
  auto frame = read_vector(GetParam());
  ParsedFrame f;
  ASSERT_EQ(parse(frame.data(), frame.size(), f), ParseError::kOk);
  const NetHeaders net = net_headers_of(f);
  const TransportHeaders th = transport_headers_of(f);
  std::vector<uint8_t> out(frame.size() + 64, 0xAA);
  const uint32_t n = build_frame(out, net, th, f.payload());
  ASSERT_EQ(n, frame.size());
  out.resize(n);
  EXPECT_EQ(out, frame);
  // header_length/frame_length agree with what was built.
  EXPECT_EQ(header_length(net, f.opcode), f.l.payload_off);
  EXPECT_EQ(frame_length(net, f.opcode, f.l.payload_len), frame.size());
}

TEST_P(VectorTest, EveryCoveredByteIsProtected) {
  const auto orig = read_vector(GetParam());
  auto frame = orig;
  ParsedFrame f;
  ASSERT_EQ(parse(frame.data(), frame.size(), f), ParseError::kOk);
  const FrameLayout l = f.l;
  auto variant = [&](uint32_t i) {
    const uint32_t ip = i - l.l3_off;
    if (i < l.l4_off)
      return l.ipv6 ? (ip <= 3 || ip == 7) : (ip == 1 || ip == 8 || ip == 10 || ip == 11);
    return i == l.l4_off + 6u || i == l.l4_off + 7u || i == l.bth_off + 4u;
  };
  size_t detected = 0, tolerated = 0;
  for (uint32_t i = l.l3_off; i < frame.size(); ++i) {
    for (uint8_t bit : {0x01, 0x80}) {
      frame = orig;
      frame[i] ^= bit;
      ParsedFrame g;
      const bool parsed = parse(frame.data(), frame.size(), g) == ParseError::kOk;
      const bool ok = parsed && g.l.icrc_off == l.icrc_off && icrc_check(frame.data(), g.l);
      if (l.ipv6 && i == l.l3_off && bit == 0x80) {
        EXPECT_FALSE(ok) << "IPv6 version bit at " << i;  // version is covered
      } else if (variant(i)) {
        // IPv6 byte 0 low nibble is traffic class (variant); the high nibble is the version.
        EXPECT_TRUE(ok) << "variant field byte " << i << " must not affect the ICRC";
        ++tolerated;
        continue;
      } else {
        EXPECT_FALSE(ok) << "corruption of byte " << i << " bit " << int(bit) << " not detected";
      }
      ++detected;
    }
  }
  EXPECT_GT(detected, 2 * (frame.size() - l.l3_off - 16));
  EXPECT_GT(tolerated, 0u);
}

INSTANTIATE_TEST_SUITE_P(AllSharedVectors, VectorTest,
                         ::testing::Values("rc_send_only.hex", "rc_send_only_pad3.hex",
                                           "rc_send_only_imm.hex", "rc_send_only_inv.hex",
                                           "ipv6_rc_send_only.hex", "rc_write_only.hex",
                                           "rc_read_req.hex", "rc_read_resp_only.hex",
                                           "rc_cmp_swap.hex", "rc_atomic_ack.hex", "rc_ack.hex",
                                           "rc_rnr_nak.hex", "rc_nak_seq_err.hex", "cnp.hex",
                                           "cnp_connectx4lx_hw.hex", "ud_qp1_cm_req.hex"),
                         [](const auto& info) {
                           std::string n = info.param;
                           return n.substr(0, n.find('.'));
                         });

// Every vector in the project copy is in the list above, and the copy equals shared/vectors.
TEST(Vectors, ProjectCopyMatchesSharedAndIsComplete) {
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::vectors_dir())) {
    if (e.path().extension() != ".hex") continue;
    ++files;
    EXPECT_TRUE(kExpected.count(e.path().filename().string())) << e.path();
    const auto shared = std::filesystem::path(URNIC_SHARED_DIR) / "vectors" / e.path().filename();
    if (std::filesystem::exists(shared)) {
      std::ifstream a(e.path()), b(shared);
      std::stringstream sa, sb;
      sa << a.rdbuf();
      sb << b.rdbuf();
      EXPECT_EQ(sa.str(), sb.str()) << shared;
    }
  }
  EXPECT_EQ(files, kExpected.size());
}

// Field-by-field checks of the primary vector (rocev2.md §2.4, vectors/README.md).
TEST(Vectors, PrimaryVectorFields) {
  auto frame = read_vector("rc_send_only.hex");
  ParsedFrame f;
  ASSERT_EQ(parse(frame.data(), frame.size(), f), ParseError::kOk);
  EXPECT_EQ(f.opcode, opc::kSendOnly);
  EXPECT_TRUE(f.has(op::kRc | op::kReq | op::kSend | op::kOnly));
  EXPECT_FALSE(f.l.ipv6);
  EXPECT_EQ(f.ipv4().src.get(), 0xC0000201u);
  EXPECT_EQ(f.ipv4().dst.get(), 0xC0000202u);
  EXPECT_EQ(f.ipv4().tos, 0x02);
  EXPECT_EQ(f.ipv4().ttl, 64);
  EXPECT_EQ(f.ipv4().flags_frag.get(), kIpv4FlagDf);
  EXPECT_EQ(f.udp().src_port.get(), 0xC132);
  EXPECT_EQ(f.udp().checksum.get(), 0);
  EXPECT_EQ(Bth::DestQp::get(f.bth()), 0x12u);
  EXPECT_EQ(Bth::Psn::get(f.bth()), 0x123456u);
  EXPECT_EQ(Bth::AckReq::get(f.bth()), 1u);
  EXPECT_EQ(Bth::Se::get(f.bth()), 0u);
  EXPECT_EQ(Bth::PadCnt::get(f.bth()), 0u);
  EXPECT_EQ(f.bth().pkey.get(), 0xFFFF);
  const std::string payload(f.payload().begin(), f.payload().end());
  EXPECT_EQ(payload, "Hello, RoCEv2!!!");
}

TEST(Vectors, ExtensionHeaderFields) {
  auto w = read_vector("rc_write_only.hex");
  ParsedFrame f;
  ASSERT_EQ(parse(w.data(), w.size(), f), ParseError::kOk);
  EXPECT_EQ(f.reth().va.get(), 0x00007F0000001000ull);
  EXPECT_EQ(f.reth().rkey.get(), 0x1234u);
  EXPECT_EQ(f.reth().dma_length.get(), 8u);
  EXPECT_EQ(f.l.payload_len, 8u);

  auto c = read_vector("rc_cmp_swap.hex");
  ASSERT_EQ(parse(c.data(), c.size(), f), ParseError::kOk);
  EXPECT_EQ(f.atomic_eth().va.get(), 0x00007F0000003000ull);
  EXPECT_EQ(f.atomic_eth().rkey.get(), 0x9ABCu);
  EXPECT_EQ(f.atomic_eth().swap_add.get(), 0x2222222222222222ull);
  EXPECT_EQ(f.atomic_eth().compare.get(), 0x1111111111111111ull);

  auto a = read_vector("rc_atomic_ack.hex");
  ASSERT_EQ(parse(a.data(), a.size(), f), ParseError::kOk);
  EXPECT_EQ(Aeth::Syndrome::get(f.aeth()), 0x1Fu);
  EXPECT_EQ(Aeth::Msn::get(f.aeth()), 4u);
  EXPECT_EQ(f.atomic_ack().orig.get(), 0x1111111111111111ull);

  auto r = read_vector("rc_rnr_nak.hex");
  ASSERT_EQ(parse(r.data(), r.size(), f), ParseError::kOk);
  EXPECT_EQ(Aeth::Syndrome::get(f.aeth()) & aeth::kTypeMask, aeth::kRnrNak);
  EXPECT_EQ(Aeth::Syndrome::get(f.aeth()) & aeth::kValueMask, 14u);

  auto p = read_vector("rc_send_only_pad3.hex");
  ASSERT_EQ(parse(p.data(), p.size(), f), ParseError::kOk);
  EXPECT_EQ(f.l.pad, 3);
  EXPECT_EQ(f.l.payload_len, 5u);

  auto i = read_vector("rc_send_only_imm.hex");
  ASSERT_EQ(parse(i.data(), i.size(), f), ParseError::kOk);
  EXPECT_EQ(f.imm().imm.get(), 0xDEADBEEFu);
  EXPECT_EQ(Bth::Se::get(f.bth()), 1u);

  auto v = read_vector("rc_send_only_inv.hex");
  ASSERT_EQ(parse(v.data(), v.size(), f), ParseError::kOk);
  EXPECT_EQ(f.ieth().rkey.get(), 0x1234u);

  auto u = read_vector("ud_qp1_cm_req.hex");
  ASSERT_EQ(parse(u.data(), u.size(), f), ParseError::kOk);
  EXPECT_EQ(f.opcode, opc::kUdSendOnly);
  EXPECT_EQ(f.deth().qkey.get(), 0x80010000u);
  EXPECT_EQ(Deth::SrcQp::get(f.deth()), 1u);
  EXPECT_EQ(f.l.payload_len, 256u);

  auto h = read_vector("cnp_connectx4lx_hw.hex");
  ASSERT_EQ(parse(h.data(), h.size(), f), ParseError::kOk);
  EXPECT_EQ(f.opcode, opc::kCnp);
  EXPECT_EQ(Bth::Becn::get(f.bth()), 1u);
  EXPECT_EQ(Bth::DestQp::get(f.bth()), 0x118u);
  EXPECT_EQ(f.udp().src_port.get(), 0);

  auto six = read_vector("ipv6_rc_send_only.hex");
  ASSERT_EQ(parse(six.data(), six.size(), f), ParseError::kOk);
  EXPECT_TRUE(f.l.ipv6);
  EXPECT_EQ(Ipv6Hdr::FlowLabel::get(f.ipv6()), 0x12345u);
  EXPECT_EQ(Ipv6Hdr::TrafficClass::get(f.ipv6()), 0x02u);
  EXPECT_EQ(f.ipv6().hop_limit, 64);
}

// Variant fields may change in flight without invalidating the ICRC (rocev2.md §2.1).
TEST(Vectors, VariantFieldsDoNotAffectIcrc) {
  auto frame = read_vector("rc_send_only.hex");
  ParsedFrame f;
  ASSERT_EQ(parse(frame.data(), frame.size(), f), ParseError::kOk);
  frame[f.l.l3_off + 1] = 0x03;    // ECN CE re-mark
  frame[f.l.l3_off + 8] = 1;       // TTL decremented
  frame[f.l.l4_off + 6] = 0x12;    // UDP checksum filled in
  frame[f.l.bth_off + 4] |= 0x40;  // BECN
  EXPECT_TRUE(icrc_check(frame.data(), f.l));
  frame[f.l.bth_off + 1] |= 0x80;  // SE is covered
  EXPECT_FALSE(icrc_check(frame.data(), f.l));
}

// UDP checksum over IPv6 (docs/design.md, "Wire choices"): the builder sends 0 over IPv6 as
// over IPv4, as rxe does; receivers ignore the field, so a frame whose checksum a peer or a
// middlebox filled in (right or wrong) still parses and its ICRC still verifies.
TEST(Vectors, Ipv6UdpChecksumIsZeroOnTransmitAndIgnoredOnReceive) {
  NetHeaders net;
  net.ipv6 = true;
  net.src_ip6 = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  net.dst_ip6 = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  TransportHeaders th;
  th.bth.opcode = opc::kSendOnly;
  th.bth.pkey = Be16::of(kDefaultPkey);
  const std::vector<uint8_t> payload(64, 0x5A);
  std::vector<uint8_t> frame(frame_length(net, th.bth.opcode, 64));
  ASSERT_EQ(build_frame(frame, net, th, payload), frame.size());
  ParsedFrame f;
  ASSERT_EQ(parse(frame.data(), frame.size(), f), ParseError::kOk);
  ASSERT_TRUE(f.l.ipv6);
  EXPECT_EQ(f.udp().checksum.get(), 0);
  frame[f.l.l4_off + 6] = 0xBE;  // a checksum filled in on the way
  frame[f.l.l4_off + 7] = 0xEF;
  ASSERT_EQ(parse(frame.data(), frame.size(), f), ParseError::kOk);
  EXPECT_TRUE(icrc_check(frame.data(), f.l));
}

}  // namespace
}  // namespace urnic::wire
