// The public bring-up (include/urnic/runtime.h): every call before EAL is up, bad options and
// arguments (a status and a reason, never a crash), then a good bring-up, the lcores it
// reports, ring pairs, vdev and PCI ports. ctest runs each test in its own process, so the
// tests that need EAL down skip when an earlier test in the same process brought it up.
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "urnic/runtime.h"
#include "urnic/status.h"

namespace urnic {
inline void PrintTo(Status s, std::ostream* os) { *os << to_string(s); }
}  // namespace urnic

namespace urnic::test {
namespace {

std::string err() { return last_error(); }

RuntimeConfig good() {
  RuntimeConfig rc;
  rc.program = "api_runtime_test";
  rc.memory = RuntimeConfig::Memory::kNoHuge;
  rc.memory_mb = 256;
  rc.lcores = "0-1";
  return rc;
}

void up() { ASSERT_EQ(runtime_init(good()), Status::kSuccess) << err(); }

TEST(ApiRuntime, EverythingBeforeInitSaysSo) {
  if (runtime_running()) GTEST_SKIP() << "EAL already up in this process";
  uint16_t a = 0, b = 0;
  EXPECT_EQ(create_ring_port_pair("r", 1, &a, &b), Status::kInvalidDeviceState);
  EXPECT_NE(err().find("runtime_init"), std::string::npos) << err();
  EXPECT_EQ(open_vdev_port("net_null0", &a), Status::kInvalidDeviceState);
  EXPECT_EQ(open_pci_port("0000:03:00.0", &a), Status::kInvalidDeviceState);
  EXPECT_TRUE(worker_lcores().empty());
  EXPECT_EQ(main_lcore(), 0u);
}

TEST(ApiRuntime, BadOptionsThenAGoodBringUp) {
  if (runtime_running()) GTEST_SKIP() << "EAL already up in this process";
  RuntimeConfig rc = good();
  rc.memory_mb = 0;
  EXPECT_EQ(runtime_init(rc), Status::kInvalidParameter);
  EXPECT_NE(err().find("memory_mb"), std::string::npos) << err();
  rc = good();
  rc.memory = static_cast<RuntimeConfig::Memory>(7);
  EXPECT_EQ(runtime_init(rc), Status::kInvalidParameter);
  rc = good();
  for (const char* level : {"*:nonsense", ":debug", "*:9", "loud"}) {
    rc.log_level = level;
    EXPECT_EQ(runtime_init(rc), Status::kInvalidParameter) << level;
    EXPECT_NE(err().find("log_level"), std::string::npos) << err();
  }
  EXPECT_FALSE(runtime_running());

  up();
  EXPECT_TRUE(runtime_running());
  EXPECT_STREQ(last_error(), "");
  // Joining: any options, kSuccess.
  rc.memory_mb = 0;
  EXPECT_EQ(runtime_init(rc), Status::kSuccess);
  EXPECT_EQ(main_lcore(), 0u);
  EXPECT_EQ(worker_lcores(), std::vector<unsigned>{1});
}

// A failed EAL bring-up cannot be retried in the process: the next call says so.
TEST(ApiRuntime, EalRejectsThenEveryCallSaysRestart) {
  if (runtime_running()) GTEST_SKIP() << "EAL already up in this process";
  RuntimeConfig rc = good();
  rc.lcores = "0-99999";
  EXPECT_EQ(runtime_init(rc), Status::kInvalidParameter);
  EXPECT_NE(err().find("-l 0-99999"), std::string::npos) << err();
  EXPECT_EQ(runtime_init(good()), Status::kInvalidDeviceState);
  EXPECT_NE(err().find("restart"), std::string::npos) << err();
  EXPECT_FALSE(runtime_running());
  uint16_t a = 0, b = 0;
  EXPECT_EQ(create_ring_port_pair("r", 1, &a, &b), Status::kInvalidDeviceState);
}

TEST(ApiRuntime, Args) {
  RuntimeConfig rc = good();
  rc.log_level = "*:debug";
  rc.extra_args = {"--vdev=net_null9"};
  const auto args = runtime_args(rc);
  auto has = [&](const std::string& s) {
    return std::find(args.begin(), args.end(), s) != args.end();
  };
  EXPECT_TRUE(has("--no-huge"));
  EXPECT_TRUE(has("--no-pci"));
  EXPECT_TRUE(has("0-1"));
  EXPECT_TRUE(has("--log-level=*:debug"));
  EXPECT_EQ(args.back(), "--vdev=net_null9");
  // pci_allow implies PCI: -a for each, no --no-pci.
  rc.pci_allow = {"0000:03:00.0"};
  const auto pci = runtime_args(rc);
  EXPECT_EQ(std::count(pci.begin(), pci.end(), "--no-pci"), 0);
  EXPECT_EQ(std::count(pci.begin(), pci.end(), "0000:03:00.0"), 1);
}

TEST(ApiRuntime, RingPairs) {
  up();
  uint16_t a = 0, b = 0;
  EXPECT_EQ(create_ring_port_pair("rp", 1, nullptr, &b), Status::kInvalidParameter);
  EXPECT_EQ(create_ring_port_pair("rp", 0, &a, &b), Status::kInvalidParameter);
  EXPECT_EQ(create_ring_port_pair("rp", 17, &a, &b), Status::kInvalidParameter);
  EXPECT_EQ(create_ring_port_pair("", 1, &a, &b), Status::kInvalidParameter);
  EXPECT_EQ(create_ring_port_pair("a b", 1, &a, &b), Status::kInvalidParameter);
  EXPECT_EQ(create_ring_port_pair(std::string(17, 'x'), 1, &a, &b), Status::kInvalidParameter);
  EXPECT_NE(err(), "");
  ASSERT_EQ(create_ring_port_pair("rp", 2, &a, &b), Status::kSuccess) << err();
  EXPECT_NE(a, b);
  EXPECT_STREQ(last_error(), "");
  uint16_t c = 0, d = 0;
  EXPECT_EQ(create_ring_port_pair("rp", 1, &c, &d), Status::kAddressAlreadyExists);
  EXPECT_NE(err().find("rp"), std::string::npos) << err();
  ASSERT_EQ(create_ring_port_pair(std::string(16, 'y'), 16, &c, &d), Status::kSuccess) << err();
}

TEST(ApiRuntime, VdevPorts) {
  up();
  uint16_t p = 0;
  EXPECT_EQ(open_vdev_port("", &p), Status::kInvalidParameter);
  EXPECT_EQ(open_vdev_port(",iface=x", &p), Status::kInvalidParameter);
  EXPECT_EQ(open_vdev_port("net_null0", nullptr), Status::kInvalidParameter);
  EXPECT_EQ(open_vdev_port(std::string_view("net_null0\0x", 11), &p), Status::kInvalidParameter);
  EXPECT_EQ(open_vdev_port("net_nosuchdriver0", &p), Status::kDeviceNotReady);
  EXPECT_NE(err().find("net_nosuchdriver0"), std::string::npos) << err();
  // A device that is not an Ethernet port (when the crypto_null PMD is there at all).
  const Status crypto = open_vdev_port("crypto_null0", &p);
  EXPECT_TRUE(crypto == Status::kNotSupported || crypto == Status::kDeviceNotReady)
      << to_string(crypto);
  EXPECT_NE(err(), "");
  // net_null is an EAL plugin (Debian's DPDK loads every PMD it ships).
  const Status s = open_vdev_port("net_null0", &p);
  if (s != Status::kSuccess) GTEST_SKIP() << "no net_null PMD: " << err();
  EXPECT_STREQ(last_error(), "");
  // The same device again: the same port.
  uint16_t q = 0;
  EXPECT_EQ(open_vdev_port("net_null0", &q), Status::kSuccess) << err();
  EXPECT_EQ(q, p);
}

TEST(ApiRuntime, PciPorts) {
  up();
  uint16_t p = 0;
  EXPECT_EQ(open_pci_port("", &p), Status::kInvalidParameter);
  EXPECT_EQ(open_pci_port("not-a-bdf", &p), Status::kInvalidParameter);
  EXPECT_NE(err().find("not a PCI address"), std::string::npos) << err();
  EXPECT_EQ(open_pci_port("0000:03:00.0", nullptr), Status::kInvalidParameter);
  EXPECT_EQ(open_pci_port(std::string(200, '0'), &p), Status::kInvalidParameter);
  // This process brought EAL up with --no-pci.
  EXPECT_EQ(open_pci_port("03:00.0", &p), Status::kInvalidDeviceState);
  EXPECT_NE(err().find("RuntimeConfig::pci"), std::string::npos) << err();
}

}  // namespace
}  // namespace urnic::test
