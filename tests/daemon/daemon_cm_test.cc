// Connectors and listeners in attach mode (issue 38, docs/daemon.md "Connections"): the
// daemon's connection manager (IB CM on QP1) connects a client's QPs, driven through the
// unchanged public Connector / Listener. One process, two of the daemon's adapters (urnic0 and
// urnic1, wired back to back in memory): a listener on one, a connector on the other; every
// callback counted, every byte checked, private data both ways, refusals and rejects with their
// statuses, disconnects seen by the peer, and nothing left in the daemon afterwards.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "attach_side.h"
#include "urnic/daemon.h"
#include "urnic/datagram.h"
#include "urnic/urnic.h"

namespace urnic {
namespace {

using namespace std::chrono_literals;
using namespace test;

class DaemonCm : public DaemonFixture {
 protected:
  DaemonCm() : DaemonFixture("cm") {}
};

constexpr size_t kMem = 1 << 20;
constexpr uint16_t kPort = 7471;

sockaddr_in ipv4(uint32_t ip, uint16_t port) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_port = htons(port);
  s.sin_addr.s_addr = htonl(ip);
  return s;
}

// One side: adapter, PD, CQ, MR over alloc_memory's memory, an RC QP.
struct CmSide {
  std::unique_ptr<Adapter> adapter;
  Handle<Pd> pd;
  Handle<Cq> cq;
  Handle<Mr> mr;
  Handle<Qp> qp;
  uint8_t* mem = nullptr;
  std::string open(const char* name) {
    void* m = nullptr;
    if (alloc_memory(kMem, &m) != Status::kSuccess) return std::string("alloc: ") + last_error();
    mem = static_cast<uint8_t*>(m);
    if (Adapter::open(name, &adapter) != Status::kSuccess) return last_error();
    if (adapter->create_pd(nullptr, nullptr, &pd) != Status::kSuccess ||
        adapter->create_cq(64, nullptr, nullptr, nullptr, nullptr, &cq) != Status::kSuccess ||
        pd->create_mr(false, nullptr, nullptr, &mr) != Status::kSuccess ||
        mr->register_mr(mem, kMem, mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteWrite, nullptr,
                        nullptr) != Status::kSuccess)
      return std::string("objects: ") + last_error();
    return new_qp();
  }
  std::string new_qp() {
    qp.reset();
    return pd->create_qp(*cq, *cq, this, 16, 16, 1, 1, 0, nullptr, nullptr, &qp) == Status::kSuccess
               ? ""
               : std::string("create_qp: ") + last_error();
  }
  size_t wait(size_t n, std::vector<Result>* out) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    Result r[8];
    while (out->size() < n && std::chrono::steady_clock::now() < deadline) {
      const size_t got = cq->get_results(r);
      out->insert(out->end(), r, r + got);
      if (got == 0) std::this_thread::yield();
    }
    return out->size();
  }
};

// What the callbacks saw.
struct Seen {
  std::atomic<int> requests{0}, disconnects{0}, completions{0};
  std::atomic<Status> last{Status::kPending};
  std::atomic<Connector*> incoming{nullptr};
};
void on_request(void* ctx, Connector* c) {
  auto* s = static_cast<Seen*>(ctx);
  s->incoming.store(c);
  s->requests.fetch_add(1);
}
void on_done(void* ctx, Status st) {
  auto* s = static_cast<Seen*>(ctx);
  s->last.store(st);
  s->completions.fetch_add(1);
}
void on_disconnect(void* ctx) { static_cast<Seen*>(ctx)->disconnects.fetch_add(1); }

TEST_F(DaemonCm, ConnectAcceptWriteAndDisconnectThroughTheDaemonsCm) {
  ASSERT_EQ(attach(socket_, "cm-both"), Status::kSuccess) << last_error();
  CmSide srv, cli;
  ASSERT_EQ(srv.open("urnic0"), "");
  ASSERT_EQ(cli.open("urnic1"), "");

  Seen ls, cs, as;
  Handle<Listener> l;
  ASSERT_EQ(create_listener(*srv.adapter, on_request, &ls, nullptr, nullptr, &l), Status::kSuccess)
      << last_error();
  const sockaddr_in any = ipv4(0, kPort);
  ASSERT_EQ(l->listen(reinterpret_cast<const sockaddr*>(&any), sizeof any, nullptr, nullptr),
            Status::kSuccess)
      << last_error();
  // Listening on the wildcard reports the adapter's own address and the port.
  sockaddr_in got{};
  uint32_t len = sizeof got;
  ASSERT_EQ(l->get_local_address(reinterpret_cast<sockaddr*>(&got), &len), Status::kSuccess);
  EXPECT_EQ(ntohl(got.sin_addr.s_addr), kIpA);
  EXPECT_EQ(ntohs(got.sin_port), kPort);
  // A second listener on the port is refused by the daemon's CM.
  Handle<Listener> l2;
  ASSERT_EQ(create_listener(*srv.adapter, on_request, &ls, nullptr, nullptr, &l2),
            Status::kSuccess);
  EXPECT_EQ(l2->listen(reinterpret_cast<const sockaddr*>(&any), sizeof any, nullptr, nullptr),
            Status::kAddressAlreadyAssociated);
  l2.reset();

  Handle<Connector> c;
  ASSERT_EQ(create_connector(*cli.adapter, nullptr, nullptr, &c), Status::kSuccess) << last_error();
  const sockaddr_in dst = ipv4(kIpA, kPort);
  const char hello[] = "from the active side";
  ASSERT_EQ(c->connect(*cli.qp, nullptr, 0, reinterpret_cast<const sockaddr*>(&dst), sizeof dst, 4,
                       2, hello, sizeof hello, on_done, &cs),
            Status::kPending)
      << last_error();
  // A second request while one is outstanding.
  EXPECT_EQ(c->connect(*cli.qp, nullptr, 0, reinterpret_cast<const sockaddr*>(&dst), sizeof dst, 1,
                       1, nullptr, 0, on_done, &cs),
            Status::kConnectionActive);
  ASSERT_TRUE(eventually([&] { return ls.requests.load() == 1; })) << daemon_->output();
  Handle<Connector> in(ls.incoming.load());
  EXPECT_FALSE(in->is_datagram());
  // The request's private data (56 bytes, rdma_cm's share of the REQ, ours at its start) and
  // limits; the addresses of both ends.
  uint8_t data[256] = {};
  uint32_t n = sizeof data, ird = 0, ord = 0;
  ASSERT_EQ(in->get_connection_data(&ird, &ord, data, &n), Status::kSuccess) << last_error();
  EXPECT_EQ(n, 56u);
  EXPECT_EQ(std::memcmp(data, hello, sizeof hello), 0);
  EXPECT_EQ(ird, 2u);  // the passive side's view: what the active side may read from it
  EXPECT_EQ(ord, 4u);
  uint32_t small = 8;
  EXPECT_EQ(in->get_connection_data(nullptr, nullptr, data, &small), Status::kBufferTooSmall);
  EXPECT_EQ(small, 56u);
  sockaddr_in peer{};
  len = sizeof peer;
  ASSERT_EQ(in->get_peer_address(reinterpret_cast<sockaddr*>(&peer), &len), Status::kSuccess);
  EXPECT_EQ(ntohl(peer.sin_addr.s_addr), kIpB);
  len = 4;
  EXPECT_EQ(in->get_local_address(reinterpret_cast<sockaddr*>(&peer), &len),
            Status::kBufferTooSmall);
  EXPECT_EQ(len, sizeof(sockaddr_in));

  const char answer[] = "from the passive side";
  ASSERT_EQ(in->accept(*srv.qp, 2, 4, answer, sizeof answer, on_disconnect, &as, on_done, &as),
            Status::kPending)
      << last_error();
  ASSERT_TRUE(eventually([&] { return cs.completions.load() == 1; }));
  ASSERT_EQ(cs.last.load(), Status::kSuccess);
  n = sizeof data;
  ASSERT_EQ(c->get_connection_data(&ird, &ord, data, &n), Status::kSuccess);
  EXPECT_EQ(std::memcmp(data, answer, sizeof answer), 0);
  ASSERT_EQ(c->complete_connect(on_disconnect, &cs, nullptr, nullptr), Status::kSuccess)
      << last_error();
  EXPECT_EQ(cli.qp->query_extension<QpConnectExtension>()->state(), QpState::kRts);
  ASSERT_TRUE(eventually([&] { return as.completions.load() == 1; }));
  EXPECT_EQ(as.last.load(), Status::kSuccess);
  EXPECT_EQ(srv.qp->query_extension<QpConnectExtension>()->state(), QpState::kRts);

  // Data over the connection the CM made: WRITEs both ways, every byte checked.
  for (size_t i = 0; i < 4096; ++i) {
    cli.mem[i] = static_cast<uint8_t>(i * 7 + 1);
    srv.mem[i] = static_cast<uint8_t>(i * 13 + 5);
  }
  const Sge sc{reinterpret_cast<uint64_t>(cli.mem), 4096, cli.mr->get_local_token()};
  const Sge ss{reinterpret_cast<uint64_t>(srv.mem), 4096, srv.mr->get_local_token()};
  ASSERT_EQ(cli.qp->write(nullptr, {&sc, 1}, reinterpret_cast<uint64_t>(srv.mem) + 8192,
                          srv.mr->get_remote_token(), 0),
            Status::kSuccess);
  ASSERT_EQ(srv.qp->write(nullptr, {&ss, 1}, reinterpret_cast<uint64_t>(cli.mem) + 8192,
                          cli.mr->get_remote_token(), 0),
            Status::kSuccess);
  std::vector<Result> rc, rs;
  ASSERT_EQ(cli.wait(1, &rc), 1u);
  ASSERT_EQ(srv.wait(1, &rs), 1u);
  EXPECT_EQ(rc[0].status, Status::kSuccess);
  EXPECT_EQ(rs[0].status, Status::kSuccess);
  EXPECT_EQ(std::memcmp(srv.mem + 8192, cli.mem, 4096), 0);
  EXPECT_EQ(std::memcmp(cli.mem + 8192, srv.mem, 4096), 0);
  // The daemon's counts of this process's QP (a 4 KiB WRITE: at least 4 packets at the CM's
  // path MTU of 1024), the adapter's sum over this process's QPs, and its port's.
  const QpCounters qc = cli.qp->query_extension<QpExtension>()->counters();
  EXPECT_GE(qc.tx_packets, 4u);
  EXPECT_GE(qc.acks_received, 1u);
  AdapterCounters ac;
  ASSERT_EQ(cli.adapter->query_counters(&ac), Status::kSuccess) << last_error();
  EXPECT_EQ(ac.qps.tx_packets, qc.tx_packets);
  EXPECT_GE(ac.port.tx_packets, qc.tx_packets);

  // The active side disconnects: its completion, the passive side's disconnect event.
  ASSERT_EQ(c->disconnect(on_done, &cs), Status::kPending) << last_error();
  ASSERT_TRUE(eventually([&] { return cs.completions.load() == 2; }));
  EXPECT_EQ(cs.last.load(), Status::kSuccess);
  ASSERT_TRUE(eventually([&] { return as.disconnects.load() == 1; }));
  EXPECT_EQ(cs.disconnects.load(), 0);  // not after its own disconnect
  EXPECT_EQ(srv.qp->query_extension<QpConnectExtension>()->state(), QpState::kErr);

  // The QPs cannot go before their connectors (antecedents): their closes pend.
  std::atomic<int> closed{0};
  EXPECT_EQ(cli.qp.close([](void* x) { static_cast<std::atomic<int>*>(x)->fetch_add(1); }, &closed),
            Status::kPending);
  c.reset();
  EXPECT_TRUE(eventually([&] { return closed.load() == 1; }));
  in.reset();
  l.reset();
  const DaemonClient d = mine();
  EXPECT_EQ(d.qps, 1u);  // srv.qp only
}

TEST_F(DaemonCm, RefusalsRejectsAndClosesComeBackWithTheirStatuses) {
  ASSERT_EQ(attach(socket_, "cm-refusals"), Status::kSuccess) << last_error();
  CmSide srv, cli;
  ASSERT_EQ(srv.open("urnic0"), "");
  ASSERT_EQ(cli.open("urnic1"), "");
  Seen cs;
  const sockaddr_in dst = ipv4(kIpA, kPort);
  const auto* dsa = reinterpret_cast<const sockaddr*>(&dst);

  // Nobody listens on the port (the peer adapter's CM runs: a listener elsewhere): REJ,
  // kConnectionRefused.
  Seen ls;
  Handle<Listener> l;
  ASSERT_EQ(create_listener(*srv.adapter, on_request, &ls, nullptr, nullptr, &l), Status::kSuccess);
  const sockaddr_in other = ipv4(kIpA, kPort + 1);
  ASSERT_EQ(l->listen(reinterpret_cast<const sockaddr*>(&other), sizeof other, nullptr, nullptr),
            Status::kSuccess);
  Handle<Connector> c;
  ASSERT_EQ(create_connector(*cli.adapter, nullptr, nullptr, &c), Status::kSuccess);
  ASSERT_EQ(c->connect(*cli.qp, nullptr, 0, dsa, sizeof dst, 1, 1, nullptr, 0, on_done, &cs),
            Status::kPending);
  ASSERT_TRUE(eventually([&] { return cs.completions.load() == 1; }));
  EXPECT_EQ(cs.last.load(), Status::kConnectionRefused);
  uint16_t reason = 0;
  EXPECT_EQ(c->get_reject_reason(&reason), Status::kSuccess);
  EXPECT_EQ(reason, 8u);  // IBTA table 195: invalid service ID
  c.reset();

  // Bad arguments are refused inline, before or by the daemon.
  ASSERT_EQ(create_connector(*cli.adapter, nullptr, nullptr, &c), Status::kSuccess);
  uint8_t big[200] = {};
  EXPECT_EQ(c->connect(*cli.qp, nullptr, 0, dsa, sizeof dst, 1, 1, big, 57, on_done, &cs),
            Status::kInvalidBufferSize);
  const sockaddr_in port0 = ipv4(kIpA, 0);
  EXPECT_EQ(c->connect(*cli.qp, nullptr, 0, reinterpret_cast<const sockaddr*>(&port0), sizeof port0,
                       1, 1, nullptr, 0, on_done, &cs),
            Status::kInvalidParameter);
  EXPECT_EQ(c->connect(*srv.qp, nullptr, 0, dsa, sizeof dst, 1, 1, nullptr, 0, on_done, &cs),
            Status::kInvalidParameter);  // another adapter's QP
  const sockaddr_in not_ours = ipv4(0x0a000001, 0);
  EXPECT_EQ(c->connect(*cli.qp, reinterpret_cast<const sockaddr*>(&not_ours), sizeof not_ours, dsa,
                       sizeof dst, 1, 1, nullptr, 0, on_done, &cs),
            Status::kInvalidAddress);
  EXPECT_EQ(c->complete_connect(nullptr, nullptr, nullptr, nullptr), Status::kConnectionInvalid);
  uint32_t n = 0;
  EXPECT_EQ(c->get_connection_data(nullptr, nullptr, nullptr, &n), Status::kConnectionInvalid);

  // Rejected with private data: kConnectionRefused and the REJ's data on the active side.
  l.reset();
  ASSERT_EQ(create_listener(*srv.adapter, on_request, &ls, nullptr, nullptr, &l), Status::kSuccess);
  const sockaddr_in at = ipv4(kIpA, kPort);
  ASSERT_EQ(l->listen(reinterpret_cast<const sockaddr*>(&at), sizeof at, nullptr, nullptr),
            Status::kSuccess);
  ASSERT_EQ(c->connect(*cli.qp, nullptr, 0, dsa, sizeof dst, 1, 1, nullptr, 0, on_done, &cs),
            Status::kPending);
  ASSERT_TRUE(eventually([&] { return ls.requests.load() == 1; }));
  Handle<Connector> in(ls.incoming.load());
  const char no[] = "not today";
  ASSERT_EQ(in->reject(no, sizeof no), Status::kSuccess) << last_error();
  EXPECT_EQ(in->reject(no, sizeof no), Status::kConnectionInvalid);  // decided already
  ASSERT_TRUE(eventually([&] { return cs.completions.load() == 2; }));
  EXPECT_EQ(cs.last.load(), Status::kConnectionRefused);
  uint8_t data[200] = {};
  n = sizeof data;
  ASSERT_EQ(c->get_connection_data(nullptr, nullptr, data, &n), Status::kSuccess);
  EXPECT_EQ(std::memcmp(data, no, sizeof no), 0);
  EXPECT_EQ(c->get_reject_reason(&reason), Status::kSuccess);
  EXPECT_EQ(reason, 28u);  // consumer defined
  EXPECT_EQ(in->get_reject_reason(&reason), Status::kConnectionInvalid);
  in.reset();
  c.reset();

  // A connector closed with its request outstanding completes it with kCancelled, before its
  // close; the listener's pending request is refused when the listener closes.
  ASSERT_EQ(create_connector(*cli.adapter, nullptr, nullptr, &c), Status::kSuccess);
  ASSERT_EQ(cli.new_qp(), "");
  ASSERT_EQ(c->connect(*cli.qp, nullptr, 0, dsa, sizeof dst, 1, 1, nullptr, 0, on_done, &cs),
            Status::kPending);
  ASSERT_TRUE(eventually([&] { return ls.requests.load() == 2; }));
  c.reset();
  EXPECT_TRUE(eventually([&] { return cs.completions.load() == 3; }));
  EXPECT_EQ(cs.last.load(), Status::kCancelled);
  Handle<Connector> late(ls.incoming.load());
  late.reset();
  l.reset();
  const DaemonClient d = mine();
  EXPECT_EQ(d.qps, 2u);
}

// A client killed (-9) while connected: the daemon closes its connector with the rest of its
// objects, which sends a DREQ, as the kernel's rdma_cm does for a process that exits with
// connected ids: the peer's disconnect event comes, its QP is flushed.
TEST_F(DaemonCm, AClientKilledWhileConnectedDisconnectsItsPeer) {
  const pid_t kid = child([&] {
    if (attach(socket_, "cm-victim") != Status::kSuccess) return std::string(last_error());
    CmSide cli;
    if (std::string e = cli.open("urnic1"); !e.empty()) return e;
    Handle<Connector> c;
    if (create_connector(*cli.adapter, nullptr, nullptr, &c) != Status::kSuccess)
      return std::string("create_connector: ") + last_error();
    // Told when the listener listens.
    char go = 0;
    if (::read(sp_[1], &go, 1) != 1) return std::string("no go");
    Seen cs;
    const sockaddr_in dst = ipv4(kIpA, kPort);
    if (c->connect(*cli.qp, nullptr, 0, reinterpret_cast<const sockaddr*>(&dst), sizeof dst, 1, 1,
                   nullptr, 0, on_done, &cs) != Status::kPending)
      return std::string("connect: ") + last_error();
    if (!eventually([&] { return cs.completions.load() == 1; }) ||
        cs.last.load() != Status::kSuccess)
      return std::string("not accepted");
    if (c->complete_connect(nullptr, nullptr, nullptr, nullptr) != Status::kSuccess)
      return std::string("complete_connect: ") + last_error();
    if (::write(sp_[1], "c", 1) != 1) return std::string("signal");
    (void)::read(sp_[1], &go, 1);  // killed while waiting here
    return std::string("not killed");
  });
  ASSERT_EQ(attach(socket_, "cm-survivor"), Status::kSuccess) << last_error();
  CmSide srv;
  ASSERT_EQ(srv.open("urnic0"), "");
  Seen ls, as;
  Handle<Listener> l;
  ASSERT_EQ(create_listener(*srv.adapter, on_request, &ls, nullptr, nullptr, &l), Status::kSuccess);
  const sockaddr_in at = ipv4(kIpA, kPort);
  ASSERT_EQ(l->listen(reinterpret_cast<const sockaddr*>(&at), sizeof at, nullptr, nullptr),
            Status::kSuccess);
  ASSERT_EQ(::write(sp_[0], "g", 1), 1);
  ASSERT_TRUE(eventually([&] { return ls.requests.load() == 1; })) << daemon_->output();
  Handle<Connector> in(ls.incoming.load());
  ASSERT_EQ(in->accept(*srv.qp, 1, 1, nullptr, 0, on_disconnect, &as, on_done, &as),
            Status::kPending);
  char got = 0;
  ASSERT_EQ(::read(sp_[0], &got, 1), 1);  // the child connected
  ASSERT_TRUE(eventually([&] { return as.completions.load() == 1; }));
  EXPECT_EQ(as.last.load(), Status::kSuccess);
  ::kill(kid, SIGKILL);
  EXPECT_EQ(reap(kid), 128 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return as.disconnects.load() == 1; })) << daemon_->output();
  EXPECT_TRUE(eventually(
      [&] { return srv.qp->query_extension<QpConnectExtension>()->state() == QpState::kErr; }));
  // The survivor's connection is still its own to close.
  EXPECT_EQ(in->disconnect(nullptr, nullptr), Status::kSuccess);
}

// Datagram (UD) QPs and address handles in attach mode: the daemon resolves the handle and keeps
// it, a send slot names it; receives carry the GRH, the sender's QPN and the immediate, every
// payload byte checked; a datagram over the path MTU and a send on an RC QP are refused inline;
// a wrong Q_Key is dropped by the receiver (the datagram never completes there).
TEST_F(DaemonCm, DatagramsAndAddressHandlesThroughTheDaemon) {
  ASSERT_EQ(attach(socket_, "cm-ud"), Status::kSuccess) << last_error();
  CmSide a, b;
  ASSERT_EQ(a.open("urnic0"), "");
  ASSERT_EQ(b.open("urnic1"), "");
  constexpr uint32_t kQkey = 0x11223344;
  Handle<Qp> qa, qb;
  ASSERT_EQ(create_datagram_qp(*a.pd, *a.cq, *a.cq, nullptr, nullptr, 16, 16, 1, 1, 64, kQkey, &qa),
            Status::kSuccess)
      << last_error();
  ASSERT_EQ(create_datagram_qp(*b.pd, *b.cq, *b.cq, nullptr, nullptr, 16, 16, 1, 1, 64, kQkey, &qb),
            Status::kSuccess);
  // INIT -> RTR -> RTS; its Q_Key as created.
  auto ready = [&](Qp* q) {
    auto* c = q->query_extension<QpConnectExtension>();
    QpAttributes at;
    at.state = QpState::kRtr;
    ASSERT_EQ(c->modify(at, qp_attr_mask::kState, nullptr, nullptr), Status::kSuccess)
        << last_error();
    at.state = QpState::kRts;
    at.sq_psn = 0x42;
    ASSERT_EQ(c->modify(at, qp_attr_mask::kState | qp_attr_mask::kSqPsn, nullptr, nullptr),
              Status::kSuccess);
    QpAttributes got;
    ASSERT_EQ(c->query(&got), Status::kSuccess);
    EXPECT_EQ(got.qkey, kQkey);
  };
  ready(qa.get());
  ready(qb.get());
  auto* xa = qa->query_extension<QpExtension>();
  const uint32_t mtu = xa->max_datagram_size();
  EXPECT_GE(mtu, 1024u);
  AddressVector av;
  av.dst_ipv4 = kIpB;
  AddressHandle to_b;
  ASSERT_EQ(create_address_handle(*a.adapter, av, &to_b), Status::kSuccess) << last_error();
  EXPECT_TRUE(to_b.valid());
  const uint32_t qpn_a = qa->query_extension<QpConnectExtension>()->qpn();
  const uint32_t qpn_b = qb->query_extension<QpConnectExtension>()->qpn();
  for (uint32_t i = 0; i < 3; ++i) {
    const Sge r{reinterpret_cast<uint64_t>(b.mem + i * 4096), 4096, b.mr->get_local_token()};
    ASSERT_EQ(qb->receive(reinterpret_cast<void*>(uintptr_t{i + 1}), {&r, 1}), Status::kSuccess);
  }
  for (size_t i = 0; i < 4096; ++i) a.mem[i] = static_cast<uint8_t>(i * 11 + 3);
  const uint32_t lens[] = {1, 300, mtu};
  for (uint32_t i = 0; i < 3; ++i) {
    const Sge s{reinterpret_cast<uint64_t>(a.mem + i), lens[i], a.mr->get_local_token()};
    const uint32_t imm = 0xC0DE0000 + i;
    ASSERT_EQ(xa->send_datagram(nullptr, {&s, 1}, 0, to_b, qpn_b, kQkey, i == 1 ? &imm : nullptr),
              Status::kSuccess)
        << i;
  }
  // Over the path MTU; on an RC QP; another adapter's handle.
  const Sge big{reinterpret_cast<uint64_t>(a.mem), mtu + 1, a.mr->get_local_token()};
  EXPECT_EQ(xa->send_datagram(nullptr, {&big, 1}, 0, to_b, qpn_b, kQkey), Status::kBufferOverflow);
  const Sge one{reinterpret_cast<uint64_t>(a.mem), 1, a.mr->get_local_token()};
  EXPECT_EQ(a.qp->query_extension<QpExtension>()->send_datagram(nullptr, {&one, 1}, 0, to_b, qpn_b,
                                                                kQkey),
            Status::kInvalidDeviceRequest);
  EXPECT_EQ(
      qb->query_extension<QpExtension>()->send_datagram(nullptr, {&one, 1}, 0, to_b, qpn_a, kQkey),
      Status::kInvalidParameter);
  std::vector<Result> ra, rb;
  ASSERT_EQ(a.wait(3, &ra), 3u);
  ASSERT_EQ(b.wait(3, &rb), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(ra[i].status, Status::kSuccess) << i;
  // The receives, with the extended results (sender, immediate): from the CQ as ResultEx.
  for (uint32_t i = 0; i < 3; ++i) {
    const Result& r = rb[i];
    ASSERT_EQ(r.status, Status::kSuccess) << i;
    EXPECT_EQ(r.bytes_transferred, kGrhLength + lens[i]) << i;
    const uint8_t* got = b.mem + i * 4096;
    EXPECT_EQ(got[20] >> 4, 4);  // the IPv4 header in the GRH's place
    EXPECT_EQ(std::memcmp(got + kGrhLength, a.mem + i, lens[i]), 0) << i;
  }
  // A wrong Q_Key: dropped by the receiver; the next datagram with the right one completes.
  const Sge r{reinterpret_cast<uint64_t>(b.mem + 3 * 4096), 4096, b.mr->get_local_token()};
  ASSERT_EQ(qb->receive(reinterpret_cast<void*>(uintptr_t{9}), {&r, 1}), Status::kSuccess);
  ASSERT_EQ(xa->send_datagram(nullptr, {&one, 1}, 0, to_b, qpn_b, kQkey + 1), Status::kSuccess);
  const uint32_t imm = 0xFEED;
  const Sge two{reinterpret_cast<uint64_t>(a.mem + 7), 2, a.mr->get_local_token()};
  ASSERT_EQ(xa->send_datagram(nullptr, {&two, 1}, 0, to_b, qpn_b, kQkey, &imm), Status::kSuccess);
  ResultEx ex[4];
  size_t n = 0;
  ASSERT_TRUE(eventually([&] { return (n += b.cq->get_results_ex({ex + n, 4 - n})) >= 1; }));
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(ex[0].bytes_transferred, kGrhLength + 2);
  EXPECT_EQ(ex[0].src_qpn, qpn_a);
  EXPECT_NE(ex[0].flags & kResultDatagram, 0u);
  EXPECT_NE(ex[0].flags & kResultHasImmediate, 0u);
  EXPECT_EQ(ex[0].type_specific_completion_output, imm);
  EXPECT_EQ(std::memcmp(b.mem + 3 * 4096 + kGrhLength, a.mem + 7, 2), 0);
  std::vector<Result> more;
  EXPECT_EQ(a.wait(2, &more), 2u);  // both sends complete at the sender

  // A datagram QP on an SRQ (since protocol 1.7): its receives come from the SRQ only.
  Handle<Srq> srq;
  ASSERT_EQ(b.pd->create_srq(8, 1, 0, nullptr, nullptr, nullptr, nullptr, &srq), Status::kSuccess)
      << last_error();
  Handle<Qp> qs;
  ASSERT_EQ(
      create_datagram_qp(*b.pd, *b.cq, *b.cq, srq.get(), nullptr, 0, 16, 0, 1, 64, kQkey, &qs),
      Status::kSuccess)
      << last_error();
  ready(qs.get());
  const Sge sr{reinterpret_cast<uint64_t>(b.mem + 5 * 4096), 4096, b.mr->get_local_token()};
  EXPECT_EQ(qs->receive(nullptr, {&sr, 1}), Status::kInvalidDeviceRequest);
  ASSERT_EQ(srq->receive(reinterpret_cast<void*>(uintptr_t{21}), {&sr, 1}), Status::kSuccess);
  const Sge hundred{reinterpret_cast<uint64_t>(a.mem + 11), 100, a.mr->get_local_token()};
  ASSERT_EQ(xa->send_datagram(nullptr, {&hundred, 1}, 0, to_b,
                              qs->query_extension<QpConnectExtension>()->qpn(), kQkey),
            Status::kSuccess);
  std::vector<Result> via_srq;
  ASSERT_EQ(b.wait(1, &via_srq), 1u);
  EXPECT_EQ(via_srq[0].status, Status::kSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(via_srq[0].request_context), 21u);
  EXPECT_EQ(via_srq[0].bytes_transferred, kGrhLength + 100);
  EXPECT_EQ(std::memcmp(b.mem + 5 * 4096 + kGrhLength, a.mem + 11, 100), 0);
  EXPECT_EQ(a.wait(3, &more), 3u);
  qs.reset();
}

}  // namespace
}  // namespace urnic

namespace urnic {
namespace {

using namespace test;

int64_t now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// An address handle whose MAC nobody answers for (ARP gives up after about 2 s) is resolved off
// the daemon's thread: another client's request, made while the first waits, is answered before
// the first's. Both times come from one monotonic clock.
TEST_F(DaemonCm, AnUnansweredAddressHandleHoldsUpNoOtherClient) {
  int ready[2], go[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t slow = child([&]() -> std::string {
    // Only the ends it uses: if the test gives up early, `go` reads EOF and this child ends.
    ::close(ready[0]);
    ::close(go[1]);
    ::close(done[0]);
    if (attach(socket_, "cm-ah-slow") != Status::kSuccess) return "attach";
    std::unique_ptr<Adapter> ad;
    if (Adapter::open("urnic0", &ad) != Status::kSuccess) return last_error();
    char c = 'r';
    if (::write(ready[1], &c, 1) != 1 || ::read(go[0], &c, 1) != 1) return "go";
    AddressVector av;
    av.dst_ipv4 = 0xC0000263;  // 192.0.2.99: on urnic0's subnet, and nobody's
    AddressHandle h;
    const Status s = create_address_handle(*ad, av, &h);
    const int64_t t = now_ns();
    if (::write(done[1], &t, sizeof t) != sizeof t) return "done";
    return s != Status::kSuccess ? "" : "an address nobody answers for was resolved";
  });
  ::close(ready[1]);
  ::close(go[0]);
  ::close(done[1]);
  struct Reaper {  // the child killed and reaped however the test ends
    pid_t pid;
    ~Reaper() {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        (void)reap(pid);
      }
    }
  } reaper{slow};
  ASSERT_EQ(attach(socket_, "cm-ah-other"), Status::kSuccess) << last_error();
  auto requests_of_slow = [] {
    std::vector<DaemonClient> all;
    if (daemon_clients(&all) != Status::kSuccess) return uint64_t{0};
    for (const DaemonClient& c : all)
      if (c.name == "cm-ah-slow") return c.requests;
    return uint64_t{0};
  };
  // Its requests so far (it is set up and waits for `go`), then its CreateAh after them.
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  const uint64_t before = requests_of_slow();
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  // Its CreateAh has reached the daemon (and is resolving); ours is answered meanwhile.
  ASSERT_TRUE(eventually([&] { return requests_of_slow() > before; }));
  std::vector<DaemonAdapter> adapters;
  ASSERT_EQ(daemon_adapters(&adapters), Status::kSuccess);
  const int64_t answered = now_ns();
  int64_t slow_done = 0;
  ASSERT_EQ(::read(done[0], &slow_done, sizeof slow_done), ssize_t{sizeof slow_done});
  EXPECT_LT(answered, slow_done) << "the other client waited for the resolution";
  EXPECT_EQ(reap(slow), 0);
  reaper.pid = 0;
  for (int fd : {ready[0], go[1], done[0]}) ::close(fd);
}

}  // namespace
}  // namespace urnic
