// Malformed input (issue: wire format, item 7): each case is rejected with its reason code and
// nothing reads past the frame. Frames are placed at the very end of a guarded allocation so
// that AddressSanitizer builds catch any over-read, and the parser is also run on every
// truncation of every shared vector.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>

#include "dataplane/wire/frame.h"
#include "dataplane/wire/icrc.h"
#include "test_util.h"

namespace urnic::wire {
namespace {

// A buffer whose last byte is the last byte of the allocation.
struct Tight {
  std::unique_ptr<uint8_t[]> mem;
  uint8_t* data;
  size_t len;
  explicit Tight(const std::vector<uint8_t>& v)
      : mem(new uint8_t[v.size() ? v.size() : 1]), data(mem.get()), len(v.size()) {
    if (!v.empty()) std::memcpy(data, v.data(), v.size());
  }
};

ParseError parse_vec(const std::vector<uint8_t>& v) {
  Tight t(v);
  ParsedFrame f;
  return parse(t.data, t.len, f);
}

std::vector<uint8_t> good() { return test::read_vector("rc_send_only.hex"); }

// Offsets in the IPv4 primary vector.
constexpr size_t kIp = 14, kUdp = 34, kBth = 42;

void set16(std::vector<uint8_t>& v, size_t at, uint16_t x) {
  v[at] = static_cast<uint8_t>(x >> 8);
  v[at + 1] = static_cast<uint8_t>(x);
}

TEST(Malformed, GoodFrameParses) { EXPECT_EQ(parse_vec(good()), ParseError::kOk); }

TEST(Malformed, EveryTruncationIsRejected) {
  for (const char* name : {"rc_send_only.hex", "ipv6_rc_send_only.hex", "rc_cmp_swap.hex",
                           "rc_atomic_ack.hex", "ud_qp1_cm_req.hex", "rc_send_only_pad3.hex"}) {
    const auto v = test::read_vector(name);
    for (size_t n = 0; n < v.size(); ++n) {
      const std::vector<uint8_t> cut(v.begin(), v.begin() + static_cast<long>(n));
      const ParseError e = parse_vec(cut);
      EXPECT_NE(e, ParseError::kOk) << name << " cut to " << n;
    }
  }
}

TEST(Malformed, TruncatedEthernet) {
  auto v = good();
  v.resize(10);
  EXPECT_EQ(parse_vec(v), ParseError::kTruncated);
  v = good();
  v.resize(kIp + 10);  // half an IPv4 header
  EXPECT_EQ(parse_vec(v), ParseError::kTruncated);
}

TEST(Malformed, NotIp) {
  auto v = good();
  set16(v, 12, 0x0806);  // ARP
  EXPECT_EQ(parse_vec(v), ParseError::kNotIp);
}

TEST(Malformed, BadIpVersion) {
  auto v = good();
  v[kIp] = 0x65;
  EXPECT_EQ(parse_vec(v), ParseError::kBadIpVersion);
  auto w = test::read_vector("ipv6_rc_send_only.hex");
  w[kIp] = static_cast<uint8_t>((w[kIp] & 0x0F) | 0x40);
  EXPECT_EQ(parse_vec(w), ParseError::kBadIpVersion);
}

TEST(Malformed, IpOptionsAndFragments) {
  auto v = good();
  v[kIp] = 0x46;
  EXPECT_EQ(parse_vec(v), ParseError::kIpOptions);
  v = good();
  set16(v, kIp + 6, 0x2000);  // MF
  EXPECT_EQ(parse_vec(v), ParseError::kIpFragment);
  v = good();
  set16(v, kIp + 6, 0x4001);  // DF + offset 8
  EXPECT_EQ(parse_vec(v), ParseError::kIpFragment);
}

TEST(Malformed, NotUdp) {
  auto v = good();
  v[kIp + 9] = 6;  // TCP
  EXPECT_EQ(parse_vec(v), ParseError::kNotUdp);
  auto w = test::read_vector("ipv6_rc_send_only.hex");
  w[kIp + 6] = 6;
  EXPECT_EQ(parse_vec(w), ParseError::kNotUdp);
}

TEST(Malformed, WrongUdpPort) {
  auto v = good();
  set16(v, kUdp + 2, 4792);
  EXPECT_EQ(parse_vec(v), ParseError::kWrongUdpPort);
}

TEST(Malformed, IpLengthLargerThanFrame) {
  auto v = good();
  set16(v, kIp + 2, static_cast<uint16_t>(v.size() - kIp + 1));
  EXPECT_EQ(parse_vec(v), ParseError::kIpLengthMismatch);
  set16(v, kIp + 2, 20);  // no room for UDP
  EXPECT_EQ(parse_vec(v), ParseError::kIpLengthMismatch);
  auto w = test::read_vector("ipv6_rc_send_only.hex");
  set16(w, kIp + 4, static_cast<uint16_t>(w.size()));
  EXPECT_EQ(parse_vec(w), ParseError::kIpLengthMismatch);
}

TEST(Malformed, UdpLengthDisagreesWithIp) {
  auto v = good();
  set16(v, kUdp + 4, static_cast<uint16_t>(v.size() - kUdp - 1));
  EXPECT_EQ(parse_vec(v), ParseError::kUdpLengthMismatch);
  set16(v, kUdp + 4, static_cast<uint16_t>(v.size() - kUdp + 1));
  EXPECT_EQ(parse_vec(v), ParseError::kUdpLengthMismatch);
}

TEST(Malformed, EthernetPaddingAfterIpPacketIsAccepted) {
  // Short frames are padded to 60 bytes by Ethernet; the IP length says where RoCE ends.
  auto v = test::read_vector("rc_ack.hex");
  v.insert(v.end(), 6, 0);
  Tight t(v);
  ParsedFrame f;
  ASSERT_EQ(parse(t.data, t.len, f), ParseError::kOk);
  EXPECT_EQ(f.l.frame_len(), v.size() - 6);
  EXPECT_TRUE(icrc_check(t.data, f.l));
}

TEST(Malformed, BadTverAndPkey) {
  auto v = good();
  v[kBth + 1] |= 0x01;
  EXPECT_EQ(parse_vec(v), ParseError::kBadTver);
  // Another partition, as full or limited member: not ours (IBTA §10.9.3).
  for (uint16_t pkey : {0x1234, 0x9234, 0x0000, 0x8000}) {
    v = good();
    set16(v, kBth + 2, pkey);
    EXPECT_EQ(parse_vec(v), ParseError::kBadPkey) << pkey;
  }
  // The default partition's limited member matches our full membership.
  v = good();
  set16(v, kBth + 2, 0x7FFF);
  EXPECT_EQ(parse_vec(v), ParseError::kOk);
}

TEST(Malformed, UnknownOpcodes) {
  for (int op : {0x15, 0x18, 0x1C, 0x1D, 0x2C, 0x40, 0x66, 0x80, 0xC0, 0xFF}) {
    auto v = good();
    v[kBth] = static_cast<uint8_t>(op);
    EXPECT_EQ(parse_vec(v), ParseError::kUnknownOpcode) << op;
  }
}

TEST(Malformed, HeadersLongerThanPacket) {
  // An ATOMIC (BTH + 28 B AtomicETH) opcode on a frame with only 16 B after the BTH.
  auto v = good();
  v[kBth] = opc::kCompareSwap;
  EXPECT_EQ(parse_vec(v), ParseError::kHeaderTruncated);
  // UDP length too short for a BTH and an ICRC.
  v = good();
  v.resize(kBth + 8);
  set16(v, kIp + 2, static_cast<uint16_t>(v.size() - kIp));
  set16(v, kUdp + 4, static_cast<uint16_t>(v.size() - kUdp));
  EXPECT_EQ(parse_vec(v), ParseError::kHeaderTruncated);
}

TEST(Malformed, PadBeyondPayload) {
  // A zero-payload ACK with PadCnt 3: the pad would extend into the ICRC.
  auto v = test::read_vector("rc_ack.hex");
  v[kBth + 1] |= 0x30;
  EXPECT_EQ(parse_vec(v), ParseError::kPadTooLarge);
}

TEST(Malformed, PayloadOnOpcodeWithoutPayload) {
  auto v = good();
  v[kBth] = opc::kAcknowledge;  // 16 payload bytes after AETH on an ACK
  EXPECT_EQ(parse_vec(v), ParseError::kPayloadNotAllowed);
}

TEST(Malformed, ReasonNamesAreDistinct) {
  std::set<std::string_view> names;
  for (int i = 0; i < static_cast<int>(ParseError::kCount); ++i)
    names.insert(to_string(static_cast<ParseError>(i)));
  EXPECT_EQ(names.size(), static_cast<size_t>(ParseError::kCount));
}

TEST(Malformed, CorruptedIcrcIsDetected) {
  auto v = good();
  v.back() ^= 0x01;
  Tight t(v);
  ParsedFrame f;
  ASSERT_EQ(parse(t.data, t.len, f), ParseError::kOk);
  EXPECT_FALSE(icrc_check(t.data, f.l));
}

// Deterministic pseudo-random garbage: must never crash or report a frame beyond its length.
TEST(Malformed, RandomBytesNeverCrash) {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  size_t ok = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> v = good();
    const size_t flips = 1 + (s % 6);
    for (size_t k = 0; k < flips; ++k) {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      v[s % v.size()] = static_cast<uint8_t>(s >> 32);
    }
    v.resize(1 + (s >> 40) % v.size());
    Tight t(v);
    ParsedFrame f;
    if (parse(t.data, t.len, f) == ParseError::kOk) {
      ++ok;
      ASSERT_LE(f.l.frame_len(), v.size());
      ASSERT_LE(f.l.payload_off + f.l.payload_len + f.l.pad, f.l.icrc_off);
      (void)icrc_check(t.data, f.l);
    }
  }
  EXPECT_LT(ok, 20000u);
}

}  // namespace
}  // namespace urnic::wire
