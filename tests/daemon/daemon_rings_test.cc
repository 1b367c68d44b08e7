// Attach mode's data path (issue 38 stage 2, docs/daemon.md "Objects and shared rings"): client
// processes with PDs, CQs, RC QPs and MRs on one urnicd, their work requests and completions on
// shared rings, moved by the daemon's bridge on the engine's lcore. Drives the client stage
// (control/attach.h) directly: the public objects route to it in the next stage. Every byte is
// checked and every completion counted; a client killed mid-transfer is a dead host to its peer
// and leaves nothing behind in the daemon; what a hostile client writes into its own rings
// fails its own QP alone.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "../twoproc/proc.h"
#include "attach_side.h"
#include "control/attach.h"
#include "urnic/daemon.h"

namespace urnic {
namespace {

using namespace std::chrono_literals;
using test::Proc;

using namespace test;

class DaemonRings : public DaemonFixture {
 protected:
  DaemonRings() : DaemonFixture("rings") {}
};

// A writes 64 messages of 4 KiB into B's memory, reads them back, then SENDs B a 64-byte
// message with inline data; B checks every byte. Both count every completion.
TEST_F(DaemonRings, TwoClientsWriteReadAndSendThroughTheDaemonsEngine) {
  const pid_t a = child([&] { return write_read_send(socket_, 0, kIpB, sp_[0]); });
  const pid_t b = child([&] { return be_written(socket_, 1, kIpA, sp_[1]); });
  EXPECT_EQ(reap(a), 0) << daemon_->output();
  ::shutdown(sp_[0], SHUT_RDWR);
  EXPECT_EQ(reap(b), 0) << daemon_->output();
}

}  // namespace
}  // namespace urnic

namespace urnic {
namespace {

// dpdk-telemetry.py against the daemon: the reply to `cmd`.
std::string telemetry(const std::string& prefix, const std::string& cmd) {
  return test::dpdk_telemetry(prefix, cmd);
}
// How many QPs the daemon's adapter `name` has (its /urnic/qps list).
int adapter_qps(const std::string& prefix, const std::string& name) {
  std::smatch m;
  const std::string ads = telemetry(prefix, "/urnicd/adapters");
  if (!std::regex_search(ads, m, std::regex("\"" + name + "\": \\{\"telemetry_id\": ([0-9]+)")))
    return -1;
  const std::string qps = telemetry(prefix, "/urnic/qps," + m[1].str());
  if (!std::regex_search(qps, m, std::regex("\\[([^\\]]*)\\]"))) return -1;
  const std::string list = m[1].str();
  return list.empty() ? 0 : static_cast<int>(std::count(list.begin(), list.end(), ',') + 1);
}
uint64_t server_counter(const std::string& prefix, const std::string& key) {
  std::smatch m;
  const std::string s = telemetry(prefix, "/urnicd/server");
  return std::regex_search(s, m, std::regex("\"" + key + "\": ([0-9]+)")) ? std::stoull(m[1].str())
                                                                          : UINT64_MAX;
}

// A client killed (SIGKILL) while it writes: the daemon frees every object it had (its QP is
// gone from the adapter), the other clients go on, and its peer's next WRITE fails with the
// transport's retry exhaustion, as when a remote host dies.
TEST_F(DaemonRings, AClientKilledMidTransferIsADeadHostToItsPeer) {
  if (::access("/usr/bin/dpdk-telemetry.py", X_OK) != 0) GTEST_SKIP() << "no dpdk-telemetry.py";
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t victim = child([&]() -> std::string {
    Side s;
    if (std::string e = s.open(0, socket_, "victim"); !e.empty()) return e;
    PeerInfo peer{};
    if (std::string e = s.join(sp_[0], kIpB, &peer); !e.empty()) return e;
    if (::write(ready[1], "r", 1) != 1) return "ready";
    std::vector<ResultEx> done;
    for (uint64_t i = 0;; ++i) {  // writes until killed
      const Sge sge{reinterpret_cast<uint64_t>(s.buf()), 65536, s.lkey};
      if (s.qp.write(nullptr, {&sge, 1}, peer.addr, peer.rkey, 0) == Status::kNoMoreEntries)
        s.wait(done.size() + 1, &done, 1s);
    }
  });
  const pid_t survivor = child([&]() -> std::string {
    Side s;
    if (std::string e = s.open(1, socket_, "survivor"); !e.empty()) return e;
    PeerInfo peer{};
    // Retries: 4.096 us * 2^10 = 4 ms a timeout, 3 retries.
    if (std::string e = s.join(sp_[1], kIpA, &peer, 10, 3); !e.empty()) return e;
    char c;
    if (::read(go[0], &c, 1) != 1) return "go";
    const auto t0 = std::chrono::steady_clock::now();
    const Sge sge{reinterpret_cast<uint64_t>(s.buf()), 64, s.lkey};
    if (s.qp.write(nullptr, {&sge, 1}, peer.addr, peer.rkey, 0) != Status::kSuccess) return "write";
    std::vector<ResultEx> done;
    if (s.wait(1, &done, 20s) != 1) return "no completion for a write to a dead peer";
    if (done[0].status != Status::kIoTimeout)
      return std::string("status ") + std::string(to_string(done[0].status));
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - t0);
    std::fprintf(stderr, "survivor: the dead peer's failure after %lld ms\n",
                 static_cast<long long>(ms.count()));
    return "";
  });
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(attach(socket_, "watcher"), Status::kSuccess);
  std::vector<DaemonClient> cs;
  ASSERT_EQ(daemon_clients(&cs), Status::kSuccess);
  ASSERT_EQ(cs.size(), 3u);
  const auto v = std::find_if(cs.begin(), cs.end(), [](auto& x) { return x.name == "victim"; });
  ASSERT_NE(v, cs.end());
  EXPECT_EQ(v->qps, 1u);
  EXPECT_EQ(v->cqs, 1u);
  EXPECT_EQ(v->mrs, 1u);
  EXPECT_EQ(v->pds, 1u);
  EXPECT_EQ(v->shared, 1u);
  EXPECT_EQ(v->shared_bytes, kBuf);
  EXPECT_EQ(adapter_qps(prefix_, "urnic0"), 1);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  EXPECT_EQ(reap(victim), 128 + SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline &&
         (daemon_clients(&cs) != Status::kSuccess || cs.size() != 2))
    std::this_thread::yield();
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(adapter_qps(prefix_, "urnic0"), 0);  // the adapter's truth, not the daemon's table
  EXPECT_EQ(adapter_qps(prefix_, "urnic1"), 1);
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  const int rc = reap(survivor);
  EXPECT_EQ(rc, 0) << daemon_->output();
  if (rc != 0) {
    std::smatch m;
    const std::string ads = telemetry(prefix_, "/urnicd/adapters");
    std::fprintf(stderr, "%s\n", ads.c_str());
    std::fprintf(stderr, "%s\n", telemetry(prefix_, "/urnic/qps,2").c_str());
    std::fprintf(stderr, "%s\n", telemetry(prefix_, "/urnic/qps,1").c_str());
    for (int q = 2; q < 6; ++q) {
      std::fprintf(stderr, "%s\n", telemetry(prefix_, "/urnic/qp,2," + std::to_string(q)).c_str());
      std::fprintf(stderr, "%s\n", telemetry(prefix_, "/urnic/qp,1," + std::to_string(q)).c_str());
    }
  }
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
}

// What a hostile client can write into its own rings: a producer index more than a ring ahead,
// an unknown opcode, more SGEs than its QP has, a CQ consumer index past the producer, an SRQ
// producer index more than a ring ahead, memory operations naming a page it never shared or an
// object that is not an MR. Each fails that client's own QP, CQ or SRQ (counted), or that request
// alone; a pair of honest clients still works afterwards.
TEST_F(DaemonRings, GarbageInItsOwnRingsFailsOnlyTheClientsOwnQueues) {
  if (::access("/usr/bin/dpdk-telemetry.py", X_OK) != 0) GTEST_SKIP() << "no dpdk-telemetry.py";
  ASSERT_EQ(server_counter(prefix_, "ring_client_errors"), 0u);
  const pid_t hostile = child([&]() -> std::string {
    Side s;
    if (std::string e = s.open(0, socket_, "hostile"); !e.empty()) return e;
    remote::RemoteQp q2, q3;
    if (q2.create(s.pd, s.cq, s.cq, 16, 16, 1, 1, 0, nullptr) != Status::kSuccess) return "q2";
    if (q3.create(s.pd, s.cq, s.cq, 16, 16, 1, 1, 0, nullptr) != Status::kSuccess) return "q3";
    // 1: the send ring's producer index a ring and more ahead.
    const shm::RingView& r1 = s.qp.send_ring();
    r1.head->prod.store(r1.capacity + 5, std::memory_order_release);
    // 2: an unknown opcode.
    auto* w = reinterpret_cast<shm::SendSlot*>(q2.send_ring().slot(0));
    std::memset(static_cast<void*>(w), 0, q2.send_ring().stride);
    w->op = 99;
    q2.send_ring().head->prod.store(1, std::memory_order_release);
    // 3: more receive SGEs than the QP has.
    auto* rw = reinterpret_cast<shm::RecvSlot*>(q3.recv_ring().slot(0));
    std::memset(static_cast<void*>(rw), 0, q3.recv_ring().stride);
    rw->num_sge = 200;
    q3.recv_ring().head->prod.store(1, std::memory_order_release);
    // 4: a CQ whose consumer index runs ahead of what was produced.
    remote::RemoteCq cq2;
    if (cq2.create(0, 16) != Status::kSuccess) return "cq2";
    cq2.ring().head->cons.store(100, std::memory_order_release);
    // 5: an SRQ whose producer index runs a ring and more ahead (its QPs' receives stop).
    remote::RemoteSrq srq;
    if (srq.create(s.pd, 16, 1, 0) != Status::kSuccess) return "srq";
    srq.ring().head->prod.store(srq.ring().capacity + 1, std::memory_order_release);
    // 6: memory operations naming what is not the client's. A FastRegister of a page it never
    // shared, and a bind naming its PD as the MR, are refused alone (kInvalidParameter, as the
    // request's own status); an invalidate of a handle of nothing fails that QP.
    remote::RemoteQp q4;
    if (q4.create(s.pd, s.cq, s.cq, 16, 16, 1, 1, 0, nullptr) != Status::kSuccess) return "q4";
    uint32_t frmr = 0, token = 0;
    if (remote::init_frmr(s.pd, 4, true, &frmr, &token) != Status::kSuccess) return "init_frmr";
    static std::array<uint8_t, 8192> unshared;
    const uint64_t page = (reinterpret_cast<uint64_t>(unshared.data()) + 4095) & ~uint64_t{4095};
    using Sync = remote::RemoteQp::SyncRequest;
    constexpr uint32_t kWrite = op_flag::kAllowRemoteWrite;
    if (q4.post_sync(nullptr,
                     Sync{shm::SendOp::kFastRegister, kWrite, frmr, 0, 0, 4096, {&page, 1}},
                     &token) != Status::kInvalidParameter)
      return "a page never shared was mapped";
    if (q4.post_sync(nullptr, Sync{shm::SendOp::kBind, kWrite, s.pd, 0, page, 4096, {}}, &token) !=
        Status::kInvalidParameter)
      return "a PD was bound as an MR";
    if (q4.post(shm::SendOp::kInvalidate, nullptr, {}, 0, 0xdead0001, 0) != Status::kSuccess)
      return "invalidate";
    char c;
    (void)::read(sp_[0], &c, 1);  // stays until the test has counted
    return "";
  });
  // The bridge counts each as it finds it.
  auto errors = [&] { return server_counter(prefix_, "ring_client_errors"); };
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline && errors() < 6) std::this_thread::yield();
  EXPECT_EQ(errors(), 6u);
  ::shutdown(sp_[1], SHUT_RDWR);
  EXPECT_EQ(reap(hostile), 0);
}

}  // namespace
}  // namespace urnic

namespace urnic {
namespace {

using namespace test;

// Application memory (a large malloc'd buffer: private anonymous pages) registered in place:
// same address and contents after the move, then the peer READs what was there and WRITEs into
// it through the daemon's engine. A file-backed mapping is refused with its reason.
TEST_F(DaemonRings, ApplicationMemoryIsRegisteredInPlaceWithoutACopy) {
  constexpr size_t kLen = 256 * 1024, kHalf = kLen / 2;
  const pid_t target = child([&]() -> std::string {
    Side s;
    if (std::string e = s.open(1, socket_, "in-place"); !e.empty()) return e;
    auto* app = static_cast<uint8_t*>(std::aligned_alloc(4096, kLen));
    if (app == nullptr) return "aligned_alloc";
    for (size_t i = 0; i < kLen; ++i) app[i] = static_cast<uint8_t>(i * 13 + 5);
    remote::SharedMemory in_place;
    if (remote::share_in_place(app + 100, kLen - 200, &in_place) != Status::kSuccess)
      return std::string("share_in_place: ") + last_error();
    if (in_place.address != app || in_place.length != kLen) return "not the same pages";
    for (size_t i = 0; i < kLen; ++i)
      if (app[i] != static_cast<uint8_t>(i * 13 + 5)) return "contents changed by the move";
    uint32_t mr = 0, lkey = 0, rkey = 0;
    if (remote::register_mr(s.pd, app, kLen, mr_flag::kAllowRemoteWrite | mr_flag::kAllowRemoteRead,
                            &mr, &lkey, &rkey) != Status::kSuccess)
      return std::string("register_mr: ") + last_error();
    // A file's pages cannot move: refused, with the reason.
    FILE* f = std::tmpfile();
    if (f == nullptr || ::ftruncate(::fileno(f), 8192) != 0) return "tmpfile";
    void* file = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE, ::fileno(f), 0);
    remote::SharedMemory no;
    if (remote::share_in_place(file, 8192, &no) != Status::kNotSupported ||
        std::string(last_error()).find("private anonymous") == std::string::npos)
      return "a file-backed mapping was not refused";
    const Sge r{reinterpret_cast<uint64_t>(s.buf()), 64, s.lkey};
    if (s.qp.receive(nullptr, {&r, 1}) != Status::kSuccess) return "receive";
    const PeerInfo me{s.qp.qpn(), rkey, reinterpret_cast<uint64_t>(app)};
    PeerInfo peer{};
    if (::write(sp_[1], &me, sizeof me) != sizeof me ||
        ::read(sp_[1], &peer, sizeof peer) != sizeof peer)
      return "exchange";
    if (std::string e = s.connect(kIpA, peer); !e.empty()) return e;
    std::vector<ResultEx> done;
    if (s.wait(1, &done) != 1 || done[0].status != Status::kSuccess) return "the SEND";
    for (size_t i = 0; i < kHalf; ++i)
      if (app[i] != static_cast<uint8_t>(i * 13 + 5)) return "the READ half changed";
    for (size_t i = kHalf; i < kLen; ++i)
      if (app[i] != static_cast<uint8_t>(i * 3 + 1)) return "written byte " + std::to_string(i);
    return "";
  });
  const pid_t peer = child([&]() -> std::string {
    Side s;
    if (std::string e = s.open(0, socket_, "peer"); !e.empty()) return e;
    PeerInfo t{};
    if (std::string e = s.join(sp_[0], kIpB, &t); !e.empty()) return e;
    const Sge rd{reinterpret_cast<uint64_t>(s.buf()), kHalf, s.lkey};
    for (size_t i = 0; i < kHalf; ++i)
      s.buf()[kHalf + i] = static_cast<uint8_t>((kHalf + i) * 3 + 1);
    const Sge wr{reinterpret_cast<uint64_t>(s.buf() + kHalf), kHalf, s.lkey};
    const char msg[8] = "done";
    const Sge sd{reinterpret_cast<uint64_t>(msg), sizeof msg, 0};
    if (s.qp.read(nullptr, {&rd, 1}, t.addr, t.rkey, 0) != Status::kSuccess ||
        s.qp.write(nullptr, {&wr, 1}, t.addr + kHalf, t.rkey, 0) != Status::kSuccess ||
        s.qp.send(nullptr, {&sd, 1}, op_flag::kInline) != Status::kSuccess)
      return "post";
    std::vector<ResultEx> done;
    if (s.wait(3, &done) != 3) return "completions";
    for (const ResultEx& r : done)
      if (r.status != Status::kSuccess) return "a completion failed";
    for (size_t i = 0; i < kHalf; ++i)
      if (s.buf()[i] != static_cast<uint8_t>(i * 13 + 5)) return "read byte " + std::to_string(i);
    return "";
  });
  EXPECT_EQ(reap(peer), 0) << daemon_->output();
  EXPECT_EQ(reap(target), 0) << daemon_->output();
}

}  // namespace
}  // namespace urnic

namespace urnic {
namespace {

using namespace test;

// 32 client processes on one daemon at once, 16 writers on urnic0 and 16 targets on urnic1,
// each pair with its own QPs and traffic (WRITEs, a READ back, a SEND), every byte checked; then
// every one of them gone from the daemon's table.
TEST_F(DaemonRings, ThirtyTwoClientProcessesWithTrafficOnOneDaemon) {
  constexpr int kPairs = 16;
  std::vector<pid_t> kids;
  std::vector<int> socks;
  for (int i = 0; i < kPairs; ++i) {
    int sp[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    kids.push_back(child([&, sp] { return write_read_send(socket_, 0, kIpB, sp[0]); }));
    kids.push_back(child([&, sp] { return be_written(socket_, 1, kIpA, sp[1]); }));
    socks.push_back(sp[0]);
    socks.push_back(sp[1]);
  }
  // A writer is done when it has every completion; its target then waits for a hang-up, which
  // comes when every copy of the writer's end is closed: the writer's exit and ours.
  for (int i = 0; i < kPairs; ++i) {
    EXPECT_EQ(reap(kids[2 * i]), 0) << "writer " << i << "\n" << daemon_->output();
    ::shutdown(socks[2 * i], SHUT_RDWR);
  }
  for (int i = 0; i < kPairs; ++i)
    EXPECT_EQ(reap(kids[2 * i + 1]), 0) << "target " << i << "\n" << daemon_->output();
  for (int fd : socks) ::close(fd);
  ASSERT_EQ(attach(socket_, "counter"), Status::kSuccess);
  std::vector<DaemonClient> cs;
  ASSERT_EQ(daemon_clients(&cs), Status::kSuccess);
  EXPECT_EQ(cs.size(), 1u);
}

}  // namespace
}  // namespace urnic

namespace urnic {
namespace {

using namespace test;

// The daemon killed (SIGKILL) while a client writes and waits for its completions: the client's
// wait ends (daemon_alive() says it is gone) and every later call fails with
// STATUS_DEVICE_REMOVED; nothing hangs.
TEST_F(DaemonRings, ADaemonKilledMidTransferEndsTheClientsWaitWithAClearError) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t writer = child([&]() -> std::string {
    Side s;
    if (std::string e = s.open(0, socket_, "writer"); !e.empty()) return e;
    PeerInfo peer{};
    if (std::string e = s.join(sp_[0], kIpB, &peer); !e.empty()) return e;
    if (::write(ready[1], "r", 1) != 1) return "ready";
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    std::vector<ResultEx> done;
    while (std::chrono::steady_clock::now() < deadline) {
      const Sge sge{reinterpret_cast<uint64_t>(s.buf()), 4096, s.lkey};
      if (s.qp.write(nullptr, {&sge, 1}, peer.addr, peer.rkey, 0) == Status::kNoMoreEntries) {
        const size_t want = done.size() + 1;
        if (s.wait(want, &done, 10s) < want) break;  // no completion came: the daemon?
      }
    }
    if (daemon_alive()) return "the daemon is gone but daemon_alive() says otherwise";
    uint32_t pd = 0;
    if (remote::create_pd(0, &pd) != Status::kDeviceRemoved) return "a call after its death";
    return "";
  });
  const pid_t target = child([&]() -> std::string {
    Side s;
    if (std::string e = s.open(1, socket_, "target"); !e.empty()) return e;
    PeerInfo peer{};
    if (std::string e = s.join(sp_[1], kIpA, &peer); !e.empty()) return e;
    if (::write(ready[1], "r", 1) != 1) return "ready";
    char c;
    (void)::read(sp_[1], &c, 1);
    return "";
  });
  // Both connected (a connect the kill interrupts would fail for another reason), then the kill.
  char c[2];
  ASSERT_EQ(::read(ready[0], &c[0], 1), 1);
  ASSERT_EQ(::read(ready[0], &c[1], 1), 1);
  killed_ = true;
  daemon_->signal(SIGKILL);
  EXPECT_EQ(daemon_->wait(10s), 128 + SIGKILL);
  EXPECT_EQ(reap(writer), 0);
  ::shutdown(sp_[0], SHUT_RDWR);
  EXPECT_EQ(reap(target), 0);
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace
}  // namespace urnic

namespace urnic {
namespace {

using namespace test;

// An idle engine naps; a client's post while it naps rings the engine's doorbell (its eventfd,
// written only while the engine's sleeping flag is set) and the engine wakes for it at once
// rather than at the end of its nap. Each of 8 WRITEs is posted after the engine was seen napping
// again (telemetry `engine_sleeps`); every one completes, and doorbell wake-ups are counted.
TEST_F(DaemonRings, ASleepingEngineIsWokenByItsClientsDoorbell) {
  if (::access("/usr/bin/dpdk-telemetry.py", X_OK) != 0) GTEST_SKIP() << "no dpdk-telemetry.py";
  const uint64_t wakeups_before = server_counter(prefix_, "engine_doorbell_wakeups");
  int go[2], ack[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(ack), 0);
  const pid_t writer = child([&]() -> std::string {
    Side s;
    if (std::string e = s.open(0, socket_, "writer"); !e.empty()) return e;
    PeerInfo peer{};
    if (std::string e = s.join(sp_[0], kIpB, &peer); !e.empty()) return e;
    std::vector<ResultEx> done;
    for (char c; ::read(go[0], &c, 1) == 1 && c == 'w';) {
      const Sge sge{reinterpret_cast<uint64_t>(s.buf()), 64, s.lkey};
      if (s.qp.write(nullptr, {&sge, 1}, peer.addr, peer.rkey, 0) != Status::kSuccess)
        return "write";
      const size_t want = done.size() + 1;
      if (s.wait(want, &done, 10s) != want || done.back().status != Status::kSuccess)
        return "completion " + std::to_string(want);
      if (::write(ack[1], "a", 1) != 1) return "ack";
    }
    return "";
  });
  const pid_t target = child([&]() -> std::string {
    Side s;
    if (std::string e = s.open(1, socket_, "target"); !e.empty()) return e;
    PeerInfo peer{};
    if (std::string e = s.join(sp_[1], kIpA, &peer); !e.empty()) return e;
    char c;
    (void)::read(sp_[1], &c, 1);
    return "";
  });
  for (int i = 0; i < 8; ++i) {
    // The engine has napped since the last WRITE (it naps after 2 ms without work).
    const uint64_t sleeps = server_counter(prefix_, "engine_sleeps");
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (server_counter(prefix_, "engine_sleeps") == sleeps &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    ASSERT_EQ(::write(go[1], "w", 1), 1);
    char c;
    ASSERT_EQ(::read(ack[0], &c, 1), 1);
  }
  ASSERT_EQ(::write(go[1], "q", 1), 1);
  EXPECT_EQ(reap(writer), 0);
  ::shutdown(sp_[0], SHUT_RDWR);
  EXPECT_EQ(reap(target), 0);
  EXPECT_GE(server_counter(prefix_, "engine_doorbell_wakeups"), wakeups_before + 1);
  for (int fd : {go[0], go[1], ack[0], ack[1]}) ::close(fd);
}

}  // namespace
}  // namespace urnic
