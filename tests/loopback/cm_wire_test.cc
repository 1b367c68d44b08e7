// Wire details of the connection manager's MADs against a hand-played peer (issue 18 item 7):
// side A runs a urnic CmAgent, side B has no CM and sends and receives raw MADs on its QP1.
//   - End-to-End Flow Control (IBTA tables 187 and 196): our REQ and REP say 0, because our ACKs
//     advertise no credits (AETH credit code 31); a peer's REQ or REP is accepted with either
//     value of the bit (Linux rdma_cm sends what the application put in conn_param).
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
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

class CmWire : public EalTestWithParam<bool> {
 protected:
  void SetUp() override {
    dp::EngineConfig ec;
    ec.idle_yield_after = 256;
    static int n = 0;
    p = std::make_unique<RcPair>("cmw" + std::to_string(n++), ec);
    ASSERT_TRUE(p->engine().launch(1));
    ctl::CmConfig cfg;
    cfg.cm_response_timeout = 18;  // 1.07 s: no retransmission reaches the checks below
    cfg.path_mtu = 1024;
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
  void TearDown() override {
    ca.reset();
    p.reset();
  }
  cm::Gid gid_a() const { return ctl::gid_from_ipv4(RcPair::internal(p->a).ipv4()); }
  cm::Gid gid_b() const { return ctl::gid_from_ipv4(RcPair::internal(p->b).ipv4()); }

  // The next MAD of type T that B receives (others are skipped), within 5 s.
  template <typename T>
  std::optional<T> expect(uint64_t* tid = nullptr) {
    std::unique_lock lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (cv_.wait_until(lock, deadline, [&] { return !got_.empty(); })) {
      const cm::Message m = got_.front();
      got_.pop_front();
      if (!std::holds_alternative<T>(m.body)) continue;
      if (tid != nullptr) *tid = m.tid;
      return std::get<T>(m.body);
    }
    return std::nullopt;
  }
  void send(const cm::Message& m) {
    const auto b = cm::encode(m);
    ASSERT_EQ(RcPair::internal(p->b).control().send_mad(gid_a(), 1, ctl::ControlPlane::kGsiQkey, b),
              Status::kSuccess);
  }
  // A REQ as Linux rdma_cm sends it for `port`, with End-to-End Flow Control = `e2e`.
  cm::Req peer_req(uint32_t comm_id, uint32_t qpn, uint16_t port, bool e2e) const {
    cm::Req r;
    r.local_comm_id = comm_id;
    r.service_id = cm::service_id_for(port);
    r.local_ca_guid = 0x505400fffe990002;
    r.local_qpn = qpn;
    r.responder_resources = 1;
    r.initiator_depth = 1;
    r.remote_cm_response_timeout = 18;
    r.e2e_flow_control = e2e;
    r.starting_psn = 0x00F00D;
    r.local_cm_response_timeout = 18;
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

  std::unique_ptr<RcPair> p;
  std::unique_ptr<ctl::CmAgent> ca;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<cm::Message> got_;
};

// Passive side: the peer's REQ is taken whatever its End-to-End Flow Control bit says, and our
// REP answers with 0.
TEST_P(CmWire, PassiveSideAcceptsEitherBitAndRepliesWithoutCredits) {
  const bool peer_e2e = GetParam();
  std::unique_ptr<cmtest::CmConnector> conn;
  std::mutex conn_mu;
  std::condition_variable conn_cv;
  auto listener = cmtest::create_listener(*ca);
  ASSERT_EQ(listener->listen(18515,
                             [&](std::unique_ptr<cmtest::CmConnector> c) {
                               std::lock_guard lock(conn_mu);
                               conn = std::move(c);
                               conn_cv.notify_all();
                             }),
            Status::kSuccess);
  send(cm::Message{0x42, 0, peer_req(0xC0FFEE, 0x100, 18515, peer_e2e)});
  {
    std::unique_lock lock(conn_mu);
    ASSERT_TRUE(conn_cv.wait_for(lock, 5s, [&] { return conn != nullptr; }));
  }
  ASSERT_EQ(p->a.create_qp(nullptr, 16, 16, &p->a.qp), Status::kSuccess);
  ASSERT_EQ(conn->accept(&p->a.qp->internal(), {1, 1}, {}, {}, [](Status) {}), Status::kPending);
  uint64_t tid = 0;
  const auto rep = expect<cm::Rep>(&tid);
  ASSERT_TRUE(rep.has_value());
  EXPECT_EQ(tid, 0x42u);
  EXPECT_EQ(rep->remote_comm_id, 0xC0FFEEu);
  EXPECT_FALSE(rep->e2e_flow_control);
}

// Active side: our REQ says 0; the peer's REP completes the connection with either bit.
TEST_P(CmWire, ActiveSideRequestsWithoutCreditsAndAcceptsEitherBit) {
  const bool peer_e2e = GetParam();
  ASSERT_EQ(p->a.create_qp(nullptr, 16, 16, &p->a.qp), Status::kSuccess);
  auto conn = cmtest::create_connector(*ca);
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Status> connected;
  ASSERT_EQ(conn->connect(&p->a.qp->internal(), gid_b(), 7471, {1, 1}, {},
                          [&](Status s) {
                            std::lock_guard lock(mu);
                            connected = s;
                            cv.notify_all();
                          }),
            Status::kPending);
  uint64_t tid = 0;
  const auto req = expect<cm::Req>(&tid);
  ASSERT_TRUE(req.has_value());
  EXPECT_FALSE(req->e2e_flow_control);
  EXPECT_EQ(req->transport_service_type, 0);  // RC
  cm::Rep rep;
  rep.local_comm_id = 0x1234;
  rep.remote_comm_id = req->local_comm_id;
  rep.local_qpn = 0x200;
  rep.starting_psn = 0xABCDEF;
  rep.responder_resources = 1;
  rep.initiator_depth = 1;
  rep.e2e_flow_control = peer_e2e;
  rep.rnr_retry_count = 7;
  rep.local_ca_guid = 0x505400fffe990003;
  send(cm::Message{tid, 0, rep});
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return connected.has_value(); }));
  EXPECT_EQ(*connected, Status::kSuccess);
}

INSTANTIATE_TEST_SUITE_P(PeerE2eFlowControl, CmWire, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Peer1" : "Peer0"; });

}  // namespace
}  // namespace urnic::test
