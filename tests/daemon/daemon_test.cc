// urnicd as its clients and operators meet it (issue 38): a real daemon process on its in-memory
// adapter pair, with this test process and forked children as clients. Checks attach and the
// queries, the client table across exits and kill -9, hostile messages on a raw socket, the
// refusal of a second daemon, the socket's permissions, and what clients see when the daemon
// stops (SIGTERM) or dies (SIGKILL): a clear status, never a hang.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../twoproc/proc.h"
#include "control/attach.h"
#include "daemon/fdpass.h"
#include "daemon/protocol.h"
#include "urnic/daemon.h"

namespace urnic {
namespace {

using namespace std::chrono_literals;
using test::Proc;

// One daemon in a directory of its own (socket, locks; a DPDK prefix of its own), removed after.
class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/urnicd-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    socket_ = dir_ + "/urnicd.sock";
    prefix_ = "urnicd-test" + std::to_string(::getpid());
  }
  void TearDown() override {
    detach();
    if (daemon_) {
      daemon_->signal(SIGTERM);
      daemon_->wait(20s);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    std::filesystem::remove_all("/var/run/dpdk/" + prefix_, ec);
  }

  std::vector<std::string> daemon_argv(std::vector<std::string> extra = {}) const {
    std::vector<std::string> a = {URNIC_DAEMON_BIN, "--foreground",
                                  "--socket",       socket_,
                                  "--set",          "daemon.lock_dir=" + dir_ + "/locks",
                                  "--set",          "daemon.file_prefix=" + prefix_,
                                  "--set",          "daemon.memory=nohuge",
                                  "--set",          "daemon.memory_mb=256",
                                  "--set",          "daemon.log_level=*:info"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  // Starts the daemon and waits until it says it is ready.
  void start(std::vector<std::string> extra = {}) {
    daemon_ = std::make_unique<Proc>(daemon_argv(std::move(extra)));
    ASSERT_TRUE(daemon_->started());
    ASSERT_TRUE(daemon_->wait_for_line("urnicd: ready", 30s)) << daemon_->output();
  }
  // Waits until the daemon lists `n` clients (its table follows closes asynchronously).
  // Until the daemon lists `n` clients, none of them `gone` (a pid; 0: none). A listing is paged
  // (32 a reply): a client leaving between two pages shifts the second, so one listing may miss
  // another client while it still shows the one leaving; the next listing is whole again.
  bool wait_clients(size_t n, std::vector<DaemonClient>* out, uint32_t gone = 0) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (daemon_clients(out) == Status::kSuccess && out->size() == n &&
          std::none_of(out->begin(), out->end(),
                       [&](const DaemonClient& c) { return gone != 0 && c.pid == gone; }))
        return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }

  std::string dir_, socket_, prefix_;
  std::unique_ptr<Proc> daemon_;
};

// A raw connection to the daemon, for what the public API would never send.
// A connection to the daemon at `path` that does not speak through urnic's client (-1 if it cannot
// connect); a reply that never comes fails the test (10 s) instead of hanging it.
int seqpacket_to(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.data(), path.size());
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

class Raw {
 public:
  explicit Raw(const std::string& path) : fd_(seqpacket_to(path)), ok_(fd_ >= 0) {}
  ~Raw() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  // Sends `n` bytes and returns the status of the reply (its head), or nullopt when none came.
  std::optional<Status> ask(const void* p, size_t n, ipc::ReplyHead* head = nullptr) {
    if (::send(fd_, p, n, MSG_NOSIGNAL) != static_cast<ssize_t>(n)) return std::nullopt;
    alignas(8) uint8_t buf[ipc::kMaxMessage];
    const ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
    if (r < static_cast<ssize_t>(sizeof(ipc::ReplyHead))) return std::nullopt;
    ipc::ReplyHead h{};
    std::memcpy(&h, buf, sizeof h);
    if (head != nullptr) *head = h;
    return static_cast<Status>(h.status);
  }
  std::optional<Status> hello() {
    ipc::HelloReq h{};
    h.h = ipc::make_header(ipc::MsgType::kHello, sizeof h, 1);
    h.major = ipc::kVersionMajor;
    h.minor = ipc::kVersionMinor;
    ipc::set_name(h.name, "raw");
    return ask(&h, sizeof h);
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

TEST_F(DaemonTest, AClientAttachesAndSeesTheDaemonsAdapters) {
  start();
  // No daemon at a path: a clear status, not a hang.
  EXPECT_EQ(attach(dir_ + "/nothing.sock"), Status::kDeviceNotReady);
  EXPECT_NE(std::string(last_error()).find("no urnicd listening"), std::string::npos);
  ASSERT_EQ(attach(socket_, "daemon-test"), Status::kSuccess) << last_error();
  EXPECT_TRUE(attached());
  EXPECT_EQ(attach(socket_), Status::kInvalidDeviceState);  // once per process
  DaemonInfo info;
  ASSERT_EQ(daemon_info(&info), Status::kSuccess);
  EXPECT_EQ(info.pid, static_cast<uint32_t>(daemon_->pid()));
  EXPECT_EQ(info.version_major, ipc::kVersionMajor);
  std::vector<DaemonAdapter> as;
  ASSERT_EQ(daemon_adapters(&as), Status::kSuccess) << last_error();
  ASSERT_EQ(as.size(), 2u);
  EXPECT_EQ(as[0].name, "urnic0");
  EXPECT_EQ(as[0].ipv4, 0xC0000201u);
  EXPECT_EQ(as[1].name, "urnic1");
  EXPECT_EQ(as[1].ipv4, 0xC0000202u);
  EXPECT_EQ(as[0].mac[0], 0x02);  // locally administered, not net_ring's zeros
  AdapterInfo ai{};
  PortCounters pc{};
  ASSERT_EQ(daemon_query_adapter("urnic1", &ai, &pc), Status::kSuccess) << last_error();
  EXPECT_GE(ai.max_cq_depth, 1024u);
  EXPECT_GT(ai.max_transfer_length, 0u);
  EXPECT_EQ(daemon_query_adapter("urnic7", &ai, &pc), Status::kBadNetworkName);
  EXPECT_EQ(daemon_query_adapter("bad name", &ai, &pc), Status::kInvalidParameter);
  std::vector<DaemonClient> cs;
  ASSERT_EQ(daemon_clients(&cs), Status::kSuccess) << last_error();
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].pid, static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(cs[0].name, "daemon-test");
  EXPECT_EQ(cs[0].id, info.client_id);
  detach();
  EXPECT_FALSE(attached());
  EXPECT_EQ(daemon_adapters(&as), Status::kInvalidDeviceState);
}

// Client processes that exit, and one killed with SIGKILL mid-conversation: the daemon's table
// drops each, and it keeps serving the others.
TEST_F(DaemonTest, ClientsThatExitOrAreKilledAreForgotten) {
  start();
  ASSERT_EQ(attach(socket_, "watcher"), Status::kSuccess) << last_error();
  constexpr int kChildren = 32;
  std::vector<pid_t> kids;
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      detach();  // the parent's connection is not the child's
      std::vector<DaemonAdapter> as;
      const bool ok = attach(socket_, "kid" + std::to_string(i)) == Status::kSuccess &&
                      daemon_adapters(&as) == Status::kSuccess && as.size() == 2;
      char c;
      ::close(go[1]);
      (void)::read(go[0], &c, 1);  // held attached until the parent closes the pipe
      _exit(ok ? 0 : 1);
    }
    kids.push_back(pid);
  }
  ::close(go[0]);
  std::vector<DaemonClient> cs;
  ASSERT_TRUE(wait_clients(kChildren + 1, &cs)) << cs.size() << " clients";
  // One is killed while attached.
  ASSERT_EQ(::kill(kids[0], SIGKILL), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(kids[0], &st, 0), kids[0]);
  EXPECT_TRUE(WIFSIGNALED(st));
  ASSERT_TRUE(wait_clients(kChildren, &cs, static_cast<uint32_t>(kids[0])))
      << cs.size() << " clients";
  // The others exit normally, each having seen both adapters.
  ::close(go[1]);
  for (int i = 1; i < kChildren; ++i) {
    ASSERT_EQ(::waitpid(kids[i], &st, 0), kids[i]);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child " << i;
  }
  ASSERT_TRUE(wait_clients(1, &cs));
  EXPECT_EQ(cs[0].name, "watcher");
}

TEST_F(DaemonTest, HostileMessagesGetAnErrorAndTheDaemonServesOn) {
  start();
  Raw r(socket_);
  ASSERT_TRUE(r.ok());
  // Before hello, nothing else is served.
  ipc::ListAdaptersReq la{ipc::make_header(ipc::MsgType::kListAdapters, sizeof la, 5)};
  EXPECT_EQ(r.ask(&la, sizeof la), Status::kInvalidDeviceState);
  ASSERT_EQ(r.hello(), Status::kSuccess);
  EXPECT_EQ(r.hello(), Status::kInvalidDeviceState);  // twice
  // Random bytes, a truncated header, a lying length, another major version, an unknown type,
  // a message longer than any, one byte.
  std::mt19937 rng(38);
  std::vector<uint8_t> junk(200);
  for (auto& b : junk) b = static_cast<uint8_t>(rng());
  EXPECT_EQ(r.ask(junk.data(), junk.size()), Status::kInvalidParameter);
  EXPECT_EQ(r.ask(&la, 10), Status::kInvalidParameter);
  ipc::ListAdaptersReq lie = la;
  lie.h.length = 4096;
  EXPECT_EQ(r.ask(&lie, sizeof lie), Status::kInvalidParameter);
  ipc::ListAdaptersReq v2 = la;
  v2.h.version = (ipc::kVersionMajor + 1) << 8;
  EXPECT_EQ(r.ask(&v2, sizeof v2), Status::kNotSupported);
  ipc::ListAdaptersReq unknown = la;
  unknown.h.type = 77;
  ipc::ReplyHead head{};
  EXPECT_EQ(r.ask(&unknown, sizeof unknown, &head), Status::kInvalidDeviceRequest);
  EXPECT_EQ(head.h.seq, 5u);  // addressed to the request it refuses
  std::vector<uint8_t> huge(3 * ipc::kMaxMessage, 0x55);
  EXPECT_EQ(r.ask(huge.data(), huge.size()), Status::kInvalidParameter);
  const uint8_t one = 1;
  EXPECT_EQ(r.ask(&one, 1), Status::kInvalidParameter);
  // A query whose name has garbage after its NUL.
  ipc::QueryAdapterReq q{};
  q.h = ipc::make_header(ipc::MsgType::kQueryAdapter, sizeof q, 6);
  std::memcpy(q.name, "urnic0\0zz", 9);
  EXPECT_EQ(r.ask(&q, sizeof q), Status::kInvalidParameter);
  // The same connection still gets answers, and so does a new client; the refusals are counted
  // against the raw client alone.
  EXPECT_EQ(r.ask(&la, sizeof la), Status::kSuccess);
  ASSERT_EQ(attach(socket_, "after"), Status::kSuccess) << last_error();
  std::vector<DaemonClient> cs;
  ASSERT_EQ(daemon_clients(&cs), Status::kSuccess);
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(cs[0].name, "raw");
  EXPECT_EQ(cs[0].errors, 10u);
  EXPECT_EQ(cs[1].errors, 0u);
}

TEST_F(DaemonTest, ASecondDaemonOnTheSameSocketOrPortIsRefused) {
  start();
  Proc second(daemon_argv());
  ASSERT_EQ(second.wait(30s), 1) << second.output();
  EXPECT_TRUE(second.has("owned by another urnicd \\(pid " + std::to_string(daemon_->pid())))
      << second.output();
  // The first still serves.
  ASSERT_EQ(attach(socket_), Status::kSuccess) << last_error();
  // A port (here an interface in this network namespace) whose lock another process holds:
  // refused before DPDK touches the port, naming the holder.
  struct stat st {};
  ASSERT_EQ(::stat("/proc/self/ns/net", &st), 0);
  const std::string lock = dir_ + "/locks/net" + std::to_string(st.st_ino) + "-iface-urn0.lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  ASSERT_EQ(::pwrite(fd, "pid 4242, socket elsewhere\n", 27, 0), 27);
  Proc third({URNIC_DAEMON_BIN, "--foreground", "--socket", dir_ + "/other.sock", "--set",
              "daemon.lock_dir=" + dir_ + "/locks", "--set",
              "port.p0.devargs=net_af_packet0,iface=urn0", "--set", "port.p0.ipv4=10.0.0.1"});
  ASSERT_EQ(third.wait(30s), 1) << third.output();
  EXPECT_TRUE(third.has("port p0 .* is owned by another urnicd \\(pid 4242")) << third.output();
  ::close(fd);
}

TEST_F(DaemonTest, SigtermClosesEveryClientWhoseNextCallSaysTheDeviceIsGone) {
  start();
  ASSERT_EQ(attach(socket_), Status::kSuccess) << last_error();
  daemon_->signal(SIGTERM);
  EXPECT_EQ(daemon_->wait(30s), 0) << daemon_->output();
  EXPECT_TRUE(daemon_->has("Terminated, shutting down")) << daemon_->output();
  EXPECT_FALSE(std::filesystem::exists(socket_));  // removed on the way out
  std::vector<DaemonAdapter> as;
  EXPECT_EQ(daemon_adapters(&as), Status::kDeviceRemoved);
  EXPECT_NE(std::string(last_error()).find("closed the connection"), std::string::npos);
  EXPECT_EQ(daemon_adapters(&as), Status::kDeviceRemoved);  // and stays so
  EXPECT_TRUE(attached());
  detach();
  EXPECT_EQ(attach(socket_), Status::kDeviceNotReady);
}

TEST_F(DaemonTest, ADaemonKilledMidSessionGivesAClearErrorNotAHang) {
  start();
  ASSERT_EQ(attach(socket_), Status::kSuccess) << last_error();
  daemon_->signal(SIGKILL);
  EXPECT_EQ(daemon_->wait(10s), 128 + SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<DaemonAdapter> as;
  EXPECT_EQ(daemon_adapters(&as), Status::kDeviceRemoved);
  EXPECT_LT(std::chrono::steady_clock::now() - t0,
            std::chrono::milliseconds(kDaemonReplyTimeoutMs));
  // The next daemon on the same socket starts: the dead one's locks died with it.
  detach();
  start();
  ASSERT_EQ(attach(socket_), Status::kSuccess) << last_error();
}

// Who may attach is the socket's owner, group and mode; who may list other clients is an
// operator (uid 0 or the daemon's). Needs root (to be someone else).
TEST_F(DaemonTest, TheSocketModeAndTheOperatorRuleAreEnforced) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a client as another user";
  start({"--set", "daemon.socket_mode=0660"});
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);  // mkdtemp's 0700 would refuse anyone anyway
  auto as_nobody = [&](auto&& body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      detach();
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(3);
      _exit(body());
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  EXPECT_EQ(as_nobody([&] { return attach(socket_) == Status::kAccessDenied ? 0 : 1; }), 0);
  ASSERT_EQ(::chmod(socket_.c_str(), 0666), 0);
  EXPECT_EQ(as_nobody([&] {
              std::vector<DaemonClient> cs;
              std::vector<DaemonAdapter> as;
              if (attach(socket_) != Status::kSuccess) return 1;
              if (daemon_adapters(&as) != Status::kSuccess) return 2;
              return daemon_clients(&cs) == Status::kAccessDenied ? 0 : 4;
            }),
            0);
}

}  // namespace
}  // namespace urnic

namespace urnic {
namespace {

size_t open_fds(pid_t pid) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
    ++n;
  return n;
}

// Descriptors a client passes: ShareMemory takes only a memfd sealed against shrinking (else
// the engine could fault on memory the client shrank under it), CreateCq only an eventfd; a
// descriptor sent with any other message is closed at once, so that no client can fill the
// daemon's descriptor table.
TEST_F(DaemonTest, PassedDescriptorsAreCheckedOrClosed) {
  start();
  const int sock = seqpacket_to(socket_);
  ASSERT_GE(sock, 0);
  auto ask = [&](const void* msg, size_t n, int fd) -> Status {
    if (ipc::send_with_fd(sock, msg, n, fd, 0) != static_cast<ssize_t>(n))
      return Status::kUnsuccessful;
    ipc::ReplyHead h{};
    int got = -1;
    if (ipc::recv_with_fd(sock, &h, sizeof h, &got, 0) < static_cast<ssize_t>(sizeof h))
      return Status::kUnsuccessful;
    if (got >= 0) ::close(got);
    return static_cast<Status>(h.status);
  };
  ipc::HelloReq hello{};
  hello.h = ipc::make_header(ipc::MsgType::kHello, sizeof hello, 1);
  hello.major = ipc::kVersionMajor;
  // A client older than kMinClientMinor lays out its send slots otherwise: refused.
  hello.minor = ipc::kMinClientMinor - 1;
  ipc::set_name(hello.name, "fds");
  ASSERT_EQ(ask(&hello, sizeof hello, -1), Status::kNotSupported);
  hello.minor = ipc::kVersionMinor;
  ASSERT_EQ(ask(&hello, sizeof hello, -1), Status::kSuccess);
  const size_t before = open_fds(daemon_->pid());
  // Descriptors riding on messages that take none: all closed by the daemon.
  ipc::ListAdaptersReq la{ipc::make_header(ipc::MsgType::kListAdapters, sizeof la, 2)};
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(ask(&la, sizeof la, devnull), Status::kSuccess);
  EXPECT_EQ(open_fds(daemon_->pid()), before);
  // ShareMemory with no descriptor, a file, an unsealed memfd, one shorter than the range.
  ipc::ShareMemoryReq sm{};
  sm.h = ipc::make_header(ipc::MsgType::kShareMemory, sizeof sm, 3);
  sm.address = 0x7e0000000000;
  sm.length = 8192;
  EXPECT_EQ(ask(&sm, sizeof sm, -1), Status::kInvalidParameter);
  EXPECT_EQ(ask(&sm, sizeof sm, devnull), Status::kInvalidParameter);
  const int plain = ::memfd_create("plain", MFD_CLOEXEC);
  ASSERT_EQ(::ftruncate(plain, 8192), 0);
  EXPECT_EQ(ask(&sm, sizeof sm, plain), Status::kInvalidParameter);
  const int sealed = ::memfd_create("short", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(::ftruncate(sealed, 4096), 0);
  ASSERT_EQ(::fcntl(sealed, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  EXPECT_EQ(ask(&sm, sizeof sm, sealed), Status::kInvalidParameter);
  // A proper one is mapped (the daemon's address space is free there), and freed with the
  // connection.
  ASSERT_EQ(::ftruncate(plain, 0), 0);
  const int good = ::memfd_create("good", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(::ftruncate(good, 8192), 0);
  ASSERT_EQ(::fcntl(good, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  EXPECT_EQ(ask(&sm, sizeof sm, good), Status::kSuccess);
  // CreateCq takes an eventfd (its bridge writes it from the engine's lcore): anything else, a
  // pipe that could fill up and block the lcore or a file, is refused; an eventfd is kept (made
  // non-blocking) until the CQ goes.
  ipc::CreateCqReq cc{};
  cc.h = ipc::make_header(ipc::MsgType::kCreateCq, sizeof cc, 4);
  cc.depth = 16;
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  EXPECT_EQ(ask(&cc, sizeof cc, pipe_fds[1]), Status::kInvalidParameter);
  EXPECT_EQ(ask(&cc, sizeof cc, devnull), Status::kInvalidParameter);
  const int ev = ::eventfd(0, EFD_CLOEXEC);  // blocking here: the daemon makes it non-blocking
  ASSERT_EQ(ipc::send_with_fd(sock, &cc, sizeof cc, ev, 0), static_cast<ssize_t>(sizeof cc));
  ipc::CreateCqRep cq{};
  int ring = -1;
  ASSERT_EQ(ipc::recv_with_fd(sock, &cq, sizeof cq, &ring, 0), static_cast<ssize_t>(sizeof cq));
  EXPECT_EQ(static_cast<Status>(cq.r.status), Status::kSuccess);
  if (ring >= 0) ::close(ring);
  EXPECT_NE(::fcntl(ev, F_GETFL) & O_NONBLOCK, 0);  // one open file: the daemon's flag is ours
  // The daemon closes the ring's memfd after its reply: once the next request is answered.
  ASSERT_EQ(ask(&la, sizeof la, -1), Status::kSuccess);
  EXPECT_EQ(open_fds(daemon_->pid()), before + 1);  // the eventfd, held by the CQ
  ipc::DestroyReq d{};
  d.h = ipc::make_header(ipc::MsgType::kDestroy, sizeof d, 5);
  d.handle = cq.handle;
  EXPECT_EQ(ask(&d, sizeof d, -1), Status::kSuccess);
  for (int fd : {devnull, plain, sealed, good, pipe_fds[0], pipe_fds[1], ev}) ::close(fd);
  EXPECT_EQ(open_fds(daemon_->pid()), before);  // mapped, not held open; the eventfd closed
  ::close(sock);
}

}  // namespace
}  // namespace urnic

namespace urnic {
namespace {

// Per-client quotas from the configuration: the create beyond one is refused with
// STATUS_INSUFFICIENT_RESOURCES, for that client only; what it destroys it may create again.
TEST_F(DaemonTest, QuotasRefuseTheObjectBeyondThemPerClient) {
  start({"--set", "daemon.quota_pds=2", "--set", "daemon.quota_shared_mb=1"});
  const pid_t other = ::fork();
  if (other == 0) {  // another client's quota is its own: two PDs of its own too
    detach();
    uint32_t a = 0, b = 0;
    const bool ok = attach(socket_, "other") == Status::kSuccess &&
                    remote::create_pd(0, &a) == Status::kSuccess &&
                    remote::create_pd(1, &b) == Status::kSuccess;
    _exit(ok ? 0 : 1);
  }
  ASSERT_EQ(attach(socket_, "quota"), Status::kSuccess);
  uint32_t pd[3] = {};
  ASSERT_EQ(remote::create_pd(0, &pd[0]), Status::kSuccess);
  ASSERT_EQ(remote::create_pd(1, &pd[1]), Status::kSuccess);
  EXPECT_EQ(remote::create_pd(0, &pd[2]), Status::kInsufficientResources);
  ASSERT_EQ(remote::destroy(pd[0]), Status::kSuccess);
  EXPECT_EQ(remote::destroy(pd[0]), Status::kInvalidHandle);  // a stale handle names nothing
  EXPECT_EQ(remote::create_pd(0, &pd[2]), Status::kSuccess);
  remote::SharedMemory m;
  EXPECT_EQ(remote::alloc_shared(2 << 20, &m), Status::kInsufficientResources);
  ASSERT_EQ(remote::alloc_shared(1 << 20, &m), Status::kSuccess);
  EXPECT_EQ(remote::alloc_shared(4096, &m), Status::kInsufficientResources);
  int st = 0;
  ASSERT_EQ(::waitpid(other, &st, 0), other);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

}  // namespace
}  // namespace urnic

namespace urnic {
namespace {

// Connectors and listeners (protocol 1.6) as a hostile client sends them: a channel needs an
// eventfd; handles of the wrong kind, a listener's call on a connector, a QP that is a PD, events
// of something that is not a channel: each refused with its status, the daemon serving on; a
// channel in use cannot be destroyed before its connectors.
TEST_F(DaemonTest, HostileCmMessagesAreRefusedByKindAndState) {
  start();
  const int sock = seqpacket_to(socket_);
  ASSERT_GE(sock, 0);
  uint32_t seq = 0;
  // Sends `msg` (its header made here) with `fd`; the reply's status, and its handle if any.
  auto ask = [&](ipc::MsgType type, auto msg, int fd = -1, uint32_t* handle = nullptr) {
    msg.h = ipc::make_header(type, sizeof msg, ++seq);
    if (ipc::send_with_fd(sock, &msg, sizeof msg, fd, 0) != static_cast<ssize_t>(sizeof msg))
      return Status::kUnsuccessful;
    alignas(8) uint8_t buf[ipc::kMaxMessage] = {};
    int got = -1;
    if (ipc::recv_with_fd(sock, buf, sizeof buf, &got, 0) <
        static_cast<ssize_t>(sizeof(ipc::ReplyHead)))
      return Status::kUnsuccessful;
    if (got >= 0) ::close(got);
    if (handle != nullptr) *handle = reinterpret_cast<ipc::HandleRep*>(buf)->handle;
    return static_cast<Status>(reinterpret_cast<ipc::ReplyHead*>(buf)->status);
  };
  ipc::HelloReq hello{};
  hello.major = ipc::kVersionMajor;
  hello.minor = ipc::kVersionMinor;
  ipc::set_name(hello.name, "cm-hostile");
  ASSERT_EQ(ask(ipc::MsgType::kHello, hello), Status::kSuccess);
  // A channel: no descriptor, a pipe, an adapter that is not there; then a proper one.
  ipc::CmChannelReq ch{};
  EXPECT_EQ(ask(ipc::MsgType::kCmChannel, ch), Status::kInvalidParameter);
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  EXPECT_EQ(ask(ipc::MsgType::kCmChannel, ch, pipe_fds[1]), Status::kInvalidParameter);
  const int ev = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ch.adapter = 9;
  EXPECT_EQ(ask(ipc::MsgType::kCmChannel, ch, ev), Status::kInvalidParameter);
  ch.adapter = 0;
  uint32_t channel = 0, pd = 0, conn = 0, lis = 0;
  ASSERT_EQ(ask(ipc::MsgType::kCmChannel, ch, ev, &channel), Status::kSuccess);
  ipc::CreatePdReq cp{};
  ASSERT_EQ(ask(ipc::MsgType::kCreatePd, cp, -1, &pd), Status::kSuccess);
  // Creates on something that is not a channel (a PD), then a connector and a listener.
  ipc::CmCreateReq cr{};
  cr.channel = pd;
  EXPECT_EQ(ask(ipc::MsgType::kCmCreate, cr), Status::kInvalidHandle);
  cr.channel = channel;
  ASSERT_EQ(ask(ipc::MsgType::kCmCreate, cr, -1, &conn), Status::kSuccess);
  cr.kind = static_cast<uint32_t>(ipc::CmKind::kListener);
  ASSERT_EQ(ask(ipc::MsgType::kCmCreate, cr, -1, &lis), Status::kSuccess);
  // Calls on the wrong object: a channel, a PD, a stale handle; a listener's call on a connector
  // and a connector's on a listener; a connect whose QP is a PD.
  ipc::CmCallReq call{};
  call.op = static_cast<uint32_t>(ipc::CmOp::kInfo);
  for (uint32_t h : {channel, pd, conn + (1u << 16), 0u}) {
    call.object = h;
    EXPECT_EQ(ask(ipc::MsgType::kCmCall, call), Status::kInvalidHandle) << h;
  }
  call.object = conn;
  call.op = static_cast<uint32_t>(ipc::CmOp::kListen);
  EXPECT_EQ(ask(ipc::MsgType::kCmCall, call), Status::kInvalidDeviceRequest);
  call.object = lis;
  call.op = static_cast<uint32_t>(ipc::CmOp::kAccept);
  EXPECT_EQ(ask(ipc::MsgType::kCmCall, call), Status::kInvalidDeviceRequest);
  call.object = conn;
  call.op = static_cast<uint32_t>(ipc::CmOp::kConnect);
  call.qp = pd;
  call.dst.family = AF_INET;
  call.dst.port = 1;
  EXPECT_EQ(ask(ipc::MsgType::kCmCall, call), Status::kInvalidHandle);
  // A connector with nothing to complete, reject or disconnect says so (the CM's own state).
  call = ipc::CmCallReq{};
  call.object = conn;
  for (auto op : {ipc::CmOp::kCompleteConnect, ipc::CmOp::kReject, ipc::CmOp::kDisconnect}) {
    call.op = static_cast<uint32_t>(op);
    EXPECT_EQ(ask(ipc::MsgType::kCmCall, call), Status::kConnectionInvalid)
        << static_cast<uint32_t>(op);
  }
  // Events of a connector (not a channel); of the channel: none waiting.
  ipc::CmEventsReq er{};
  er.channel = conn;
  EXPECT_EQ(ask(ipc::MsgType::kCmEvents, er), Status::kInvalidHandle);
  er.channel = channel;
  EXPECT_EQ(ask(ipc::MsgType::kCmEvents, er), Status::kSuccess);
  // The channel goes only after its connector and listener.
  ipc::DestroyReq d{};
  d.handle = channel;
  EXPECT_EQ(ask(ipc::MsgType::kDestroy, d), Status::kDeviceBusy);
  for (uint32_t h : {conn, lis, channel}) {
    d.handle = h;
    EXPECT_EQ(ask(ipc::MsgType::kDestroy, d), Status::kSuccess) << h;
  }
  EXPECT_EQ(ask(ipc::MsgType::kListAdapters, ipc::ListAdaptersReq{}), Status::kSuccess);
  for (int fd : {pipe_fds[0], pipe_fds[1], ev, sock}) ::close(fd);
}

}  // namespace
}  // namespace urnic
