// Counters on DPDK's telemetry socket (issue 14 item 5; control/telemetry.cc): another process,
// DPDK's own dpdk-telemetry.py, reads /urnic/adapters, /urnic/adapter,<id>, /urnic/qps,<id> and
// /urnic/qp,<id>,<qpn> while the adapters are open, and what it prints must be the traffic this
// test sent: every WRITE and SEND counted once on each side, every completion by its status.
#include <rte_eal.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <string>

#include "../common/shell.h"
#include "api_fixture.h"

namespace urnic::test {
namespace {

class ApiTelemetry : public EalTest {};

// Runs dpdk-telemetry.py against this process with `cmd` on its stdin; its output.
std::string ask(const std::string& cmd) {
  const std::string prefix = std::string(rte_eal_get_runtime_dir());
  return test::dpdk_telemetry(prefix.substr(prefix.rfind('/') + 1), cmd);
}

// The number after "name": in `json` after the first occurrence of `after` (-1: none).
int64_t field(const std::string& json, const std::string& name, const std::string& after = "") {
  const size_t from = after.empty() ? 0 : json.find('"' + after + '"');
  if (from == std::string::npos) return -1;
  std::smatch m;
  const std::string rest = json.substr(from);
  if (!std::regex_search(rest, m, std::regex('"' + name + R"(": ?(\d+))"))) return -1;
  return std::stoll(m[1]);
}

TEST_F(ApiTelemetry, AnotherProcessReadsTheCountersOfTheTrafficSent) {
  if (::access("/usr/bin/dpdk-telemetry.py", X_OK) != 0)
    GTEST_SKIP() << "dpdk-telemetry.py not installed (scripts/install-deps.sh installs it)";
  ConnectedPair p("telemetry");
  constexpr uint32_t kWrites = 37, kSends = 11;
  std::vector<uint8_t> src(4096, 0x5A), dst(4096);
  Handle<Mr> ms = p.a.reg(src.data(), src.size(), mr_flag::kAllowLocalWrite);
  Handle<Mr> md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite);
  for (uint32_t i = 0; i < kSends; ++i) {
    const Sge r{addr(dst.data() + 2048), 100, md->get_local_token()};
    ASSERT_EQ(p.b.qp->receive(ctx(i), {&r, 1}), Status::kSuccess);
  }
  const Sge s{addr(src.data()), 100, ms->get_local_token()};
  for (uint32_t i = 0; i < kWrites; ++i)
    ASSERT_EQ(p.a.qp->write(ctx(i), {&s, 1}, addr(dst.data()), md->get_remote_token(), 0),
              Status::kSuccess);
  for (uint32_t i = 0; i < kSends; ++i)
    ASSERT_EQ(p.a.qp->send(ctx(i), {&s, 1}, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(kWrites + kSends, kSends));
  // The coalesced ACKs reach a before the counters are read.
  p.run_for(kQuiet);

  auto* ea = p.a.adapter->query_extension<AdapterExtension>();
  auto* eb = p.b.adapter->query_extension<AdapterExtension>();
  const std::string ida = std::to_string(ea->telemetry_id());
  const std::string idb = std::to_string(eb->telemetry_id());
  const uint32_t qa = p.a.qp->query_extension<QpConnectExtension>()->qpn();
  const uint32_t qb = p.b.qp->query_extension<QpConnectExtension>()->qpn();

  const std::string list = ask("/urnic/adapters");
  EXPECT_NE(list.find("[" + ida + ", " + idb + "]"), std::string::npos) << list;
  const std::string qps = ask("/urnic/qps," + ida);
  EXPECT_NE(qps.find(std::to_string(qa)), std::string::npos) << qps;

  const std::string a = ask("/urnic/qp," + ida + "," + std::to_string(qa));
  EXPECT_NE(a.find(R"("state": "RTS")"), std::string::npos) << a;
  EXPECT_NE(a.find(R"("service": "RC")"), std::string::npos) << a;
  EXPECT_EQ(field(a, "tx_packets"), kWrites + kSends) << a;
  EXPECT_EQ(field(a, "completions_ok"), kWrites + kSends) << a;
  EXPECT_EQ(field(a, "completions_success"), kWrites + kSends) << a;
  EXPECT_EQ(field(a, "retransmits"), 0) << a;
  EXPECT_GE(field(a, "acks_received"), 1) << a;
  const std::string b = ask("/urnic/qp," + idb + "," + std::to_string(qb));
  EXPECT_EQ(field(b, "rx_packets"), kWrites + kSends) << b;
  EXPECT_EQ(field(b, "completions_ok"), kSends) << b;  // the receives
  EXPECT_EQ(field(b, "duplicate_requests"), 0) << b;

  // The adapter: the same numbers the API gives, port and QP sum.
  AdapterCounters c;
  ASSERT_EQ(p.a.adapter->query_counters(&c), Status::kSuccess);
  const std::string ad = ask("/urnic/adapter," + ida);
  EXPECT_EQ(field(ad, "tx_packets", "port"), static_cast<int64_t>(c.port.tx_packets)) << ad;
  EXPECT_EQ(field(ad, "rx_packets", "port"), static_cast<int64_t>(c.port.rx_packets)) << ad;
  EXPECT_EQ(field(ad, "tx_packets", "qps"), kWrites + kSends) << ad;
  EXPECT_EQ(field(ad, "rx_drops_total", "port"), 0) << ad;
  // Steps that did work are counted (issue 14 item 7: busy_steps stayed 0): at least the
  // steps that sent the WRITEs and SENDs, and never more than all steps.
  EXPECT_GE(c.port.busy_steps, 1u);
  EXPECT_LE(c.port.busy_steps, c.port.steps);
  EXPECT_GE(field(ad, "busy_steps", "port"), static_cast<int64_t>(c.port.busy_steps)) << ad;
  EXPECT_NE(ad.find(R"("cm": {)"), std::string::npos) << ad;
  // Its one engine's share is all of it (/urnic/engine,<id>,<i>; several: api_engines).
  EXPECT_EQ(field(ad, "engines"), 1) << ad;
  const std::string e0 = ask("/urnic/engine," + ida + ",0");
  EXPECT_EQ(field(e0, "tx_packets"), static_cast<int64_t>(c.port.tx_packets)) << e0;
  EXPECT_EQ(field(e0, "handoffs_in"), 0) << e0;

  // Bad parameters: no answer, no crash (telemetry prints null).
  for (const std::string& bad :
       std::vector<std::string>{"/urnic/qp,99,1", "/urnic/qp," + ida + ",999999", "/urnic/qp,x",
                                "/urnic/adapter,", "/urnic/qps,12345678901234567890123",
                                "/urnic/engine," + ida + ",1", "/urnic/engine," + ida}) {
    const std::string out = ask(bad);
    EXPECT_NE(out.find("null"), std::string::npos) << bad << ": " << out;
  }
}

}  // namespace
}  // namespace urnic::test
