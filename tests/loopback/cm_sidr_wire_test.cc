// SIDR (IBTA §12.11) on the wire against a hand-played peer: side A runs a urnic CmAgent, side B
// has no CM and sends and receives raw MADs on its QP1 (as tests/loopback/cm_wire_test.cc).
//   - Active: A's SIDR_REQ as rdma_cm builds it (UDP service ID, P_Key, IP CM header, data),
//     retransmitted with the same request ID and TID until the retries run out (kIoTimeout); a
//     SIDR_REP is matched by request ID and source; status 0 with Q_Key 0 is refused.
//   - Passive: a duplicate SIDR_REQ while the consumer decides is dropped and makes no second
//     request; once answered, a duplicate gets the same SIDR_REP again; nobody listening, a TCP
//     service ID or a bad IP CM header gets status 1 (service ID not supported); a SIDR_REP for
//     nothing and a SIDR MAD of another class version are counted and dropped.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <optional>

#include "control/cm/cm.h"
#include "control/cm/cma.h"
#include "control/cm/mad.h"
#include "rc_fixture.h"
#include "tests/common/cm_handles.h"

namespace urnic::test {
namespace {

using namespace std::chrono_literals;
namespace cm = ctl::cm;

class CmSidrWire : public EalTest {
 protected:
  void SetUp() override {
    dp::EngineConfig ec;
    ec.idle_yield_after = 256;
    static int n = 0;
    p = std::make_unique<RcPair>("cmsw" + std::to_string(n++), ec);
    ASSERT_TRUE(p->engine().launch(1));
  }
  // `response_timeout`: 14 (67 ms) for the retry cases, 18 (1.07 s) where no retransmission may
  // reach the checks.
  void start(uint8_t response_timeout = 18) {
    ctl::CmConfig cfg;
    cfg.cm_response_timeout = response_timeout;
    cfg.max_cm_retries = 2;
    cfg.timewait = 10s;  // the passive side holds its answers for the whole test
    ca = std::make_unique<ctl::CmAgent>(RcPair::internal(p->a), cfg);
    RcPair::internal(p->b).control().set_mad_handler([this](const ctl::MadIn& in) {
      cm::Message m;
      if (cm::decode(in.mad, &m) != cm::MadError::kOk) return;
      std::lock_guard lock(mu_);
      got_.push_back({m, std::vector<uint8_t>(in.mad.begin(), in.mad.end())});
      cv_.notify_all();
    });
    wire::MacAddr mac{};
    ASSERT_EQ(RcPair::internal(p->b).control().resolve(gid_a(), &mac), Status::kSuccess);
  }
  void TearDown() override {
    ca.reset();
    p.reset();
  }
  cm::Gid gid_a() const { return ctl::gid_from_ipv4(RcPair::internal(p->a).ipv4()); }
  cm::Gid gid_b() const { return ctl::gid_from_ipv4(RcPair::internal(p->b).ipv4()); }

  struct Got {
    cm::Message m;
    std::vector<uint8_t> bytes;
  };
  // The next MAD B receives, within 5 s.
  std::optional<Got> next() {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, 5s, [&] { return !got_.empty(); })) return std::nullopt;
    Got g = got_.front();
    got_.pop_front();
    return g;
  }
  template <typename T>
  T expect(Got* raw = nullptr) {
    auto g = next();
    EXPECT_TRUE(g.has_value());
    if (!g || !std::holds_alternative<T>(g->m.body)) {
      ADD_FAILURE() << (g ? cm::to_string(cm::attr_id(g->m)) : "nothing");
      return T{};
    }
    if (raw != nullptr) *raw = *g;
    return std::get<T>(g->m.body);
  }
  size_t pending() {
    std::lock_guard lock(mu_);
    return got_.size();
  }
  void send_raw(const std::array<uint8_t, cm::kMadSize>& b) {
    ASSERT_EQ(RcPair::internal(p->b).control().send_mad(gid_a(), 1, ctl::ControlPlane::kGsiQkey, b),
              Status::kSuccess);
  }
  void send(const cm::Message& m) { send_raw(cm::encode(m)); }
  // A SIDR_REQ as udaddy's rdma_cm sends it to `port` (`port_space` kPsUdp), with `data`.
  cm::Message peer_req(uint32_t request_id, uint16_t port, std::vector<uint8_t> data,
                       uint16_t port_space = cm::kPsUdp) const {
    cm::SidrReq r;
    r.request_id = request_id;
    r.service_id = cm::service_id_for(port, port_space);
    cm::encode(cm::CmaHdr{cm::kCmaVersion, 4, 0xBEEF, gid_b(), gid_a()},
               std::span<uint8_t, cm::kCmaHdrSize>(r.private_data.data(), cm::kCmaHdrSize));
    std::copy(data.begin(), data.end(), r.private_data.begin() + cm::kCmaHdrSize);
    return cm::Message{0x5151000000000000ull | request_id, 0, r};
  }
  // Waits until the agent's counters satisfy `f`.
  template <typename F>
  bool counters_reach(F f) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!f(ca->counters())) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }

  std::unique_ptr<RcPair> p;
  std::unique_ptr<ctl::CmAgent> ca;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Got> got_;
};

TEST_F(CmSidrWire, ActiveSendsRdmaCmSidrReqAndRetriesUntilTimeout) {
  start(14);
  auto c = cmtest::create_connector(*ca);
  std::promise<Status> done;
  const std::vector<uint8_t> data = {'p', 'i', 'n', 'g'};
  ASSERT_EQ(c->resolve(gid_b(), 7471, data, [&](Status s) { done.set_value(s); }),
            Status::kPending);
  Got first;
  const auto req = expect<cm::SidrReq>(&first);
  EXPECT_EQ(req.service_id, 0x0000000001111D2Fu);  // RDMA_PS_UDP, port 7471
  EXPECT_EQ(req.pkey, 0xFFFF);
  EXPECT_NE(req.request_id, 0u);
  cm::CmaHdr h;
  ASSERT_TRUE(cm::decode(
      std::span<const uint8_t, cm::kCmaHdrSize>(req.private_data.data(), cm::kCmaHdrSize), &h));
  EXPECT_EQ(h.ip_version, 4);
  EXPECT_EQ(h.src, gid_a());
  EXPECT_EQ(h.dst, gid_b());
  EXPECT_EQ(h.src_port, c->local_port());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), req.private_data.begin() + cm::kCmaHdrSize));
  EXPECT_EQ(c->state(), ctl::CmState::kSidrReqSent);
  // Unanswered: the same SIDR_REQ (request ID, TID, bytes) max_cm_retries more times, then
  // kIoTimeout.
  for (int i = 0; i < 2; ++i) {
    Got again;
    (void)expect<cm::SidrReq>(&again);
    EXPECT_EQ(again.m.tid, first.m.tid);
    EXPECT_EQ(again.bytes, first.bytes);
  }
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(f.get(), Status::kIoTimeout);
  const auto k = ca->counters();
  EXPECT_EQ(k.retransmits, 2u);
  EXPECT_EQ(k.timeouts, 1u);
  EXPECT_EQ(k.out_by_attr[ctl::attr_slot(cm::AttrId::kSidrReq)], 3u);
  EXPECT_EQ(pending(), 0u);
}

TEST_F(CmSidrWire, ActiveMatchesTheReplyAndRefusesAZeroQkey) {
  start();
  // Status 0 with Q_Key 0: rdma_cm's cma_sidr_rep_handler refuses it, and so do we.
  {
    auto c = cmtest::create_connector(*ca);
    std::promise<Status> done;
    ASSERT_EQ(c->resolve(gid_b(), 7471, {}, [&](Status s) { done.set_value(s); }),
              Status::kPending);
    Got g;
    const auto req = expect<cm::SidrReq>(&g);
    cm::SidrRep rep;
    rep.request_id = req.request_id;
    rep.qpn = 0x99;
    rep.service_id = req.service_id;
    send(cm::Message{g.m.tid, 0, rep});
    auto f = done.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f.get(), Status::kConnectionRefused);
    EXPECT_EQ(c->datagram_peer(nullptr, nullptr), Status::kConnectionInvalid);
  }
  auto c = cmtest::create_connector(*ca);
  std::promise<Status> done;
  ASSERT_EQ(c->resolve(gid_b(), 7471, {}, [&](Status s) { done.set_value(s); }), Status::kPending);
  Got g;
  const auto req = expect<cm::SidrReq>(&g);
  cm::SidrRep rep;
  rep.service_id = req.service_id;
  rep.qpn = 0x123456;
  rep.qkey = 0x0BADCAFE;
  rep.private_data.fill(0x3C);
  // Another request ID: not ours; counted and dropped.
  rep.request_id = req.request_id + 1;
  send(cm::Message{g.m.tid, 0, rep});
  ASSERT_TRUE(counters_reach([](const ctl::CmCounters& k) { return k.unmatched == 1; }));
  EXPECT_EQ(c->state(), ctl::CmState::kSidrReqSent);
  rep.request_id = req.request_id;
  send(cm::Message{g.m.tid, 0, rep});
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(f.get(), Status::kSuccess);
  uint32_t qpn = 0, qkey = 0;
  ASSERT_EQ(c->datagram_peer(&qpn, &qkey), Status::kSuccess);
  EXPECT_EQ(qpn, 0x123456u);
  EXPECT_EQ(qkey, 0x0BADCAFEu);
  std::vector<uint8_t> pd(cm::kSidrRepPrivateData);
  uint32_t len = static_cast<uint32_t>(pd.size());
  ASSERT_EQ(c->get_connection_data(nullptr, pd.data(), &len), Status::kSuccess);
  EXPECT_EQ(pd, std::vector<uint8_t>(cm::kSidrRepPrivateData, 0x3C));
  // The same SIDR_REP again: the request is over, so it matches nothing.
  send(cm::Message{g.m.tid, 0, rep});
  ASSERT_TRUE(counters_reach([](const ctl::CmCounters& k) { return k.unmatched == 2; }));
  EXPECT_EQ(ca->connections(), 0u);
}

TEST_F(CmSidrWire, PassiveAnswersOnceAndRepeatsTheAnswerForDuplicates) {
  start();
  auto l = cmtest::create_listener(*ca);
  std::mutex mu;
  std::vector<std::unique_ptr<cmtest::CmConnector>> reqs;
  std::atomic<int> handed{0};
  ASSERT_EQ(l->listen(
                7471,
                [&](std::unique_ptr<cmtest::CmConnector> c) {
                  std::lock_guard lock(mu);
                  reqs.push_back(std::move(c));
                  handed.fetch_add(1);
                },
                cm::kPsUdp),
            Status::kSuccess);
  const auto req = peer_req(0xCAFE0001, 7471, {'h', 'i'});
  send(req);
  ASSERT_TRUE(counters_reach([&](const ctl::CmCounters&) { return handed.load() == 1; }));
  cmtest::CmConnector* c = nullptr;
  {
    std::lock_guard lock(mu);
    c = reqs.front().get();
  }
  EXPECT_EQ(c->state(), ctl::CmState::kSidrReqRcvd);
  EXPECT_TRUE(c->info().datagram);
  EXPECT_EQ(c->peer_port(), 0xBEEF);
  // The consumer still decides: a retry is dropped, not handed over again, not answered.
  send(req);
  ASSERT_TRUE(counters_reach([](const ctl::CmCounters& k) { return k.duplicates == 1; }));
  EXPECT_EQ(pending(), 0u);
  std::vector<uint8_t> answer(cm::kSidrRepPrivateData);
  fill(answer, 5);
  ASSERT_EQ(c->accept_datagram(0x000777, 0x01234567, answer), Status::kSuccess);
  Got first;
  const auto rep = expect<cm::SidrRep>(&first);
  EXPECT_EQ(first.m.tid, req.tid);
  EXPECT_EQ(rep.request_id, 0xCAFE0001u);
  EXPECT_EQ(rep.status, cm::SidrStatus::kValid);
  EXPECT_EQ(rep.qpn, 0x777u);
  EXPECT_EQ(rep.qkey, 0x01234567u);
  EXPECT_EQ(rep.service_id, cm::service_id_for(7471, cm::kPsUdp));
  EXPECT_EQ(rep.info_length, 0);
  EXPECT_TRUE(std::equal(answer.begin(), answer.end(), rep.private_data.begin()));
  // Answered: a retry gets the same SIDR_REP, byte for byte, and still no second request.
  send(req);
  Got again;
  (void)expect<cm::SidrRep>(&again);
  EXPECT_EQ(again.bytes, first.bytes);
  EXPECT_EQ(handed.load(), 1);
  EXPECT_EQ(ca->counters().duplicates, 2u);
  // Another request ID from the same peer is a new request.
  send(peer_req(0xCAFE0002, 7471, {}));
  ASSERT_TRUE(counters_reach([&](const ctl::CmCounters&) { return handed.load() == 2; }));
  {
    std::lock_guard lock(mu);
    c = reqs.back().get();
  }
  // Closing it undecided refuses it (Linux cm_destroy_id: IB_SIDR_REJECT).
  c->close();
  const auto refused = expect<cm::SidrRep>();
  EXPECT_EQ(refused.request_id, 0xCAFE0002u);
  EXPECT_EQ(refused.status, cm::SidrStatus::kRejected);
}

TEST_F(CmSidrWire, UnservedAndMalformedRequests) {
  start();
  auto l = cmtest::create_listener(*ca);
  std::atomic<int> handed{0};
  ASSERT_EQ(
      l->listen(
          7471, [&](std::unique_ptr<cmtest::CmConnector>) { handed.fetch_add(1); }, cm::kPsUdp),
      Status::kSuccess);
  // Nobody on the port; the TCP service ID of a listened UDP port; an IP CM header of version
  // 1.0: "service ID not supported", with the request's ID, service ID and TID.
  auto bad_hdr = peer_req(3, 7471, {});
  std::get<cm::SidrReq>(bad_hdr.body).private_data[0] = 0x10;
  for (const cm::Message& m : {peer_req(1, 9999, {}), peer_req(2, 7471, {}, cm::kPsTcp), bad_hdr}) {
    send(m);
    const auto rep = expect<cm::SidrRep>();
    const auto& req = std::get<cm::SidrReq>(m.body);
    EXPECT_EQ(rep.request_id, req.request_id);
    EXPECT_EQ(rep.status, cm::SidrStatus::kServiceIdNotSupported) << req.request_id;
    EXPECT_EQ(rep.service_id, req.service_id);
    EXPECT_EQ(rep.qpn, 0u);
  }
  EXPECT_EQ(ca->counters().no_listener, 3u);
  // A SIDR_REQ of CM class version 1: counted as a decode error, no answer.
  auto v1 = cm::encode(peer_req(4, 7471, {}));
  v1[2] = 1;
  send_raw(v1);
  ASSERT_TRUE(counters_reach([](const ctl::CmCounters& k) {
    return k.decode_errors[static_cast<size_t>(cm::MadError::kClassVersion)] == 1;
  }));
  // A SIDR_REP nobody asked for: counted, dropped.
  cm::SidrRep stray;
  stray.request_id = 0x77;
  send(cm::Message{1, 0, stray});
  ASSERT_TRUE(counters_reach([](const ctl::CmCounters& k) { return k.unmatched == 1; }));
  EXPECT_EQ(handed.load(), 0);
  EXPECT_EQ(pending(), 0u);
  EXPECT_EQ(ca->counters().in_by_attr[ctl::attr_slot(cm::AttrId::kSidrReq)], 3u);
}

}  // namespace
}  // namespace urnic::test
