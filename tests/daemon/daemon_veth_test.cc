// Two urnicd daemons on the two ends of a veth pair (net_af_packet), in a network namespace of
// this test's own, each with an attached client: the writer's WRITEs, READ and SEND go from one
// daemon's engine over the kernel's veth to the other's, every byte and completion checked
// (issue 38: "clients on two daemons ... over a veth pair"). Also: the two daemons own different
// interfaces of one namespace side by side, and a third daemon on an interface already owned is
// refused. Needs root (namespace, veth, raw sockets): skipped otherwise.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../common/shell.h"
#include "../twoproc/proc.h"
#include "attach_side.h"

namespace urnic::test {
namespace {

// Before any test: the namespace belongs to the thread, and the children inherit it.
class NetnsEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (::geteuid() != 0) {
      netns().why = "not root: needs a network namespace, veth and raw sockets";
    } else if (::unshare(CLONE_NEWNET) != 0) {
      netns().why = std::string("unshare(CLONE_NEWNET) failed: ") + std::strerror(errno);
    } else if (sh("command -v ip >/dev/null 2>&1 && ip link set lo up") != 0) {
      netns().why = "no ip tool (iproute2), or lo does not come up";
    } else {
      netns().ok = true;
    }
  }
};
[[maybe_unused]] ::testing::Environment* const g_env =
    ::testing::AddGlobalTestEnvironment(new NetnsEnvironment);

constexpr uint32_t kIp1 = 0x0A4D0001, kIp2 = 0x0A4D0002;  // 10.77.0.1, 10.77.0.2

class DaemonVeth : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!netns().ok) GTEST_SKIP() << netns().why;
    // Interface indexes apart in bit 15: DPDK's af_packet fanout group ids of two processes
    // started back to back then do not collide (tests/twoproc).
    if (sh("ip link add uva index 4101 type veth peer name uvb index 36869 2>/dev/null"
           " || ip link add uva type veth peer name uvb") != 0)
      GTEST_SKIP() << "cannot create a veth pair";
    ASSERT_EQ(sh("ip link set uva mtu 4200 up && ip link set uvb mtu 4200 up"), 0);
    char tmpl[] = "/tmp/urnicd-veth-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    a_ = start("a", "uva", "10.77.0.1");
    b_ = start("b", "uvb", "10.77.0.2");
    ASSERT_TRUE(a_->wait_for_line("urnicd: ready", 30s)) << a_->output();
    ASSERT_TRUE(b_->wait_for_line("urnicd: ready", 30s)) << b_->output();
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sp_), 0);
  }
  void TearDown() override {
    if (!netns().ok) return;
    ::close(sp_[0]);
    ::close(sp_[1]);
    for (Proc* d : {a_.get(), b_.get()}) {
      if (d == nullptr) continue;
      d->signal(SIGTERM);
      EXPECT_EQ(d->wait(30s), 0) << d->output();
    }
    (void)sh("ip link del uva 2>/dev/null");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    for (const char* n : {"a", "b"}) std::filesystem::remove_all(prefix(n), ec);
  }
  std::string socket(const char* name) const { return dir_ + "/" + name + ".sock"; }
  std::string prefix(const char* name) const {
    return "/var/run/dpdk/urnicd-veth" + std::to_string(::getpid()) + name;
  }
  std::unique_ptr<Proc> start(const char* name, const char* iface, const char* ip) {
    return std::make_unique<Proc>(std::vector<std::string>{
        URNIC_DAEMON_BIN, "--foreground", "--socket", socket(name), "--set",
        "daemon.lock_dir=" + dir_ + "/locks", "--set",
        "daemon.file_prefix=urnicd-veth" + std::to_string(::getpid()) + name, "--set",
        "daemon.memory=nohuge", "--set", "daemon.memory_mb=256", "--set",
        std::string("port.p0.devargs=net_af_packet0,iface=") + iface, "--set",
        std::string("port.p0.ipv4=") + ip});
  }
  std::string dir_;
  std::unique_ptr<Proc> a_, b_;
  int sp_[2] = {-1, -1};
};

TEST_F(DaemonVeth, ClientsOfTwoDaemonsWriteReadAndSendOverTheVeth) {
  const pid_t w = child([&] { return write_read_send(socket("a"), 0, kIp2, sp_[0]); });
  const pid_t t = child([&] { return be_written(socket("b"), 0, kIp1, sp_[1]); });
  EXPECT_EQ(reap(w), 0) << a_->output();
  ::shutdown(sp_[0], SHUT_RDWR);
  EXPECT_EQ(reap(t), 0) << b_->output();
  // A third daemon on an interface the first owns is refused before it touches it.
  Proc third({URNIC_DAEMON_BIN, "--foreground", "--socket", socket("c"), "--set",
              "daemon.lock_dir=" + dir_ + "/locks", "--set",
              "port.p0.devargs=net_af_packet0,iface=uva", "--set", "port.p0.ipv4=10.77.0.3"});
  EXPECT_EQ(third.wait(30s), 1) << third.output();
  EXPECT_TRUE(third.has("port p0 .*iface-uva.* is owned by another urnicd \\(pid " +
                        std::to_string(a_->pid())))
      << third.output();
}

}  // namespace
}  // namespace urnic::test
