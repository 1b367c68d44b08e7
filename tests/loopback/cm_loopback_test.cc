// The connection manager between two adapters in one process (net_ring pair, engine on lcore 1,
// each adapter's control thread running its CmAgent):
//   - CmPair: both sides are urnic CMs: listen / connect / accept / RTU, private data and read
//     limits both ways, SEND and WRITE checked byte for byte with every completion counted,
//     DREQ / DREP and the disconnect event; REJ by the consumer, no listener, unreachable
//     destination, IPv6 GIDs, MAD loss (fault injector) recovered by retransmission.
//   - CmScripted: one side is a urnic CM, the other a hand-played peer that speaks raw MADs and
//     sets its QP up the way Linux's ib_cm does (rocev2.md §4.3 PSN convention): REQ / REP
//     timeouts and REJ "timeout" with the CA GUID as ARI, duplicate REQ -> MRA, duplicate REP ->
//     MRA, lost RTU -> REP retransmitted, stale REQ in TIMEWAIT -> REJ 10, DREQ for an unknown
//     connection -> DREP.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "control/cm/cm.h"
#include "control/cm/cma.h"
#include "control/cm/mad.h"
#include "rc_fixture.h"
#include "tests/common/cm_handles.h"
#include "urnic/config.h"

namespace urnic::test {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace cm = ctl::cm;

// Short CM timers so that retransmission and timeout paths take milliseconds: response timeout
// 4.096 us * 2^14 = 67 ms, three retries, 150 ms TIMEWAIT.
ctl::CmConfig fast_config() {
  ctl::CmConfig c;
  c.cm_response_timeout = 14;
  c.max_cm_retries = 3;
  c.timewait = 150ms;
  c.resolve_timeout = 1000ms;
  c.path_mtu = 1024;
  return c;
}

// For cases that count exact MADs: a 1.07 s response timeout (2^18), so that no retransmission
// happens on a loaded machine where the answer is merely slow.
ctl::CmConfig steady_config() {
  auto c = fast_config();
  c.cm_response_timeout = 18;
  return c;
}

// A value some callback sets once, waited for with a deadline.
template <typename T>
class Latch {
 public:
  void set(T v) {
    std::lock_guard lock(mu_);
    v_ = v;
    cv_.notify_all();
  }
  std::optional<T> wait(std::chrono::milliseconds d = 10s) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, d, [&] { return v_.has_value(); });
    return v_;
  }
  bool is_set() {
    std::lock_guard lock(mu_);
    return v_.has_value();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<T> v_;
};

// A buffer advertised in private data, as rping does: address and rkey, big-endian.
struct BufInfo {
  uint64_t addr = 0;
  uint32_t rkey = 0;
};
std::vector<uint8_t> encode_info(const BufInfo& b) {
  std::vector<uint8_t> v(12);
  for (int i = 0; i < 8; ++i) v[i] = static_cast<uint8_t>(b.addr >> (56 - 8 * i));
  for (int i = 0; i < 4; ++i) v[8 + i] = static_cast<uint8_t>(b.rkey >> (24 - 8 * i));
  return v;
}
BufInfo decode_info(const uint8_t* p) {
  BufInfo b;
  for (int i = 0; i < 8; ++i) b.addr = b.addr << 8 | p[i];
  for (int i = 0; i < 4; ++i) b.rkey = b.rkey << 8 | p[8 + i];
  return b;
}

class CmLoopback : public EalTest {
 protected:
  void SetUp() override {
    dp::EngineConfig ec;
    ec.idle_yield_after = 256;
    static int n = 0;
    p = std::make_unique<RcPair>("cm" + std::to_string(n++), ec);
  }
  void launch() { ASSERT_TRUE(p->engine().launch(1)); }
  void TearDown() override {
    ca.reset();
    cb.reset();
    p.reset();
  }
  cm::Gid gid_a() const { return ctl::gid_from_ipv4(RcPair::internal(p->a).ipv4()); }
  cm::Gid gid_b() const { return ctl::gid_from_ipv4(RcPair::internal(p->b).ipv4()); }

  std::unique_ptr<RcPair> p;
  std::unique_ptr<ctl::CmAgent> ca, cb;
};

// ---- urnic CM against urnic CM ------------------------------------------------------------------

class CmPair : public CmLoopback {
 protected:
  void start(const ctl::CmConfig& cfg = steady_config()) {
    launch();
    ca = std::make_unique<ctl::CmAgent>(RcPair::internal(p->a), cfg);
    cb = std::make_unique<ctl::CmAgent>(RcPair::internal(p->b), cfg);
  }
};

TEST_F(CmPair, ConnectAcceptMoveDataDisconnect) {
  start();
  constexpr uint32_t kLen = 3000;
  std::vector<uint8_t> a_src(kLen), a_dst(kLen, 0), b_src(kLen), b_dst(kLen, 0);
  std::vector<uint8_t> a_win(kLen, 0), b_win(kLen, 0);  // WRITE targets
  fill(a_src, 11);
  fill(b_src, 22);
  const uint32_t kRw = mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteWrite;
  const uint32_t ka_src = p->a.reg(a_src.data(), kLen, mr_flag::kAllowLocalWrite);
  const uint32_t ka_dst = p->a.reg(a_dst.data(), kLen, mr_flag::kAllowLocalWrite);
  const uint32_t ka_win = p->a.reg(a_win.data(), kLen, kRw);
  const uint32_t kb_src = p->b.reg(b_src.data(), kLen, mr_flag::kAllowLocalWrite);
  const uint32_t kb_dst = p->b.reg(b_dst.data(), kLen, mr_flag::kAllowLocalWrite);
  const uint32_t kb_win = p->b.reg(b_win.data(), kLen, kRw);

  // Passive side: listen; on the request, check the private data and limits, create the QP,
  // post a receive, accept with its own buffer in the REP's private data.
  Latch<Status> accepted;
  Latch<bool> b_disconnected;
  std::unique_ptr<cmtest::CmConnector> b_conn;
  BufInfo a_info;
  ctl::ReadLimits b_seen{};
  // The passive QP is made before listening: the listener callback runs on the adapter's
  // control thread, where a synchronous create would wait for itself (docs/api.md).
  ASSERT_EQ(p->b.create_qp(nullptr, 256, 256, &p->b.qp), Status::kSuccess);
  auto listener = cmtest::create_listener(*cb);
  ASSERT_EQ(
      listener->listen(
          18515,
          [&](std::unique_ptr<cmtest::CmConnector> c) {
            uint8_t pd[64];
            uint32_t len = sizeof(pd);
            EXPECT_EQ(c->get_connection_data(&b_seen, pd, &len), Status::kSuccess);
            EXPECT_EQ(len, cm::kMaxReqUserData);
            a_info = decode_info(pd);
            EXPECT_EQ(c->state(), ctl::CmState::kReqRcvd);
            EXPECT_EQ(c->peer_gid(), gid_a());
            EXPECT_EQ(c->local_port(), 18515);
            dp::RecvWqe rw;
            rw.num_sge = 1;
            rw.length = kLen;
            rw.sge[0] = {reinterpret_cast<uint64_t>(b_dst.data()), kLen, kb_dst};
            const auto pdata = encode_info({reinterpret_cast<uint64_t>(b_win.data()), kb_win});
            EXPECT_EQ(c->accept(
                          &p->b.qp->internal(), {4, 2}, pdata, [&] { b_disconnected.set(true); },
                          [&](Status s) { accepted.set(s); }),
                      Status::kPending);
            // Receives may be posted once the QP left RESET.
            EXPECT_EQ(p->b.qp->post_recv(rw), Status::kSuccess);
            b_conn = std::move(c);
          }),
      Status::kSuccess);
  EXPECT_EQ(listener->port(), 18515);

  // Active side.
  ASSERT_EQ(p->a.create_qp(nullptr, 256, 256, &p->a.qp), Status::kSuccess);
  auto a_conn = cmtest::create_connector(*ca);
  Latch<Status> connected;
  const auto req_pdata = encode_info({reinterpret_cast<uint64_t>(a_win.data()), ka_win});
  ASSERT_EQ(a_conn->connect(&p->a.qp->internal(), gid_b(), 18515, {2, 3}, req_pdata,
                            [&](Status s) { connected.set(s); }),
            Status::kPending);
  // The QP is in INIT now: receives can go in before the connection completes.
  dp::RecvWqe rw;
  rw.num_sge = 1;
  rw.length = kLen;
  rw.sge[0] = {reinterpret_cast<uint64_t>(a_dst.data()), kLen, ka_dst};
  ASSERT_EQ(p->a.qp->post_recv(rw), Status::kSuccess);
  ASSERT_EQ(connected.wait(), Status::kSuccess);
  EXPECT_EQ(a_conn->state(), ctl::CmState::kRepRcvd);
  EXPECT_FALSE(accepted.is_set());  // not before the RTU
  // The active side asked IRD 2 / ORD 3; B offered IRD 4 / ORD 2 -> IRD min(2, 2), ORD min(3, 4).
  EXPECT_EQ(b_seen, (ctl::ReadLimits{3, 2}));  // B sees A's ORD as its inbound
  ctl::ReadLimits lim;
  uint32_t len = 0;
  ASSERT_EQ(a_conn->get_connection_data(&lim, nullptr, &len), Status::kSuccess);
  EXPECT_EQ(len, cm::kRepPrivateData);
  EXPECT_EQ(lim, (ctl::ReadLimits{2, 3}));
  uint8_t small[4];
  len = sizeof(small);
  EXPECT_EQ(a_conn->get_connection_data(nullptr, small, &len), Status::kBufferTooSmall);
  EXPECT_EQ(len, cm::kRepPrivateData);
  std::vector<uint8_t> rep_pdata(cm::kRepPrivateData);
  len = static_cast<uint32_t>(rep_pdata.size());
  ASSERT_EQ(a_conn->get_connection_data(nullptr, rep_pdata.data(), &len), Status::kSuccess);
  const BufInfo b_info = decode_info(rep_pdata.data());
  Latch<bool> a_disconnected;
  ASSERT_EQ(a_conn->complete_connect([&] { a_disconnected.set(true); }), Status::kSuccess);
  // Two urnic CMs agree on selective repeat (cm::kSrMark): both QPs have it.
  EXPECT_TRUE(p->a.qp->internal().attr().selective_repeat);
  EXPECT_TRUE(p->b.qp->internal().attr().selective_repeat);
  EXPECT_EQ(a_conn->state(), ctl::CmState::kEstablished);
  ASSERT_EQ(accepted.wait(), Status::kSuccess);
  EXPECT_EQ(b_conn->state(), ctl::CmState::kEstablished);
  EXPECT_EQ(a_conn->remote_qpn(), p->b.qp->qpn());
  EXPECT_EQ(b_conn->remote_qpn(), p->a.qp->qpn());
  EXPECT_EQ(a_conn->peer_port(), 18515);
  EXPECT_EQ(b_conn->peer_port(), a_conn->local_port());
  EXPECT_GE(a_conn->local_port(), 49152);
  EXPECT_EQ(a_conn->mtu(), 1024u);

  // SEND both ways and WRITE both ways into the advertised windows.
  auto send = [&](Side& s, std::vector<uint8_t>& src, uint32_t key) {
    auto w = wqe(dp::WrOpcode::kSend, &src);
    w.num_sge = 1;
    w.length = kLen;
    w.sge[0] = {reinterpret_cast<uint64_t>(src.data()), kLen, key};
    ASSERT_EQ(s.qp->post_send(w), Status::kSuccess);
  };
  auto write = [&](Side& s, std::vector<uint8_t>& src, uint32_t key, const BufInfo& to) {
    auto w = wqe(dp::WrOpcode::kWrite, nullptr);
    w.num_sge = 1;
    w.length = kLen;
    w.sge[0] = {reinterpret_cast<uint64_t>(src.data()), kLen, key};
    w.remote_addr = to.addr;
    w.rkey = to.rkey;
    ASSERT_EQ(s.qp->post_send(w), Status::kSuccess);
  };
  send(p->a, a_src, ka_src);
  send(p->b, b_src, kb_src);
  write(p->a, a_src, ka_src, b_info);
  write(p->b, b_src, kb_src, a_info);
  ASSERT_TRUE(p->wait(2, 1, 2, 1));
  for (Side* s : {&p->a, &p->b}) {
    ASSERT_EQ(s->send_done.size(), 2u);
    ASSERT_EQ(s->recv_done.size(), 1u);
    for (const auto& r : s->send_done) EXPECT_EQ(r.status, Status::kSuccess);
    EXPECT_EQ(s->recv_done[0].status, Status::kSuccess);
    EXPECT_EQ(s->recv_done[0].bytes_transferred, kLen);
  }
  EXPECT_EQ(a_dst, b_src);
  EXPECT_EQ(b_dst, a_src);
  EXPECT_EQ(b_win, a_src);
  EXPECT_EQ(a_win, b_src);

  // A disconnects: B's disconnect event fires, A's disconnect completes on the DREP.
  Latch<Status> a_done;
  ASSERT_EQ(a_conn->disconnect([&](Status s) { a_done.set(s); }), Status::kPending);
  ASSERT_EQ(a_done.wait(), Status::kSuccess);
  ASSERT_EQ(b_disconnected.wait(), true);
  EXPECT_FALSE(a_disconnected.is_set());  // the side that disconnects gets no event
  EXPECT_EQ(a_conn->state(), ctl::CmState::kTimewait);
  EXPECT_EQ(b_conn->state(), ctl::CmState::kTimewait);
  EXPECT_EQ(p->a.qp->state(), dp::QpState::kErr);  // flushed after the DREP
  // B's disconnect after the peer's: done at once, and its QP is flushed.
  EXPECT_EQ(b_conn->disconnect([](Status) { ADD_FAILURE(); }), Status::kSuccess);
  EXPECT_EQ(p->b.qp->state(), dp::QpState::kErr);
  EXPECT_EQ(a_conn->disconnect([](Status) {}), Status::kConnectionInvalid);
  const auto c1 = ca->counters(), c2 = cb->counters();
  EXPECT_EQ(c1.out_by_attr[0], 1u);  // REQ
  EXPECT_EQ(c2.out_by_attr[3], 1u);  // REP
  EXPECT_EQ(c1.out_by_attr[4], 1u);  // RTU
  EXPECT_EQ(c1.out_by_attr[5], 1u);  // DREQ
  EXPECT_EQ(c2.out_by_attr[6], 1u);  // DREP
  EXPECT_EQ(c1.retransmits + c2.retransmits, 0u);
  // Both leave TIMEWAIT after 150 ms and forget the connection.
  const auto deadline = Clock::now() + 5s;
  while ((ca->connections() != 0 || cb->connections() != 0) && Clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(ca->connections(), 0u);
  EXPECT_EQ(cb->connections(), 0u);
  EXPECT_EQ(a_conn->state(), ctl::CmState::kIdle);
}

TEST_F(CmPair, ConsumerRejectCarriesPrivateData) {
  start();
  auto listener = cmtest::create_listener(*cb);
  ASSERT_EQ(listener->listen(7174,
                             [&](std::unique_ptr<cmtest::CmConnector> c) {
                               const uint8_t why[] = {'n', 'o', 'p', 'e'};
                               EXPECT_EQ(c->reject(why), Status::kSuccess);
                               EXPECT_EQ(c->reject(why), Status::kConnectionInvalid);
                             }),
            Status::kSuccess);
  ASSERT_EQ(p->a.create_qp(nullptr, 256, 256, &p->a.qp), Status::kSuccess);
  auto conn = cmtest::create_connector(*ca);
  Latch<Status> done;
  ASSERT_EQ(
      conn->connect(&p->a.qp->internal(), gid_b(), 7174, {}, {}, [&](Status s) { done.set(s); }),
      Status::kPending);
  EXPECT_EQ(done.wait(), Status::kConnectionRefused);
  EXPECT_EQ(conn->reject_reason(), static_cast<uint16_t>(cm::RejReason::kConsumerDefined));
  uint8_t pd[cm::kRejPrivateData];
  uint32_t len = sizeof(pd);
  ASSERT_EQ(conn->get_connection_data(nullptr, pd, &len), Status::kSuccess);
  EXPECT_EQ(len, cm::kRejPrivateData);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(pd), 4), "nope");
  EXPECT_EQ(conn->complete_connect({}), Status::kConnectionInvalid);
  // A connector is used once.
  EXPECT_EQ(conn->connect(&p->a.qp->internal(), gid_b(), 7174, {}, {}, [](Status) {}),
            Status::kConnectionActive);
}

TEST_F(CmPair, NoListenerUnreachableAndBadArguments) {
  start();
  ASSERT_EQ(p->a.create_qp(nullptr, 256, 256, &p->a.qp), Status::kSuccess);
  {
    auto conn = cmtest::create_connector(*ca);
    Latch<Status> done;
    ASSERT_EQ(
        conn->connect(&p->a.qp->internal(), gid_b(), 999, {}, {}, [&](Status s) { done.set(s); }),
        Status::kPending);
    EXPECT_EQ(done.wait(), Status::kConnectionRefused);
    EXPECT_EQ(conn->reject_reason(), static_cast<uint16_t>(cm::RejReason::kInvalidServiceId));
    EXPECT_EQ(cb->counters().no_listener, 1u);
  }
  {
    auto conn = cmtest::create_connector(*ca);
    Latch<Status> done;
    const auto t0 = Clock::now();
    ASSERT_EQ(conn->connect(&p->a.qp->internal(), ctl::gid_from_ipv4(0xC0000263), 999, {}, {},
                            [&](Status s) { done.set(s); }),
              Status::kPending);
    EXPECT_EQ(done.wait(), Status::kHostUnreachable);
    EXPECT_GE(Clock::now() - t0, 900ms);
  }
  auto conn = cmtest::create_connector(*ca);
  const std::vector<uint8_t> too_long(cm::kMaxReqUserData + 1);
  EXPECT_EQ(conn->connect(&p->a.qp->internal(), gid_b(), 1, {}, too_long, [](Status) {}),
            Status::kInvalidBufferSize);
  EXPECT_EQ(conn->connect(nullptr, gid_b(), 1, {}, {}, [](Status) {}), Status::kInvalidParameter);
  EXPECT_EQ(conn->connect(&p->a.qp->internal(), gid_b(), 0, {}, {}, [](Status) {}),
            Status::kInvalidParameter);
  {
    // Our own address is a destination like another (the engine loops the MADs back, issue
    // 40): with no listener on the port, its own CM refuses it.
    auto self = cmtest::create_connector(*ca);
    Latch<Status> done;
    ASSERT_EQ(
        self->connect(&p->a.qp->internal(), gid_a(), 1, {}, {}, [&](Status s) { done.set(s); }),
        Status::kPending);
    EXPECT_EQ(done.wait(), Status::kConnectionRefused);
    EXPECT_EQ(self->reject_reason(), static_cast<uint16_t>(cm::RejReason::kInvalidServiceId));
  }
  // Two listeners on one port.
  auto l1 = cmtest::create_listener(*cb), l2 = cmtest::create_listener(*cb);
  ASSERT_EQ(l1->listen(5000, [](std::unique_ptr<cmtest::CmConnector>) {}), Status::kSuccess);
  EXPECT_EQ(l2->listen(5000, [](std::unique_ptr<cmtest::CmConnector>) {}),
            Status::kAddressAlreadyAssociated);
  ASSERT_EQ(l2->listen(0, [](std::unique_ptr<cmtest::CmConnector>) {}), Status::kSuccess);
  EXPECT_GE(l2->port(), 49152);
  l1->close();
  auto l3 = cmtest::create_listener(*cb);
  EXPECT_EQ(l3->listen(5000, [](std::unique_ptr<cmtest::CmConnector>) {}), Status::kSuccess);
}

// Connects over the IPv6 GIDs, accepts, sends one message, and disconnects from the passive side.
TEST_F(CmPair, Ipv6GidsAndPassiveDisconnect) {
  start();
  std::unique_ptr<cmtest::CmConnector> b_conn;
  Latch<Status> accepted;
  // The passive QP is made before listening: the listener callback runs on the adapter's
  // control thread, where a synchronous create would wait for itself (docs/api.md).
  ASSERT_EQ(p->b.create_qp(nullptr, 256, 256, &p->b.qp), Status::kSuccess);
  auto listener = cmtest::create_listener(*cb);
  ASSERT_EQ(listener->listen(4791,
                             [&](std::unique_ptr<cmtest::CmConnector> c) {
                               EXPECT_EQ(c->peer_gid(), *RcPair::internal(p->a).ipv6());
                               EXPECT_EQ(c->accept(&p->b.qp->internal(), {}, {}, {},
                                                   [&](Status s) { accepted.set(s); }),
                                         Status::kPending);
                               b_conn = std::move(c);
                             }),
            Status::kSuccess);
  ASSERT_EQ(p->a.create_qp(nullptr, 256, 256, &p->a.qp), Status::kSuccess);
  auto a_conn = cmtest::create_connector(*ca);
  Latch<Status> connected;
  ASSERT_EQ(a_conn->connect(&p->a.qp->internal(), *RcPair::internal(p->b).ipv6(), 4791, {}, {},
                            [&](Status s) { connected.set(s); }),
            Status::kPending);
  std::vector<uint8_t> msg(100), got(100, 0);
  fill(msg, 3);
  const uint32_t km = p->a.reg(msg.data(), msg.size(), mr_flag::kAllowLocalWrite);
  const uint32_t kg = p->a.reg(got.data(), got.size(), mr_flag::kAllowLocalWrite);
  dp::RecvWqe rw;
  rw.num_sge = 1;
  rw.length = 100;
  rw.sge[0] = {reinterpret_cast<uint64_t>(got.data()), 100, kg};
  ASSERT_EQ(p->a.qp->post_recv(rw), Status::kSuccess);
  ASSERT_EQ(connected.wait(), Status::kSuccess);
  Latch<bool> a_disc;
  ASSERT_EQ(a_conn->complete_connect([&] { a_disc.set(true); }), Status::kSuccess);
  ASSERT_EQ(accepted.wait(), Status::kSuccess);
  EXPECT_EQ(a_conn->local_gid(), *RcPair::internal(p->a).ipv6());
  // B sends first (it is RTS since the REP).
  const uint32_t kbm = p->b.reg(msg.data(), msg.size(), mr_flag::kAllowLocalWrite);
  auto w = wqe(dp::WrOpcode::kSend, nullptr);
  w.num_sge = 1;
  w.length = 100;
  w.sge[0] = {reinterpret_cast<uint64_t>(msg.data()), 100, kbm};
  ASSERT_EQ(p->b.qp->post_send(w), Status::kSuccess);
  ASSERT_TRUE(p->wait(0, 0, 1, 1));
  EXPECT_EQ(got, msg);
  (void)km;
  Latch<Status> b_done;
  ASSERT_EQ(b_conn->disconnect([&](Status s) { b_done.set(s); }), Status::kPending);
  EXPECT_EQ(b_done.wait(), Status::kSuccess);
  EXPECT_EQ(a_disc.wait(), true);
}

// MADs lost on the wire: the first REQ, the first REP, the RTU and the first DREQ are lost (the
// CM's test hook; the engine's fault injector does not see control frames); every handshake still
// completes by retransmission.
TEST_F(CmPair, LostMadsAreRetransmitted) {
  if (!kTesting) GTEST_SKIP() << "needs URNIC_TESTING";
  // Loses the nth MAD of the given type this agent sends.
  auto loser = [](std::vector<std::pair<cm::AttrId, int>> drops) {
    auto seen = std::make_shared<std::map<cm::AttrId, int>>();
    return [seen, drops](const cm::Message& m) {
      const int n = ++(*seen)[cm::attr_id(m)];
      for (const auto& [a, k] : drops)
        if (a == cm::attr_id(m) && k == n) return true;
      return false;
    };
  };
  auto cfg_a = fast_config(), cfg_b = fast_config();
  cfg_a.testing_drop_tx =
      loser({{cm::AttrId::kReq, 1}, {cm::AttrId::kRtu, 1}, {cm::AttrId::kDreq, 1}});
  cfg_b.testing_drop_tx = loser({{cm::AttrId::kRep, 1}});
  launch();
  ca = std::make_unique<ctl::CmAgent>(RcPair::internal(p->a), cfg_a);
  cb = std::make_unique<ctl::CmAgent>(RcPair::internal(p->b), cfg_b);
  std::unique_ptr<cmtest::CmConnector> b_conn;
  Latch<Status> accepted;
  Latch<bool> b_disc;
  // The passive QP is made before listening: the listener callback runs on the adapter's
  // control thread, where a synchronous create would wait for itself (docs/api.md).
  ASSERT_EQ(p->b.create_qp(nullptr, 256, 256, &p->b.qp), Status::kSuccess);
  auto listener = cmtest::create_listener(*cb);
  ASSERT_EQ(listener->listen(1,
                             [&](std::unique_ptr<cmtest::CmConnector> c) {
                               EXPECT_EQ(
                                   c->accept(
                                       &p->b.qp->internal(), {}, {}, [&] { b_disc.set(true); },
                                       [&](Status s) { accepted.set(s); }),
                                   Status::kPending);
                               b_conn = std::move(c);
                             }),
            Status::kSuccess);
  ASSERT_EQ(p->a.create_qp(nullptr, 256, 256, &p->a.qp), Status::kSuccess);
  auto a_conn = cmtest::create_connector(*ca);
  Latch<Status> connected;
  ASSERT_EQ(a_conn->connect(&p->a.qp->internal(), gid_b(), 1, {}, {},
                            [&](Status s) { connected.set(s); }),
            Status::kPending);
  ASSERT_EQ(connected.wait(), Status::kSuccess);
  ASSERT_EQ(a_conn->complete_connect({}), Status::kSuccess);
  ASSERT_EQ(accepted.wait(), Status::kSuccess);
  Latch<Status> a_done;
  ASSERT_EQ(a_conn->disconnect([&](Status s) { a_done.set(s); }), Status::kPending);
  EXPECT_EQ(a_done.wait(), Status::kSuccess);
  EXPECT_EQ(b_disc.wait(), true);
  // A: the DREQ once, the REQ once or twice (B's REP retransmission and A's REQ timer run on the
  // same 67 ms interval; whichever fires first decides). B: the REP twice (its first copy was
  // lost, and the RTU answering the second was lost). The RTU is re-sent as the answer to the
  // duplicate REP.
  // (At least: a loaded machine may answer later than 67 ms and cause more.)
  EXPECT_GE(ca->counters().retransmits, 2u);
  EXPECT_GE(cb->counters().retransmits, 2u);
  EXPECT_GE(ca->counters().out_by_attr[4], 2u);  // the RTU at least twice
  EXPECT_GE(ca->counters().duplicates, 1u);      // the retransmitted REP
}

// ---- urnic CM against a hand-played peer
// -----------------------------------------------------------

// Side B without a CM: the test sends and receives raw MADs on B's QP1 and sets B's QP up the way
// Linux ib_cm does, so a PSN-convention mistake on A's side shows as a broken connection.
class CmScripted : public CmLoopback {
 protected:
  // A 1.07 s response timeout: the hand-played steps stay well inside it, so no retransmission
  // arrives where the test expects another message (the timeout tests use fast_config()).
  static ctl::CmConfig scripted_config() { return steady_config(); }
  void clear() {
    std::lock_guard lock(mu_);
    got_.clear();
  }
  void start(const ctl::CmConfig& cfg = scripted_config()) {
    launch();
    ca = std::make_unique<ctl::CmAgent>(RcPair::internal(p->a), cfg);
    RcPair::internal(p->b).control().set_mad_handler([this](const ctl::MadIn& in) {
      cm::Message m;
      if (cm::decode(in.mad, &m) != cm::MadError::kOk) return;
      std::lock_guard lock(mu_);
      got_.push_back(m);
      cv_.notify_all();
    });
    wire::MacAddr mac{};
    ASSERT_EQ(RcPair::internal(p->b).control().resolve(gid_a(), &mac), Status::kSuccess);
  }
  // Next MAD B received, within `d`.
  std::optional<cm::Message> next(std::chrono::milliseconds d = 5s) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, d, [&] { return !got_.empty(); })) return std::nullopt;
    auto m = got_.front();
    got_.pop_front();
    return m;
  }
  template <typename T>
  T expect(std::chrono::milliseconds d = 5s) {
    auto m = next(d);
    EXPECT_TRUE(m.has_value());
    if (!m) return T{};
    EXPECT_TRUE(std::holds_alternative<T>(m->body)) << cm::to_string(cm::attr_id(*m));
    if (!std::holds_alternative<T>(m->body)) return T{};
    last_tid_ = m->tid;
    return std::get<T>(m->body);
  }
  void send(const cm::Message& m) {
    const auto b = cm::encode(m);
    ASSERT_EQ(RcPair::internal(p->b).control().send_mad(gid_a(), 1, ctl::ControlPlane::kGsiQkey, b),
              Status::kSuccess);
  }
  // B's QP to RTS, Linux-style: rq_psn = the Starting PSN B announced, sq_psn = A's.
  void b_qp_up(uint32_t dest_qpn, uint32_t rq_psn, uint32_t sq_psn) {
    using namespace qp_attr_mask;
    auto* x = p->b.qp->public_qp().query_extension<QpConnectExtension>();
    const LocalAddress to = address_of(*p->a.adapter);
    QpAttributes at;
    at.state = QpState::kInit;
    at.access = qp_access::kRemoteWrite | qp_access::kRemoteRead;
    ASSERT_EQ(x->modify(at, kState | kAccessFlags, nullptr, nullptr), Status::kSuccess);
    at.state = QpState::kRtr;
    at.av.dst_ipv4 = to.ipv4;
    at.av.dst_mac = to.mac;
    at.path_mtu = 1024;
    at.dest_qpn = dest_qpn;
    at.rq_psn = rq_psn;
    ASSERT_EQ(
        x->modify(at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
                  nullptr, nullptr),
        Status::kSuccess);
    at.state = QpState::kRts;
    at.sq_psn = sq_psn;
    ASSERT_EQ(x->modify(at, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic,
                        nullptr, nullptr),
              Status::kSuccess);
  }
  // One SEND each way over the connected QPs, checked byte for byte.
  void ping_pong() {
    std::vector<uint8_t> a_msg(200), b_msg(200), a_got(200, 0), b_got(200, 0);
    fill(a_msg, 5);
    fill(b_msg, 6);
    const uint32_t k1 = p->a.reg(a_msg.data(), 200, mr_flag::kAllowLocalWrite);
    const uint32_t k2 = p->a.reg(a_got.data(), 200, mr_flag::kAllowLocalWrite);
    const uint32_t k3 = p->b.reg(b_msg.data(), 200, mr_flag::kAllowLocalWrite);
    const uint32_t k4 = p->b.reg(b_got.data(), 200, mr_flag::kAllowLocalWrite);
    dp::RecvWqe r;
    r.num_sge = 1;
    r.length = 200;
    r.sge[0] = {reinterpret_cast<uint64_t>(a_got.data()), 200, k2};
    ASSERT_EQ(p->a.qp->post_recv(r), Status::kSuccess);
    r.sge[0] = {reinterpret_cast<uint64_t>(b_got.data()), 200, k4};
    ASSERT_EQ(p->b.qp->post_recv(r), Status::kSuccess);
    auto s = wqe(dp::WrOpcode::kSend, nullptr);
    s.num_sge = 1;
    s.length = 200;
    s.sge[0] = {reinterpret_cast<uint64_t>(a_msg.data()), 200, k1};
    ASSERT_EQ(p->a.qp->post_send(s), Status::kSuccess);
    s.sge[0] = {reinterpret_cast<uint64_t>(b_msg.data()), 200, k3};
    ASSERT_EQ(p->b.qp->post_send(s), Status::kSuccess);
    const size_t as = p->a.send_done.size(), ar = p->a.recv_done.size();
    const size_t bs = p->b.send_done.size(), br = p->b.recv_done.size();
    ASSERT_TRUE(p->wait(as + 1, br + 1, bs + 1, ar + 1));
    EXPECT_EQ(p->a.send_done.back().status, Status::kSuccess);
    EXPECT_EQ(p->b.send_done.back().status, Status::kSuccess);
    EXPECT_EQ(a_got, b_msg);
    EXPECT_EQ(b_got, a_msg);
  }
  cm::Req make_req(uint32_t comm_id, uint32_t qpn, uint32_t psn, uint16_t port) {
    cm::Req r;
    r.local_comm_id = comm_id;
    r.service_id = cm::service_id_for(port);
    r.local_ca_guid = 0x505400fffe990002;
    r.local_qpn = qpn;
    r.responder_resources = 1;
    r.initiator_depth = 1;
    r.remote_cm_response_timeout = 14;
    r.starting_psn = psn;
    r.local_cm_response_timeout = 14;
    r.retry_count = 7;
    r.path_mtu = 3;
    r.rnr_retry_count = 7;
    r.max_cm_retries = 3;
    r.primary.local_gid = gid_b();
    r.primary.remote_gid = gid_a();
    r.primary.hop_limit = 64;
    r.primary.local_ack_timeout = 14;
    cm::CmaHdr h{cm::kCmaVersion, 4, 40000, gid_b(), gid_a()};
    cm::encode(h, std::span<uint8_t, cm::kCmaHdrSize>(r.private_data.data(), cm::kCmaHdrSize));
    return r;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<cm::Message> got_;
  uint64_t last_tid_ = 0;
};

// urnic active against a Linux-style passive peer: REQ fields, the PSN convention, duplicate REP
// -> MRA, then RTU, data, a DREQ from the peer answered with DREP.
TEST_F(CmScripted, ActiveSideFollowsLinuxPsnConvention) {
  start();
  ASSERT_EQ(p->a.create_qp(nullptr, 256, 256, &p->a.qp), Status::kSuccess);
  ASSERT_EQ(p->b.create_qp(nullptr, 256, 256, &p->b.qp), Status::kSuccess);
  auto conn = cmtest::create_connector(*ca);
  Latch<Status> connected;
  const uint8_t hello[] = {'h', 'i'};
  ASSERT_EQ(conn->connect(&p->a.qp->internal(), gid_b(), 7471, {1, 1}, hello,
                          [&](Status s) { connected.set(s); }),
            Status::kPending);
  // Receive REQ -> expect the rdma_cm layout.
  const auto req = expect<cm::Req>();
  const uint64_t tid = last_tid_;
  EXPECT_EQ(req.service_id, cm::service_id_for(7471));
  EXPECT_EQ(req.local_ca_guid, ca->ca_guid());
  EXPECT_EQ(req.local_qpn, p->a.qp->qpn());
  EXPECT_EQ(req.path_mtu, 3);
  EXPECT_EQ(req.retry_count, 7);
  EXPECT_EQ(req.rnr_retry_count, 7);
  EXPECT_EQ(req.remote_cm_response_timeout, 18);
  EXPECT_EQ(req.local_cm_response_timeout, 18);
  EXPECT_EQ(req.max_cm_retries, 3);
  EXPECT_EQ(req.primary.local_lid, 0xFFFF);
  EXPECT_EQ(req.primary.local_gid, gid_a());
  EXPECT_EQ(req.primary.remote_gid, gid_b());
  EXPECT_EQ(req.primary.hop_limit, 64);
  cm::CmaHdr h;
  ASSERT_TRUE(cm::decode(
      std::span<const uint8_t, cm::kCmaHdrSize>(req.private_data.data(), cm::kCmaHdrSize), &h));
  EXPECT_EQ(h.ip_version, 4);
  EXPECT_EQ(h.src, gid_a());
  EXPECT_EQ(h.dst, gid_b());
  EXPECT_EQ(req.private_data[cm::kCmaHdrSize], 'h');
  // The REQ offers selective repeat in its last 8 bytes (2 bytes of caller data leave room).
  EXPECT_TRUE(std::equal(cm::kSrMark.begin(), cm::kSrMark.end(),
                         req.private_data.end() - cm::kSrMark.size()));
  // The CA GUID is the MAC as EUI-64: 02:00:00:00:00:01 -> 0000:00ff:fe00:0001.
  EXPECT_EQ(ca->ca_guid(), 0x000000fffe000001u);

  // Linux passive (cm_req_handler / ib_send_cm_rep): B sends from the REQ's PSN and announces
  // the PSN it expects.
  const uint32_t b_psn = 0xABCDEF;
  b_qp_up(req.local_qpn, b_psn, req.starting_psn);
  cm::Rep rep;
  rep.local_comm_id = 0x1234;
  rep.remote_comm_id = req.local_comm_id;
  rep.local_qpn = p->b.qp->qpn();
  rep.starting_psn = b_psn;
  rep.responder_resources = 1;
  rep.initiator_depth = 1;
  rep.rnr_retry_count = 7;
  rep.local_ca_guid = 0x505400fffe990003;
  rep.private_data[0] = 'o';
  send(cm::Message{tid, 0, rep});
  ASSERT_EQ(connected.wait(), Status::kSuccess);
  // The REP again while the consumer has not decided: MRA(REP).
  send(cm::Message{tid, 0, rep});
  const auto mra = expect<cm::Mra>();
  EXPECT_EQ(mra.message_mraed, cm::MsgResponse::kRep);
  EXPECT_EQ(mra.remote_comm_id, 0x1234u);
  EXPECT_EQ(mra.service_timeout, 24);
  EXPECT_EQ(conn->state(), ctl::CmState::kMraRepSent);
  ASSERT_EQ(conn->complete_connect({}), Status::kSuccess);
  EXPECT_EQ(p->a.qp->internal().state(), dp::QpState::kRts);
  // A Linux REP does not take up the offer: the QP keeps go-back-N.
  EXPECT_FALSE(p->a.qp->internal().attr().selective_repeat);
  const auto rtu = expect<cm::Rtu>();
  EXPECT_EQ(last_tid_, tid);
  EXPECT_EQ(rtu.local_comm_id, req.local_comm_id);
  EXPECT_EQ(rtu.remote_comm_id, 0x1234u);
  ping_pong();
  // A third REP (our RTU was "lost"): the RTU again.
  send(cm::Message{tid, 0, rep});
  expect<cm::Rtu>();
  // The peer disconnects: DREP with the DREQ's TID.
  send(cm::Message{0x77, 0, cm::Dreq{0x1234, req.local_comm_id, p->a.qp->qpn(), {}}});
  const auto drep = expect<cm::Drep>();
  EXPECT_EQ(last_tid_, 0x77u);
  EXPECT_EQ(drep.local_comm_id, req.local_comm_id);
  EXPECT_EQ(drep.remote_comm_id, 0x1234u);
  EXPECT_EQ(conn->state(), ctl::CmState::kTimewait);
  // A retransmitted DREQ in TIMEWAIT gets another DREP.
  send(cm::Message{0x77, 0, cm::Dreq{0x1234, req.local_comm_id, p->a.qp->qpn(), {}}});
  expect<cm::Drep>();
  EXPECT_EQ(conn->disconnect([](Status) {}), Status::kSuccess);
}

// urnic passive against a Linux-style active peer: the REP, duplicate REQ -> MRA, REP
// retransmitted while the RTU is missing, then data, a stale REQ in TIMEWAIT -> REJ 10.
TEST_F(CmScripted, PassiveSideMraRepRetransmitAndStaleReq) {
  start();
  ASSERT_EQ(p->b.create_qp(nullptr, 256, 256, &p->b.qp), Status::kSuccess);
  std::unique_ptr<cmtest::CmConnector> conn;
  Latch<bool> requested;
  Latch<Status> accepted;
  auto listener = cmtest::create_listener(*ca);
  ASSERT_EQ(listener->listen(18515,
                             [&](std::unique_ptr<cmtest::CmConnector> c) {
                               conn = std::move(c);
                               requested.set(true);
                             }),
            Status::kSuccess);
  const uint32_t b_psn = 0x00F00D;
  const cm::Req req = make_req(0xC0FFEE, p->b.qp->qpn(), b_psn, 18515);
  send(cm::Message{0x42, 0, req});
  ASSERT_EQ(requested.wait(), true);
  uint8_t pd[cm::kMaxReqUserData];
  uint32_t len = sizeof(pd);
  ctl::ReadLimits lim;
  ASSERT_EQ(conn->get_connection_data(&lim, pd, &len), Status::kSuccess);
  EXPECT_EQ(len, cm::kMaxReqUserData);
  // The consumer takes its time: the retransmitted REQ is answered with MRA(REQ).
  send(cm::Message{0x42, 0, req});
  const auto mra = expect<cm::Mra>();
  EXPECT_EQ(last_tid_, 0x42u);
  EXPECT_EQ(mra.message_mraed, cm::MsgResponse::kReq);
  EXPECT_EQ(mra.remote_comm_id, 0xC0FFEEu);
  EXPECT_EQ(conn->state(), ctl::CmState::kMraReqSent);
  send(cm::Message{0x42, 0, req});
  expect<cm::Mra>();  // and again
  // Accept.
  ASSERT_EQ(p->a.create_qp(nullptr, 256, 256, &p->a.qp), Status::kSuccess);
  const uint8_t ok[] = {'o', 'k'};
  ASSERT_EQ(conn->accept(&p->a.qp->internal(), {1, 1}, ok, {}, [&](Status s) { accepted.set(s); }),
            Status::kPending);
  const auto rep = expect<cm::Rep>();
  EXPECT_EQ(last_tid_, 0x42u);
  EXPECT_EQ(rep.remote_comm_id, 0xC0FFEEu);
  EXPECT_EQ(rep.local_qpn, p->a.qp->qpn());
  EXPECT_EQ(rep.local_ca_guid, ca->ca_guid());
  EXPECT_EQ(rep.rnr_retry_count, 7);
  EXPECT_EQ(rep.target_ack_delay, 15);
  EXPECT_EQ(rep.private_data[0], 'o');
  // A Linux REQ offers no selective repeat: our REP does not claim it, the QP keeps go-back-N.
  EXPECT_FALSE(std::equal(cm::kSrMark.begin(), cm::kSrMark.end(),
                          rep.private_data.end() - cm::kSrMark.size()));
  EXPECT_FALSE(p->a.qp->internal().attr().selective_repeat);
  // No RTU yet: the REP comes again after the REQ's CM response timeout (67 ms).
  const auto t0 = Clock::now();
  const auto rep2 = expect<cm::Rep>(2s);
  EXPECT_GE(Clock::now() - t0, 50ms);
  EXPECT_EQ(rep2, rep);
  // Linux active (cm_rep_handler): sq_psn = REP's Starting PSN, rq_psn = our REQ's.
  b_qp_up(rep.local_qpn, b_psn, rep.starting_psn);
  send(cm::Message{0x42, 0, cm::Rtu{0xC0FFEE, rep.local_comm_id, {}}});
  ASSERT_EQ(accepted.wait(), Status::kSuccess);
  ping_pong();
  clear();  // REP copies sent before the RTU arrived
  // A duplicate REQ while established is ignored (Linux cm_dup_req_handler).
  send(cm::Message{0x42, 0, req});
  EXPECT_FALSE(next(200ms).has_value());
  // The active side disconnects.
  send(cm::Message{0x43, 0, cm::Dreq{0xC0FFEE, rep.local_comm_id, p->a.qp->qpn(), {}}});
  expect<cm::Drep>();
  // The same REQ once more, now in TIMEWAIT: REJ stale connection.
  send(cm::Message{0x42, 0, req});
  const auto rej = expect<cm::Rej>();
  EXPECT_EQ(rej.reason, cm::RejReason::kStaleConn);
  EXPECT_EQ(rej.remote_comm_id, 0xC0FFEEu);
  // A DREQ for a connection nobody knows still gets its DREP.
  send(cm::Message{0x44, 0, cm::Dreq{0x999, 0x888, 77, {}}});
  const auto drep = expect<cm::Drep>();
  EXPECT_EQ(drep.local_comm_id, 0x888u);
  EXPECT_EQ(drep.remote_comm_id, 0x999u);
  EXPECT_GE(ca->counters().unmatched, 1u);
}

// Nobody answers the REQ: 1 + max_cm_retries REQs, then REJ "timeout" with our CA GUID as ARI and
// kIoTimeout. Nobody answers the REP: the same on the passive side.
TEST_F(CmScripted, HandshakeTimeoutsSendRejTimeout) {
  start(fast_config());
  ASSERT_EQ(p->a.create_qp(nullptr, 256, 256, &p->a.qp), Status::kSuccess);
  auto conn = cmtest::create_connector(*ca);
  Latch<Status> done;
  ASSERT_EQ(conn->connect(&p->a.qp->internal(), gid_b(), 1, {}, {}, [&](Status s) { done.set(s); }),
            Status::kPending);
  const auto req = expect<cm::Req>();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(expect<cm::Req>(), req) << i;
  const auto rej = expect<cm::Rej>();
  EXPECT_EQ(rej.reason, cm::RejReason::kTimeout);
  EXPECT_EQ(rej.ari_length, 8);
  uint64_t g = 0;
  for (int i = 0; i < 8; ++i) g = g << 8 | rej.ari[i];
  EXPECT_EQ(g, ca->ca_guid());
  EXPECT_EQ(rej.local_comm_id, req.local_comm_id);
  EXPECT_EQ(done.wait(), Status::kIoTimeout);
  EXPECT_EQ(ca->counters().retransmits, 3u);
  EXPECT_EQ(ca->counters().timeouts, 1u);
  clear();

  // Passive: REQ, accept, no RTU ever.
  std::unique_ptr<cmtest::CmConnector> pc;
  Latch<Status> accepted;
  ASSERT_EQ(p->b.create_qp(nullptr, 256, 256, &p->b.qp), Status::kSuccess);
  auto listener = cmtest::create_listener(*ca);
  TestQp* q2 = nullptr;
  ASSERT_EQ(p->a.create_qp(nullptr, 256, 256, &q2), Status::kSuccess);
  ASSERT_EQ(listener->listen(2,
                             [&](std::unique_ptr<cmtest::CmConnector> c) {
                               EXPECT_EQ(c->accept(&q2->internal(), {}, {}, {},
                                                   [&](Status s) { accepted.set(s); }),
                                         Status::kPending);
                               pc = std::move(c);
                             }),
            Status::kSuccess);
  send(cm::Message{0x50, 0, make_req(0xBEEF, p->b.qp->qpn(), 1, 2)});
  const auto rep = expect<cm::Rep>();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(expect<cm::Rep>(), rep) << i;
  const auto rej2 = expect<cm::Rej>();
  EXPECT_EQ(rej2.reason, cm::RejReason::kTimeout);
  EXPECT_EQ(rej2.message_rejected, cm::MsgResponse::kRep);
  EXPECT_EQ(accepted.wait(), Status::kIoTimeout);
  EXPECT_EQ(q2->state(), dp::QpState::kErr);  // flushed
}

// A peer flooding REQs (distinct comm IDs) at a listener whose consumer decides nothing: the
// first max_pending_requests reach the consumer, every one beyond is refused with REJ "no
// resources" (reason 3) and counted; once the consumer rejects one, a new REQ gets through.
TEST_F(CmScripted, RequestsBeyondTheBacklogAreRejectedNoResources) {
  auto cfg = scripted_config();
  cfg.max_pending_requests = 8;
  start(cfg);
  std::mutex mu;
  std::vector<std::unique_ptr<cmtest::CmConnector>> held;
  auto listener = cmtest::create_listener(*ca);
  ASSERT_EQ(listener->listen(18515,
                             [&](std::unique_ptr<cmtest::CmConnector> c) {
                               std::lock_guard lock(mu);
                               held.push_back(std::move(c));
                             }),
            Status::kSuccess);
  constexpr uint32_t kFlood = 20;
  for (uint32_t i = 0; i < kFlood; ++i)
    send(cm::Message{0x900 + i, 0, make_req(0xF000 + i, 0x100 + i, 0x10 + i, 18515)});
  // Every REQ beyond the backlog is answered at once with REJ(REQ) "no resources".
  std::set<uint32_t> rejected;
  for (uint32_t i = 0; i < kFlood - cfg.max_pending_requests; ++i) {
    const auto rej = expect<cm::Rej>();
    EXPECT_EQ(rej.reason, cm::RejReason::kNoResources);
    EXPECT_EQ(rej.message_rejected, cm::MsgResponse::kReq);
    rejected.insert(rej.remote_comm_id);
  }
  EXPECT_EQ(rejected.size(), kFlood - cfg.max_pending_requests);
  EXPECT_EQ(ca->counters().backlog_full, kFlood - cfg.max_pending_requests);
  const auto deadline = Clock::now() + 10s;
  while (Clock::now() < deadline) {
    std::lock_guard lock(mu);
    if (held.size() == cfg.max_pending_requests) break;
  }
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(held.size(), cfg.max_pending_requests);
    // The consumer refuses one: its slot frees up.
    ASSERT_EQ(held[0]->reject({}), Status::kSuccess);
  }
  EXPECT_EQ(expect<cm::Rej>().reason, cm::RejReason::kConsumerDefined);
  send(cm::Message{0x999, 0, make_req(0xF999, 0x199, 0x99, 18515)});
  const auto until = Clock::now() + 10s;
  while (Clock::now() < until) {
    std::lock_guard lock(mu);
    if (held.size() == cfg.max_pending_requests + 1) break;
  }
  std::lock_guard lock(mu);
  EXPECT_EQ(held.size(), cfg.max_pending_requests + 1);
  EXPECT_EQ(ca->counters().backlog_full, kFlood - cfg.max_pending_requests);
  held.clear();  // dropping undecided connectors rejects them
}

// A REJ while the consumer is still deciding aborts its accept / complete_connect.
TEST_F(CmScripted, PeerGivesUpWhileConsumerDecides) {
  start();
  std::unique_ptr<cmtest::CmConnector> conn;
  Latch<bool> requested;
  auto listener = cmtest::create_listener(*ca);
  ASSERT_EQ(listener->listen(3,
                             [&](std::unique_ptr<cmtest::CmConnector> c) {
                               conn = std::move(c);
                               requested.set(true);
                             }),
            Status::kSuccess);
  send(cm::Message{0x60, 0, make_req(0xAAAA, 0x55, 1, 3)});
  ASSERT_EQ(requested.wait(), true);
  // The active side times out: REJ "timeout", found by its CA GUID in the ARI.
  cm::Rej rej;
  rej.local_comm_id = 0xAAAA;
  rej.reason = cm::RejReason::kTimeout;
  rej.ari_length = 8;
  const uint64_t g = 0x505400fffe990002;
  for (int i = 0; i < 8; ++i) rej.ari[i] = static_cast<uint8_t>(g >> (56 - 8 * i));
  send(cm::Message{0x60, 0, rej});
  const auto deadline = Clock::now() + 5s;
  while (conn->state() != ctl::CmState::kIdle && Clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(p->a.create_qp(nullptr, 256, 256, &p->a.qp), Status::kSuccess);
  EXPECT_EQ(conn->accept(&p->a.qp->internal(), {}, {}, {}, [](Status) { ADD_FAILURE(); }),
            Status::kConnectionAborted);
  EXPECT_EQ(conn->reject({}), Status::kConnectionAborted);
}

}  // namespace
}  // namespace urnic::test
