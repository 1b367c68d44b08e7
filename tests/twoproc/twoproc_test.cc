// Two urnic processes on the two ends of a veth pair (net_af_packet), inside a network namespace
// this test creates for itself (ctest runs every TEST in its own process, so each case has its
// own namespace and nothing leaks into the host's):
//   - CM: urnic-cm-peer server and client connect through the connection manager (listen /
//     REQ / REP / RTU), move data (SEND and WRITE, each size checked byte for byte on both sides,
//     every completion counted) and disconnect (DREQ / DREP), at path MTU 1024 and 4096, with the
//     client or the server disconnecting;
//   - OOB: urnic-rc-pingpong against urnic-rc-pingpong over the ibv_rc_pingpong TCP exchange,
//     clean and with 2% of one side's frames dropped by its fault injector.
// Without root (a network namespace, veth, raw sockets) every case is skipped with the reason.
#include <gtest/gtest.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "proc.h"
#include "urnic/config.h"

namespace urnic::test {
namespace {

using namespace std::chrono_literals;

// Before any test: a network namespace belongs to a thread, and the children inherit it.
class NetnsEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (::geteuid() != 0) {
      netns().why = "not root: needs a network namespace, veth and raw sockets";
      return;
    }
    if (::unshare(CLONE_NEWNET) != 0) {
      netns().why = std::string("unshare(CLONE_NEWNET) failed: ") + std::strerror(errno);
      return;
    }
    if (sh("command -v ip >/dev/null 2>&1") != 0) {
      netns().why = "the ip tool (iproute2) is not installed";
      return;
    }
    (void)write_file("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
    if (sh("ip link set lo up") != 0) {
      netns().why = "cannot bring up lo in the new namespace";
      return;
    }
    netns().ok = true;
  }
};

[[maybe_unused]] ::testing::Environment* const g_env =
    ::testing::AddGlobalTestEnvironment(new NetnsEnvironment);

constexpr const char* kSizes = "1,64,1000,1024,1025,4096,5000,16384,65536";
constexpr size_t kRounds = 9;

class TwoProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!netns().ok) GTEST_SKIP() << netns().why;
    // DPDK 22.11's net_af_packet joins a PACKET_FANOUT group numbered (pid ^ ifindex) & 0xffff
    // per network namespace; two processes started back to back (pids n, n + 1) on a veth pair
    // with neighbouring ifindexes collide half of the time, and the second probe fails with
    // EINVAL. Interface indexes that differ in bit 15 only collide for pids that do too.
    if (const int rc =
            sh("ip link add tpa index 4100 type veth peer name tpb index 36868 2>/dev/null"
               " || ip link add tpa type veth peer name tpb");
        rc != 0)
      GTEST_SKIP() << "cannot create a veth pair (ip link add ... type veth: exit " << rc << ")";
    // MTU 4200 carries the largest RoCEv2 frame of a 4096-byte path MTU (4206 with Ethernet).
    ASSERT_EQ(sh("ip link set tpa mtu 4200 up && ip link set tpb mtu 4200 up"), 0);
  }
  // When the cases run in one process (not under ctest), each needs its own pair again.
  void TearDown() override {
    if (netns().ok) (void)sh("ip link del tpa 2>/dev/null");
  }

  static std::vector<std::string> nic(const char* iface, const char* ip) {
    return {std::string("--vdev=net_af_packet0,iface=") + iface, std::string("--ip=") + ip};
  }
  static std::vector<std::string> cat(std::vector<std::string> a,
                                      const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  // Both must exit 0 within `t`; on failure the outputs go into the test log.
  static void expect_both_ok(Proc& server, Proc& client, std::chrono::seconds t = 90s) {
    const int rc_c = client.wait(t);
    const int rc_s = server.wait(t);
    EXPECT_EQ(rc_c, 0) << client.command() << "\n" << client.output();
    EXPECT_EQ(rc_s, 0) << server.command() << "\n" << server.output();
    ::testing::Test::RecordProperty("server_seconds", std::to_string(server.seconds()));
    ::testing::Test::RecordProperty("client_seconds", std::to_string(client.seconds()));
  }

  static void check_cm_peer(const Proc& p, size_t rounds, bool disconnects_first) {
    std::smatch m;
    ASSERT_TRUE(p.has(R"(cm-peer: established .* MTU (\d+))")) << p.output();
    ASSERT_TRUE(p.has(
        R"(cm-peer: OK rounds=(\d+) sends=(\d+) recvs=(\d+) bytes_checked=(\d+) completions=(\d+) errors=0)",
        &m))
        << p.output();
    EXPECT_EQ(std::stoul(m[1]), rounds);
    EXPECT_EQ(std::stoul(m[2]), 2 * rounds);  // a WRITE and a SEND per round
    EXPECT_EQ(std::stoul(m[3]), rounds);
    EXPECT_EQ(std::stoul(m[5]), 3 * rounds);
    if (disconnects_first) {
      EXPECT_TRUE(p.has("cm-peer: disconnected \\(DREQ sent, DREP received\\)")) << p.output();
    } else {
      EXPECT_TRUE(p.has("cm-peer: disconnect event")) << p.output();
      EXPECT_TRUE(p.has("cm-peer: disconnected by the peer")) << p.output();
    }
  }

  // Both cm-peers exited 0 after kRounds rounds, the client disconnecting first or not, and
  // `mtu_side` printed the path MTU `mtu`.
  static void check_cm_run(Proc& server, Proc& client, bool client_disconnects,
                           const Proc& mtu_side, const char* mtu) {
    expect_both_ok(server, client);
    check_cm_peer(client, kRounds, client_disconnects);
    check_cm_peer(server, kRounds, !client_disconnects);
    std::smatch m;
    ASSERT_TRUE(mtu_side.has(R"(MTU (\d+))", &m));
    EXPECT_EQ(m[1], mtu);
  }
};

TEST_F(TwoProcess, CmConnectSendWriteDisconnectMtu1024) {
  Proc server(cat({URNIC_CM_PEER}, cat(nic("tpa", "10.0.0.1"), {"--listen", "--mtu=1024"})));
  Proc client(cat({URNIC_CM_PEER},
                  cat(nic("tpb", "10.0.0.2"),
                      {"--connect=10.0.0.1", std::string("--sizes=") + kSizes, "--mtu=1024"})));
  // The server learns the sizes from nobody: it uses the same default list.
  check_cm_run(server, client, true, client, "1024");
}

TEST_F(TwoProcess, CmServerDisconnectsMtu4096) {
  Proc server(
      cat({URNIC_CM_PEER}, cat(nic("tpa", "10.0.0.1"), {"--listen=7174", "--disconnect=server"})));
  Proc client(
      cat({URNIC_CM_PEER}, cat(nic("tpb", "10.0.0.2"),
                               {"--connect=10.0.0.1:7174", "--mtu=4096", "--disconnect=server"})));
  // The passive side takes the REQ's path MTU.
  check_cm_run(server, client, false, server, "4096");
}

// rc_pingpong's lines, and the clone's own "urnic:" completion line.
void check_pingpong(const Proc& p, uint32_t iters, uint32_t size) {
  std::smatch m;
  EXPECT_TRUE(p.has(
      R"(^  local address:  LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:10\.0\.0\.\d)"))
      << p.output();
  EXPECT_TRUE(p.has(
      R"(^  remote address: LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:10\.0\.0\.\d)"))
      << p.output();
  ASSERT_TRUE(p.has(R"(^(\d+) bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$)", &m)) << p.output();
  EXPECT_EQ(std::stoull(m[1]), 2ull * iters * size);
  ASSERT_TRUE(p.has(R"(^(\d+) iters in [0-9.]+ seconds = [0-9.]+ usec/iter$)", &m)) << p.output();
  EXPECT_EQ(std::stoul(m[1]), iters);
  ASSERT_TRUE(p.has(R"(^urnic: completions send=(\d+) recv=(\d+) bad=0$)", &m)) << p.output();
  EXPECT_EQ(std::stoul(m[1]), iters);
  EXPECT_EQ(std::stoul(m[2]), iters);
}

TEST_F(TwoProcess, RcPingpongCloneAgainstClone) {
  for (const auto& [size, mtu, iters] :
       {std::tuple{1u, 1024u, 200u}, std::tuple{4096u, 1024u, 200u},
        std::tuple{65536u, 4096u, 50u}}) {
    SCOPED_TRACE("size " + std::to_string(size) + " mtu " + std::to_string(mtu));
    const std::vector<std::string> args = {"-s", std::to_string(size),  "-m", std::to_string(mtu),
                                           "-n", std::to_string(iters), "-c", "-g",
                                           "1"};
    Proc server(cat({URNIC_RC_PINGPONG}, cat(nic("tpa", "10.0.0.1"), args)));
    Proc client(cat({URNIC_RC_PINGPONG}, cat(cat(nic("tpb", "10.0.0.2"), args), {"127.0.0.1"})));
    expect_both_ok(server, client);
    check_pingpong(server, iters, size);
    check_pingpong(client, iters, size);
  }
}

// 2% of the client's RoCEv2 frames (data and ACKs) are dropped: the client retransmits its lost
// data, the server answers duplicates and retransmits the data whose ACK was lost; every byte
// still arrives.
TEST_F(TwoProcess, RcPingpongCloneRecoversFromLoss) {
  if (!kTesting) GTEST_SKIP() << "fault injection needs a URNIC_TESTING build";
  const std::vector<std::string> args = {"-s", "8192", "-m", "1024", "-n", "200", "-c"};
  Proc server(cat({URNIC_RC_PINGPONG}, cat(nic("tpa", "10.0.0.1"), args)));
  Proc client(cat({URNIC_RC_PINGPONG},
                  cat(cat(nic("tpb", "10.0.0.2"), {"--tx-loss-ppm=20000", "--loss-seed=7"}),
                      cat(args, {"127.0.0.1"}))));
  expect_both_ok(server, client, 120s);
  check_pingpong(server, 200, 8192);
  check_pingpong(client, 200, 8192);
  std::smatch m;
  ASSERT_TRUE(client.has(R"(faults_dropped=(\d+))", &m));
  EXPECT_GT(std::stoul(m[1]), 0u);
  ASSERT_TRUE(client.has(R"(retransmits=(\d+))", &m));
  EXPECT_GT(std::stoul(m[1]), 0u) << "the client recovered its lost frames";
  ASSERT_TRUE(server.has(R"(duplicates=(\d+))", &m));
  const auto dup = std::stoul(m[1]);
  ASSERT_TRUE(server.has(R"(retransmits=(\d+))", &m));
  EXPECT_GT(dup + std::stoul(m[1]), 0u) << "the server saw the loss too";
}

}  // namespace
}  // namespace urnic::test
