// urnic's log types (dataplane/log.h) as an operator meets them: registered under their
// documented names, raised by EAL's --log-level, quiet at their default level, and the lines a
// port's bring-up and a QP's entry into ERR write, with the reason, read back through the log
// stream's tap (control/eal.h).
#include <rte_log.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "../api/api_fixture.h"
#include "control/eal.h"
#include "dataplane/log.h"

namespace urnic::test {
namespace {

// EAL as the other suites bring it up, plus one option after the "*:warning" they all pass, so
// the test can see that a later --log-level wins for urnic's types as for DPDK's own.
void eal_with_cm_debug() {
  RuntimeConfig c;
  c.program = "urnic-test";
  c.memory = RuntimeConfig::Memory::kNoHuge;
  c.lcores = "0-1";
  c.log_level = "*:warning";
  c.extra_args = {"--log-level=urnic.cm:debug"};
  ASSERT_EQ(runtime_init(c), Status::kSuccess);
}

// Every log line while it lives; restores the urnic types' levels at the end.
class LogCapture {
 public:
  LogCapture() {
    for (size_t i = 0; i < dp::kLogTypeCount; ++i)
      saved_[i] = rte_log_get_level(static_cast<uint32_t>(id(i)));
    ctl::set_log_tap(&LogCapture::tap, this);
  }
  ~LogCapture() {
    ctl::set_log_tap(nullptr, nullptr);
    for (size_t i = 0; i < dp::kLogTypeCount; ++i)
      (void)rte_log_set_level(static_cast<uint32_t>(id(i)), static_cast<uint32_t>(saved_[i]));
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The lines containing every one of `parts`.
  std::vector<std::string> matching(std::initializer_list<std::string> parts) {
    std::lock_guard lk(mu_);
    std::vector<std::string> out;
    for (const auto& l : lines_) {
      bool all = true;
      for (const auto& p : parts) all = all && l.find(p) != std::string::npos;
      if (all) out.push_back(l);
    }
    return out;
  }
  std::string all() {
    std::lock_guard lk(mu_);
    std::string s;
    for (const auto& l : lines_) s += l;
    return s;
  }

 private:
  static int id(size_t i) { return dp::log_type_id(static_cast<dp::LogType>(i)); }
  // On whichever thread logged (the engine's included); test code, so it may allocate.
  static void tap(void* ctx, const char* line, size_t len) {
    auto* self = static_cast<LogCapture*>(ctx);
    std::lock_guard lk(self->mu_);
    self->lines_.emplace_back(line, len);
  }

  std::mutex mu_;
  std::vector<std::string> lines_;
  int saved_[dp::kLogTypeCount]{};
};

class Logging : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { eal_with_cm_debug(); }
};

uint32_t qpn(Qp& q) { return q.query_extension<QpConnectExtension>()->qpn(); }

std::string hex_qpn(uint32_t n) {
  char b[16];
  std::snprintf(b, sizeof b, "QP 0x%06x ", n);
  return b;
}

TEST_F(Logging, TypesAreRegisteredUnderTheirDocumentedNames) {
  char* text = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  ASSERT_NE(f, nullptr);
  rte_log_list_types(f, "urnic.");
  std::fclose(f);
  const std::string listed(text, len);
  std::free(text);
  for (const char* name : {"urnic.dp", "urnic.cm", "urnic.ctl", "urnic.verbs", "urnic.daemon"})
    EXPECT_NE(listed.find(name), std::string::npos) << name << " not in:\n" << listed;
  for (size_t i = 0; i < dp::kLogTypeCount; ++i) {
    const auto t = static_cast<dp::LogType>(i);
    // rte_log_register of a registered name returns its id: a lookup by name.
    EXPECT_EQ(rte_log_register(dp::log_type_name(t)), dp::log_type_id(t)) << dp::log_type_name(t);
  }
}

TEST_F(Logging, EalLogLevelOptionsApplyInTheOrderGiven) {
  // "*:warning" then "urnic.cm:debug": the later option wins for urnic.cm, the first holds for
  // the others (registered before EAL parsed its options, as DPDK's own types are).
  EXPECT_EQ(rte_log_get_level(static_cast<uint32_t>(dp::log_type_id(dp::LogType::kCm))),
            static_cast<int>(RTE_LOG_DEBUG));
  EXPECT_EQ(rte_log_get_level(static_cast<uint32_t>(dp::log_type_id(dp::LogType::kDp))),
            static_cast<int>(RTE_LOG_WARNING));
}

TEST_F(Logging, PortBringUpIsLoggedAtInfoAndSilentByDefault) {
  LogCapture log;
  {
    // At the default levels a port's bring-up says nothing.
    ConnectedPair quiet("log_quiet");
  }
  EXPECT_TRUE(log.matching({"urnic.ctl: port "}).empty()) << log.all();
  ASSERT_EQ(rte_log_set_level_pattern("urnic.ctl", RTE_LOG_INFO), 0);
  ConnectedPair p("log_up");
  for (uint16_t port : {p.port_a, p.port_b}) {
    const auto lines =
        log.matching({"urnic.ctl: port " + std::to_string(port) + " up: ", "driver net_ring",
                      "MAC ", "MTU ", "1 RX/TX queues", "Link "});
    EXPECT_EQ(lines.size(), 1u) << "port " << port << ":\n" << log.all();
  }
}

TEST_F(Logging, RemoteAccessErrorLogsBothQpsEnteringErrWithTheReason) {
  LogCapture log;
  ConnectedPair p("log_err");
  ASSERT_EQ(rte_log_set_level_pattern("urnic.dp", RTE_LOG_INFO), 0);
  std::vector<uint8_t> dst(64, 0);
  Handle<Mr> mr = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteRead);  // no remote write
  uint64_t v = 7;
  const Sge s{addr(&v), 8, 0};
  ASSERT_EQ(
      p.a.qp->write(ctx(1), {&s, 1}, addr(dst.data()), mr->get_remote_token(), op_flag::kInline),
      Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 0));
  EXPECT_EQ(p.a.done[0].status, Status::kAccessViolation);
  // The requester: the responder's NAK (remote access error, IBTA §9.7.5.2.8) and the WC status
  // its WRITE completed with.
  EXPECT_EQ(log.matching({"urnic.dp: " + hex_qpn(qpn(*p.a.qp)) + "RTS -> ERR on port " +
                              std::to_string(p.port_a) + ": NAK received",
                          "REM_ACCESS_ERR", "syndrome 0x62 (NAK remote access error)"})
                .size(),
            1u)
      << log.all();
  // The responder: it sent that NAK and entered ERR itself (IBTA §9.9.3, class C/D error).
  EXPECT_EQ(log.matching({"urnic.dp: " + hex_qpn(qpn(*p.b.qp)) + "RTS -> ERR on port " +
                              std::to_string(p.port_b) + ": NAK sent",
                          "syndrome 0x62 (NAK remote access error)"})
                .size(),
            1u)
      << log.all();
}

}  // namespace
}  // namespace urnic::test
