// Datagram (UD) QPs through the public API (include/urnic/datagram.h; IBTA §9.8): datagrams in
// both directions with the GRH the receiver writes before the payload, immediate data, the
// sender's QPN; the Q_Key rules (C10-15 drop, the high-order bit naming the QP's own key);
// datagrams that find no receive; the one-packet limit; and the UD transition table.
#include <array>
#include <cstring>
#include <vector>

#include "api_fixture.h"

namespace urnic::test {
namespace {

class ApiDatagram : public EalTest {};

constexpr uint32_t kQkey = 0x11111111;

// A datagram QP on each side of `p`, in RTS, and an address handle from a to b and back.
struct UdPair {
  explicit UdPair(ApiPair& p, uint32_t qkey_b = kQkey) : pair(p) {
    EXPECT_EQ(
        create_datagram_qp(*p.a.pd, *p.a.cq, *p.a.cq, nullptr, &p.a, 64, 64, 4, 4, 64, kQkey, &qa),
        Status::kSuccess);
    EXPECT_EQ(
        create_datagram_qp(*p.b.pd, *p.b.cq, *p.b.cq, nullptr, &p.b, 64, 64, 4, 4, 64, qkey_b, &qb),
        Status::kSuccess);
    for (Qp* q : {qa.get(), qb.get()}) {
      if (q == nullptr) continue;
      auto* c = q->query_extension<QpConnectExtension>();
      QpAttributes at;
      at.state = QpState::kRtr;
      EXPECT_EQ(c->modify(at, qp_attr_mask::kState, nullptr, nullptr), Status::kSuccess);
      at.state = QpState::kRts;
      at.sq_psn = 0x123;
      EXPECT_EQ(c->modify(at, qp_attr_mask::kState | qp_attr_mask::kSqPsn, nullptr, nullptr),
                Status::kSuccess);
    }
    EXPECT_EQ(create_address_handle(*p.a.adapter, to(p.b), &to_b), Status::kSuccess);
    EXPECT_EQ(create_address_handle(*p.b.adapter, to(p.a), &to_a), Status::kSuccess);
  }
  static AddressVector to(Side& s) {
    AddressVector av;
    av.dst_ipv4 = s.address().ipv4;
    return av;
  }
  uint32_t qpn(Handle<Qp>& q) { return q->query_extension<QpConnectExtension>()->qpn(); }
  QpExtension* ext(Handle<Qp>& q) { return q->query_extension<QpExtension>(); }

  ApiPair& pair;
  Handle<Qp> qa, qb;
  AddressHandle to_b, to_a;
};

// A registered buffer of `n` bytes.
struct Buf {
  Buf(Side& s, size_t n) : bytes(n), mr(s.reg(bytes.data(), n, mr_flag::kAllowLocalWrite)) {}
  Sge sge(uint32_t off, uint32_t len) {
    return {addr(bytes.data() + off), len, mr->get_local_token()};
  }
  std::vector<uint8_t> bytes;
  Handle<Mr> mr;
};

TEST_F(ApiDatagram, DatagramsCarryGrhPayloadImmediateAndSender) {
  ApiPair p("ud_basic");
  UdPair u(p);
  Buf src(p.a, 4096), dst(p.b, 8192);
  for (size_t i = 0; i < src.bytes.size(); ++i) src.bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  const uint32_t kLen[] = {0, 1, 200, 1024};  // 1024: the path MTU of the ring ports
  for (uint32_t i = 0; i < 4; ++i) {
    const Sge r = dst.sge(i * 2048, 2048);
    ASSERT_EQ(u.qb->receive(ctx(i), {&r, 1}), Status::kSuccess);
  }
  ASSERT_EQ(u.ext(u.qa)->max_datagram_size(), 1024u);
  for (uint32_t i = 0; i < 4; ++i) {
    const Sge s = src.sge(i, kLen[i]);
    const uint32_t imm = 0xA0B0C0D0 + i;
    ASSERT_EQ(u.ext(u.qa)->send_datagram(ctx(10 + i), {&s, 1}, 0, u.to_b, u.qpn(u.qb), kQkey,
                                         i % 2 ? &imm : nullptr),
              Status::kSuccess);
  }
  ASSERT_TRUE(p.wait_done(4, 4));
  const LocalAddress aa = p.a.address(), ba = p.b.address();
  for (uint32_t i = 0; i < 4; ++i) {
    const ResultEx& s = p.a.done[i];
    EXPECT_EQ(s.status, Status::kSuccess);
    EXPECT_EQ(s.type, OperationType::kSend);
    EXPECT_EQ(s.request_context, ctx(10 + i));
    const ResultEx& r = p.b.done[i];
    ASSERT_EQ(r.status, Status::kSuccess) << i;
    EXPECT_EQ(r.request_context, ctx(i));
    EXPECT_EQ(r.type, OperationType::kReceive);
    EXPECT_EQ(r.bytes_transferred, kGrhLength + kLen[i]);
    EXPECT_EQ(r.src_qpn, u.qpn(u.qa));
    EXPECT_EQ(r.qpn, u.qpn(u.qb));
    EXPECT_TRUE(r.flags & kResultDatagram);
    EXPECT_EQ((r.flags & kResultHasImmediate) != 0, i % 2 == 1);
    if (i % 2) {
      EXPECT_EQ(r.type_specific_completion_output, 0xA0B0C0D0u + i);
    }
    const uint8_t* got = dst.bytes.data() + i * 2048;
    // GRH for RoCEv2 over IPv4: 20 zero bytes, then the IPv4 header (addresses at 12 and 16).
    EXPECT_EQ(std::vector<uint8_t>(got, got + 20), std::vector<uint8_t>(20, 0));
    EXPECT_EQ(got[20] >> 4, 4);
    const uint32_t sip = (uint32_t{got[32]} << 24) | (got[33] << 16) | (got[34] << 8) | got[35];
    const uint32_t dip = (uint32_t{got[36]} << 24) | (got[37] << 16) | (got[38] << 8) | got[39];
    EXPECT_EQ(sip, aa.ipv4);
    EXPECT_EQ(dip, ba.ipv4);
    EXPECT_EQ(0, std::memcmp(got + kGrhLength, src.bytes.data() + i, kLen[i])) << i;
  }
  // And back, inline, to the sender's QPN the receiver saw.
  const Sge r = src.sge(0, 100);
  ASSERT_EQ(u.qa->receive(ctx(20), {&r, 1}), Status::kSuccess);
  const char msg[] = "pong";
  const Sge s{addr(msg), sizeof msg, 0};
  ASSERT_EQ(u.ext(u.qb)->send_datagram(ctx(21), {&s, 1}, op_flag::kInline, u.to_a,
                                       p.b.done[0].src_qpn, kQkey),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(5, 5));
  EXPECT_EQ(p.a.done[4].bytes_transferred, kGrhLength + sizeof msg);
  EXPECT_EQ(0, std::memcmp(src.bytes.data() + kGrhLength, msg, sizeof msg));
}

TEST_F(ApiDatagram, QkeyMismatchDropsAndHighBitSendsOwnQkey) {
  ApiPair p("ud_qkey");
  UdPair u(p);
  Buf dst(p.b, 4096);
  const Sge r = dst.sge(0, 4096);
  ASSERT_EQ(u.qb->receive(ctx(1), {&r, 1}), Status::kSuccess);
  const uint8_t one = 1;
  const Sge s{addr(&one), 1, 0};
  // C10-15: the wrong key is dropped, and the receive stays for the next datagram.
  ASSERT_EQ(
      u.ext(u.qa)->send_datagram(ctx(2), {&s, 1}, op_flag::kInline, u.to_b, u.qpn(u.qb), kQkey + 1),
      Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 0));
  p.run_for(kQuiet);
  EXPECT_EQ(p.b.done.size(), 0u);
  EXPECT_EQ(u.ext(u.qb)->counters().qkey_violations, 1u);
  // IBTA §10.2.5: a Q_Key with the high-order bit set sends the QP's own (kQkey: accepted).
  ASSERT_EQ(u.ext(u.qa)->send_datagram(ctx(3), {&s, 1}, op_flag::kInline, u.to_b, u.qpn(u.qb),
                                       0x80000000u),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 1));
  EXPECT_EQ(p.b.done[0].status, Status::kSuccess);
  EXPECT_EQ(p.b.done[0].bytes_transferred, kGrhLength + 1);
  EXPECT_EQ(u.ext(u.qb)->counters().qkey_violations, 1u);
}

TEST_F(ApiDatagram, NoReceiveDropsShortReceiveFailsLongSendRefused) {
  ApiPair p("ud_limits");
  UdPair u(p);
  Buf src(p.a, 2048), dst(p.b, 4096);
  const Sge s = src.sge(0, 100);
  // No receive posted: lost and counted (§9.8.3.1); the sender completes all the same.
  ASSERT_EQ(u.ext(u.qa)->send_datagram(ctx(1), {&s, 1}, 0, u.to_b, u.qpn(u.qb), kQkey),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 0));
  ASSERT_TRUE(p.run_until([&] { return u.ext(u.qb)->counters().datagrams_no_receive == 1; }));
  // A receive shorter than GRH + payload completes with a local length error.
  const Sge small = dst.sge(0, kGrhLength + 99);
  ASSERT_EQ(u.qb->receive(ctx(2), {&small, 1}), Status::kSuccess);
  ASSERT_EQ(u.ext(u.qa)->send_datagram(ctx(3), {&s, 1}, 0, u.to_b, u.qpn(u.qb), kQkey),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 1));
  EXPECT_NE(p.b.done[0].status, Status::kSuccess);
  EXPECT_EQ(p.b.done[0].provider_error_code, static_cast<uint32_t>(WcStatus::kLocLenErr));
  // One datagram is one packet: above the path MTU the post is refused and nothing is sent.
  const Sge big = src.sge(0, 1025);
  EXPECT_EQ(u.ext(u.qa)->send_datagram(ctx(4), {&big, 1}, 0, u.to_b, u.qpn(u.qb), kQkey),
            Status::kBufferOverflow);
  EXPECT_EQ(u.ext(u.qa)->send_datagram(ctx(4), {&s, 1}, 0, u.to_b, 0x1000000, kQkey),
            Status::kInvalidParameter);
  EXPECT_EQ(u.ext(u.qa)->send_datagram(ctx(4), {&s, 1}, op_flag::kReadFence, u.to_b, 2, kQkey),
            Status::kInvalidParameter);
  AddressHandle none;
  EXPECT_EQ(u.ext(u.qa)->send_datagram(ctx(4), {&s, 1}, 0, none, 2, kQkey),
            Status::kInvalidParameter);
  p.run_for(kQuiet);
  EXPECT_EQ(p.a.done.size(), 2u);
}

TEST_F(ApiDatagram, TransitionTableAndServiceMismatch) {
  ApiPair p("ud_states");
  Handle<Qp> ud;
  ASSERT_EQ(create_datagram_qp(*p.a.pd, *p.a.cq, *p.a.cq, nullptr, nullptr, 4, 4, 1, 1, 0, 7, &ud),
            Status::kSuccess);
  auto* c = ud->query_extension<QpConnectExtension>();
  QpAttributes at;
  ASSERT_EQ(c->query(&at), Status::kSuccess);
  EXPECT_EQ(at.state, QpState::kInit);
  EXPECT_EQ(at.qkey, 7u);
  using namespace qp_attr_mask;
  // Connection attributes do not exist for UD (IBTA §10.3.1, the UD column).
  at.state = QpState::kRtr;
  EXPECT_EQ(c->modify(at, kState | kDestQpn, nullptr, nullptr), Status::kInvalidParameter);
  EXPECT_EQ(c->modify(at, kState | kPathMtu, nullptr, nullptr), Status::kInvalidParameter);
  at.qkey = 9;
  ASSERT_EQ(c->modify(at, kState | qp_attr_mask::kQkey, nullptr, nullptr), Status::kSuccess);
  at.state = QpState::kRts;
  EXPECT_EQ(c->modify(at, kState, nullptr, nullptr), Status::kInvalidParameter);  // sq_psn
  ASSERT_EQ(c->modify(at, kState | kSqPsn, nullptr, nullptr), Status::kSuccess);
  ASSERT_EQ(c->query(&at), Status::kSuccess);
  EXPECT_EQ(at.qkey, 9u);
  // Q_Key is a UD attribute only; datagram sends need a datagram QP.
  p.connect();
  auto* rc = p.a.qp->query_extension<QpConnectExtension>();
  at.state = QpState::kRts;
  EXPECT_EQ(rc->modify(at, qp_attr_mask::kQkey, nullptr, nullptr), Status::kInvalidParameter);
  AddressHandle h;
  AddressVector av;
  av.dst_ipv4 = p.b.address().ipv4;
  ASSERT_EQ(create_address_handle(*p.a.adapter, av, &h), Status::kSuccess);
  EXPECT_TRUE(h.valid());
  const uint8_t one = 1;
  const Sge s{addr(&one), 1, 0};
  EXPECT_EQ(p.a.qp->query_extension<QpExtension>()->send_datagram(nullptr, {&s, 1},
                                                                  op_flag::kInline, h, 2, 7),
            Status::kInvalidDeviceRequest);
  EXPECT_EQ(p.a.qp->query_extension<QpExtension>()->max_datagram_size(), 0u);
}

TEST_F(ApiDatagram, DatagramToConnectedQpIsDroppedAndCounted) {
  ApiPair p("ud_to_rc");
  p.connect();
  UdPair u(p);
  const uint8_t one = 1;
  const Sge s{addr(&one), 1, 0};
  const uint32_t rc_qpn = p.b.qp->query_extension<QpConnectExtension>()->qpn();
  auto unsupported = [&] {
    AdapterCounters c;
    EXPECT_EQ(p.b.adapter->query_counters(&c), Status::kSuccess);
    return c.port.rx_drops[static_cast<size_t>(RxDrop::kUnsupported)];
  };
  const uint64_t before = unsupported();
  ASSERT_EQ(u.ext(u.qa)->send_datagram(ctx(1), {&s, 1}, op_flag::kInline, u.to_b, rc_qpn, kQkey),
            Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return unsupported() == before + 1; }));
  p.run_for(kQuiet);
  EXPECT_TRUE(p.b.done.empty());
}

// A send completion means its SQ slot is free: a poster that sees one and posts again at once is
// never refused for room (stock ib_send_bw -c UD keeps its SQ at its depth so, and failed with
// "Couldn't post send" when the engine freed the slot after writing the completion). The engine
// runs on its own lcore; the SQ is kept full for 20 000 datagrams, one post per completion.
TEST_F(ApiDatagram, ACompletionLeavesRoomForTheNextPost) {
  EngineConfig ec;
  ec.idle_yield_after = 256;  // the engine's lcore may share a core with this thread
  ApiPair p("ud_refill", ec);
  UdPair u(p);
  const char msg[] = "refill";
  const Sge s{addr(msg), sizeof msg, 0};
  auto post = [&] {
    return u.ext(u.qa)->send_datagram(nullptr, {&s, 1}, op_flag::kInline, u.to_b, u.qpn(u.qb),
                                      kQkey);
  };
  constexpr uint32_t kDepth = 64, kTotal = 20000;
  uint32_t posted = 0, done = 0, refused = 0, owed = 0;
  // Filled before the engine runs: the depth asked for, then kNoMoreEntries.
  while (posted <= kDepth && post() == Status::kSuccess) ++posted;
  ASSERT_EQ(posted, kDepth);
  ASSERT_TRUE(p.engine().launch(1));
  ResultEx r[16];
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (done < kTotal && std::chrono::steady_clock::now() < until) {
    // A post refused after a completion is made good later, so the run still ends.
    while (owed != 0 && posted < kTotal && post() == Status::kSuccess) --owed, ++posted;
    const size_t n = p.a.cq->get_results_ex(r);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(r[i].status, Status::kSuccess);
      ++done;
      if (posted == kTotal) continue;
      if (post() == Status::kSuccess) {
        ++posted;
      } else {
        ++refused;
        ++owed;
      }
    }
  }
  EXPECT_EQ(done, kTotal);
  EXPECT_EQ(refused, 0u) << "posts refused for room right after a completion";
}

}  // namespace
}  // namespace urnic::test
