// Attached clients for the daemon tests (tests/daemon/): one client's objects on urnicd through
// the client stage (control/attach.h), the exchange of what its peer needs, and forked children.
#pragma once

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "../twoproc/proc.h"
#include "control/attach.h"
#include "urnic/daemon.h"

namespace urnic::test {

using namespace std::chrono_literals;

inline constexpr uint32_t kIpA = 0xC0000201, kIpB = 0xC0000202;  // urnicd's in-memory pair
inline constexpr size_t kBuf = 1 << 20;

// What one side tells the other (over a socketpair made before the fork).
struct PeerInfo {
  uint32_t qpn, rkey;
  uint64_t addr;
};

// One client's objects: shared memory with an MR over it, a PD, one CQ, one RC QP.
struct Side {
  remote::SharedMemory mem;
  uint32_t pd = 0, mr = 0, lkey = 0, rkey = 0;
  remote::RemoteCq cq;
  remote::RemoteQp qp;
  uint8_t* buf() const { return static_cast<uint8_t*>(mem.address); }

  // Returns "" or what failed.
  std::string open(uint32_t adapter, const std::string& socket, const char* name) {
    if (attach(socket, name) != Status::kSuccess) return std::string("attach: ") + last_error();
    if (remote::alloc_shared(kBuf, &mem) != Status::kSuccess) return "alloc_shared";
    if (remote::create_pd(adapter, &pd) != Status::kSuccess) return "create_pd";
    if (remote::register_mr(pd, mem.address, kBuf,
                            mr_flag::kAllowRemoteWrite | mr_flag::kAllowRemoteRead, &mr, &lkey,
                            &rkey) != Status::kSuccess)
      return std::string("register_mr: ") + last_error();
    if (cq.create(adapter, 512) != Status::kSuccess) return "create_cq";
    if (qp.create(pd, cq, cq, 256, 256, 2, 2, 64, this) != Status::kSuccess)
      return std::string("create_qp: ") + last_error();
    return "";
  }
  std::string connect(uint32_t peer_ip, const PeerInfo& peer, uint8_t timeout = 14,
                      uint8_t retry = 7) {
    QpAttributes a;
    a.state = QpState::kRtr;
    a.path_mtu = 1024;
    a.dest_qpn = peer.qpn;
    a.av.dst_ipv4 = peer_ip;
    const uint32_t rtr = qp_attr_mask::kState | qp_attr_mask::kPathMtu | qp_attr_mask::kDestQpn |
                         qp_attr_mask::kRqPsn | qp_attr_mask::kMaxDestRdAtomic |
                         qp_attr_mask::kMinRnrTimer | qp_attr_mask::kAv;
    if (qp.modify(a, rtr) != Status::kSuccess) return std::string("RTR: ") + last_error();
    a.state = QpState::kRts;
    a.timeout = timeout;
    a.retry_cnt = retry;
    const uint32_t rts = qp_attr_mask::kState | qp_attr_mask::kSqPsn | qp_attr_mask::kTimeout |
                         qp_attr_mask::kRetryCnt | qp_attr_mask::kRnrRetry |
                         qp_attr_mask::kMaxRdAtomic;
    if (qp.modify(a, rts) != Status::kSuccess) return std::string("RTS: ") + last_error();
    return "";
  }
  // Exchanges what each side needs with the peer over `sock` (*peer: the peer's), then
  // connects to it at `peer_ip`.
  std::string join(int sock, uint32_t peer_ip, PeerInfo* peer, uint8_t timeout = 14,
                   uint8_t retry = 7);
  // Polls until `n` completions came or `t` passed; every one into `out`.
  size_t wait(size_t n, std::vector<ResultEx>* out, std::chrono::milliseconds t = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + t;
    ResultEx r[32];
    for (uint32_t idle = 0; out->size() < n && std::chrono::steady_clock::now() < deadline;) {
      const size_t got = cq.poll(r);
      out->insert(out->end(), r, r + got);
      if (got != 0) {
        idle = 0;
        continue;
      }
      std::this_thread::yield();
      if (++idle % 1024 == 0 && !daemon_alive()) break;  // it died: no completion will come
    }
    return out->size();
  }
};

inline bool exchange(int sock, const Side& s, PeerInfo* peer) {
  const PeerInfo me{s.qp.qpn(), s.rkey, reinterpret_cast<uint64_t>(s.mem.address)};
  if (::write(sock, &me, sizeof me) != sizeof me) return false;
  timeval tv{20, 0};
  ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return ::read(sock, peer, sizeof *peer) == sizeof *peer;
}

inline std::string Side::join(int sock, uint32_t peer_ip, PeerInfo* peer, uint8_t timeout,
                              uint8_t retry) {
  if (!exchange(sock, *this, peer)) return "exchange";
  return connect(peer_ip, *peer, timeout, retry);
}

// Runs `body` in a child process; its exit code (0: passed), its failure on stderr.
template <class F>
pid_t child(F&& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    detach();
    const std::string err = body();
    if (!err.empty()) std::fprintf(stderr, "child %d: %s\n", ::getpid(), err.c_str());
    std::fflush(stderr);
    _exit(err.empty() ? 0 : 1);
  }
  return pid;
}
inline int reap(pid_t pid) {
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// The writer's side of the data test: on `adapter` of the daemon at `socket`, connected to the
// target at `peer_ip` (exchange over `sock`): 64 WRITEs of 4 KiB, a READ of them back, an inline
// SEND; every completion counted and in order, the bytes read back equal to those written.
inline std::string write_read_send(const std::string& socket, uint32_t adapter, uint32_t peer_ip,
                                   int sock) {
  constexpr uint32_t kWrites = 64, kLen = 4096;
  Side s;
  if (std::string e = s.open(adapter, socket, "writer"); !e.empty()) return e;
  PeerInfo peer{};
  if (std::string e = s.join(sock, peer_ip, &peer); !e.empty()) return e;
  for (uint32_t i = 0; i < kWrites; ++i) {
    uint8_t* src = s.buf() + i * kLen;
    for (uint32_t j = 0; j < kLen; ++j) src[j] = static_cast<uint8_t>(i * 7 + j);
    const Sge sge{reinterpret_cast<uint64_t>(src), kLen, s.lkey};
    const uint32_t flags = i + 1 < kWrites ? op_flag::kDefer : 0;
    if (s.qp.write(reinterpret_cast<void*>(uint64_t{i}), {&sge, 1}, peer.addr + i * kLen, peer.rkey,
                   flags) != Status::kSuccess)
      return "write " + std::to_string(i);
  }
  // Read the whole region back into the upper half of our memory.
  const Sge back{reinterpret_cast<uint64_t>(s.buf() + kBuf / 2), kWrites * kLen, s.lkey};
  if (s.qp.read(reinterpret_cast<void*>(uint64_t{1000}), {&back, 1}, peer.addr, peer.rkey, 0) !=
      Status::kSuccess)
    return "read";
  char msg[64];
  for (int j = 0; j < 64; ++j) msg[j] = static_cast<char>('A' + j % 26);
  const Sge inl{reinterpret_cast<uint64_t>(msg), sizeof msg, 0};
  if (s.qp.send(reinterpret_cast<void*>(uint64_t{2000}), {&inl, 1}, op_flag::kInline) !=
      Status::kSuccess)
    return "send";
  std::vector<ResultEx> done;
  if (s.wait(kWrites + 2, &done) != kWrites + 2)
    return "completions: " + std::to_string(done.size());
  for (size_t i = 0; i < done.size(); ++i) {
    if (done[i].status != Status::kSuccess) return "completion status " + std::to_string(i);
    if (done[i].qp_context != &s) return "qp_context";
    const auto ctx = reinterpret_cast<uint64_t>(done[i].request_context);
    const uint64_t want = i < kWrites ? i : i == kWrites ? 1000 : 2000;
    if (ctx != want) return "completion order/context " + std::to_string(i);
  }
  if (std::memcmp(s.buf(), s.buf() + kBuf / 2, kWrites * kLen) != 0) return "read-back bytes";
  return "";
}

// The target's side: checks every byte written and sent; returns once the writer hangs up.
inline std::string be_written(const std::string& socket, uint32_t adapter, uint32_t peer_ip,
                              int sock) {
  constexpr uint32_t kWrites = 64, kLen = 4096;
  Side s;
  if (std::string e = s.open(adapter, socket, "target"); !e.empty()) return e;
  const Sge r{reinterpret_cast<uint64_t>(s.buf() + kBuf - 4096), 4096, s.lkey};
  if (s.qp.receive(reinterpret_cast<void*>(uint64_t{77}), {&r, 1}) != Status::kSuccess)
    return "receive";
  PeerInfo peer{};
  if (std::string e = s.join(sock, peer_ip, &peer); !e.empty()) return e;
  std::vector<ResultEx> done;
  if (s.wait(1, &done) != 1) return "no receive completion";
  if (done[0].status != Status::kSuccess || done[0].bytes_transferred != 64 ||
      reinterpret_cast<uint64_t>(done[0].request_context) != 77)
    return "receive completion";
  for (uint32_t i = 0; i < kWrites; ++i)
    for (uint32_t j = 0; j < kLen; ++j)
      if (s.buf()[i * kLen + j] != static_cast<uint8_t>(i * 7 + j))
        return "written byte " + std::to_string(i * kLen + j);
  for (int j = 0; j < 64; ++j)
    if (s.buf()[kBuf - 4096 + j] != 'A' + j % 26) return "sent byte " + std::to_string(j);
  // The writer is done once it has our SEND's ACK; wait for it to hang up first.
  char c;
  (void)::read(sock, &c, 1);
  return "";
}

// A urnicd of its own per test (its socket, locks and runtime prefix under a fresh directory),
// on the in-memory pair urnic0 / urnic1; stopped with SIGTERM after the test, which must exit 0
// unless the test killed it (killed_). sp_: a socketpair for two clients' exchange.
class DaemonFixture : public ::testing::Test {
 protected:
  explicit DaemonFixture(std::string tag) : tag_(std::move(tag)) {}
  void SetUp() override {
    std::string tmpl = "/tmp/urnicd-" + tag_ + "-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    socket_ = dir_ + "/urnicd.sock";
    prefix_ = "urnicd-" + tag_ + std::to_string(::getpid());
    daemon_ = std::make_unique<test::Proc>(std::vector<std::string>{
        URNIC_DAEMON_BIN, "--foreground", "--socket", socket_, "--set",
        "daemon.lock_dir=" + dir_ + "/locks", "--set", "daemon.file_prefix=" + prefix_, "--set",
        "daemon.memory=nohuge", "--set", "daemon.memory_mb=512"});
    ASSERT_TRUE(daemon_->wait_for_line("urnicd: ready", 30s)) << daemon_->output();
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sp_), 0);
  }
  void TearDown() override {
    ::close(sp_[0]);
    ::close(sp_[1]);
    detach();
    daemon_->signal(SIGTERM);
    const int rc = daemon_->wait(30s);
    if (!killed_) {
      EXPECT_EQ(rc, 0) << daemon_->output();
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    std::filesystem::remove_all("/var/run/dpdk/" + prefix_, ec);
  }
  std::string tag_, dir_, socket_, prefix_;
  std::unique_ptr<test::Proc> daemon_;
  int sp_[2] = {-1, -1};
  bool killed_ = false;  // the test killed the daemon itself
};

// Whether `pred` holds within 10 s (what another thread does, e.g. the event thread's callbacks).
template <class P>
bool eventually(P pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// The objects this process holds on the daemon, by kind (daemon_clients: we run as root).
inline DaemonClient mine() {
  std::vector<DaemonClient> all;
  DaemonInfo me;
  if (daemon_clients(&all) != Status::kSuccess || daemon_info(&me) != Status::kSuccess) return {};
  for (const DaemonClient& c : all)
    if (c.id == me.client_id) return c;
  return {};
}

}  // namespace urnic::test
