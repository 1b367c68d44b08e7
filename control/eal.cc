#include "control/eal.h"

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_log.h>
#include <rte_ring.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "dataplane/log.h"
#include "dataplane/wire/icrc.h"

namespace urnic::ctl {
namespace {

std::mutex g_eal_mu;  // control path only: serialises bring-up
bool g_eal_up = false;

// DPDK's log lines (and urnic's, dataplane/log.h) go to stderr as before, minus one: DPDK
// 22.11's telemetry warns at every start that it made no socket for its legacy protocol, which
// nothing here uses. Every log line is written and flushed whole (rte_vlog), so each write is one
// line. The stream calls log_write with its lock held, which also guards the tap.
FILE* g_log_stream = nullptr;
LogTap g_log_tap = nullptr;
void* g_log_tap_ctx = nullptr;

ssize_t log_write(void*, const char* buf, size_t size) {
  static constexpr char kLegacy[] = "TELEMETRY: No legacy callbacks";
  if (size >= sizeof kLegacy - 1 && std::memcmp(buf, kLegacy, sizeof kLegacy - 1) == 0)
    return static_cast<ssize_t>(size);
  if (g_log_tap != nullptr) g_log_tap(g_log_tap_ctx, buf, size);
  return static_cast<ssize_t>(std::fwrite(buf, 1, size, stderr));
}

void install_log_stream() {
  // The stream's buffer is static: stdio would otherwise allocate one at the first line, which
  // may be an engine lcore's (a QP entering ERR), where nothing may allocate. rte_vlog flushes
  // every line, so one line's worth (plus room) is all it holds.
  static char buffer[4096];
  cookie_io_functions_t io{};
  io.write = log_write;
  if (FILE* f = ::fopencookie(nullptr, "w", io)) {
    std::setvbuf(f, buffer, _IOLBF, sizeof buffer);
    g_log_stream = f;
    rte_openlog_stream(f);
  }
}

}  // namespace

bool hugepages_available() {
  bool mounted = false;
  std::ifstream mounts("/proc/mounts");
  for (std::string line; std::getline(mounts, line);)
    if (line.find(" hugetlbfs ") != std::string::npos) mounted = true;
  if (!mounted) return false;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("HugePages_Free:", 0) == 0) {
      std::istringstream in(line.substr(15));
      long free_pages = 0;
      in >> free_pages;
      // 512 MiB of 2 MiB pages is what the default options ask for.
      return free_pages >= 256;
    }
  }
  return false;
}

// Runtime directories (issue 38 item 7): every process used to leave its
// /var/run/dpdk/urnic<pid>/ (a dead telemetry socket) behind. Each removes its own at exit, and
// bring-up removes those of urnic processes that are gone (killed before their exit handlers
// ran). A configured prefix (urnicd's stable one) is left in place: the next start reuses it.
namespace {

std::string g_own_runtime_dir;

void remove_own_runtime_dir() {
  std::error_code ec;
  if (!g_own_runtime_dir.empty()) std::filesystem::remove_all(g_own_runtime_dir, ec);
}

void tidy_runtime_dirs() {
  const std::filesystem::path own(rte_eal_get_runtime_dir());
  const std::string name = own.filename().string();
  if (name != "urnic" + std::to_string(::getpid())) return;  // a configured prefix
  g_own_runtime_dir = own.string();
  std::atexit(remove_own_runtime_dir);
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator(own.parent_path(), ec)) {
    const std::string n = d.path().filename().string();
    if (n.size() <= 5 || n.compare(0, 5, "urnic") != 0 ||
        n.find_first_not_of("0123456789", 5) != std::string::npos)
      continue;
    const long pid = std::strtol(n.c_str() + 5, nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      std::filesystem::remove_all(d.path(), ec);
  }
}

}  // namespace

std::vector<std::string> eal_args(const EalOptions& o) {
  std::vector<std::string> a;
  bool huge = o.memory == EalOptions::Memory::kHuge ||
              (o.memory == EalOptions::Memory::kAuto && hugepages_available());
  if (huge) {
    // --in-memory: no hugepage files or shared config left behind; cannot go with --no-huge.
    a.push_back("--in-memory");
  } else {
    a.push_back("--no-huge");
    a.push_back("--no-shconf");
  }
  a.push_back("-m");
  a.push_back(std::to_string(o.memory_mb));
  // A per-process prefix keeps concurrent processes (ctest -j, two-process tests) apart.
  a.push_back("--file-prefix=" +
              (o.file_prefix.empty() ? "urnic" + std::to_string(::getpid()) : o.file_prefix));
  if (o.no_pci && o.pci_allow.empty()) a.push_back("--no-pci");
  for (const auto& p : o.pci_allow) {
    a.push_back("-a");
    a.push_back(p);
  }
  for (const auto& v : o.vdevs) a.push_back("--vdev=" + v);
  if (!o.lcores.empty()) {
    a.push_back("-l");
    a.push_back(o.lcores);
  }
  if (!o.log_level.empty()) a.push_back("--log-level=" + o.log_level);
  // The telemetry socket (control/telemetry.cc publishes the counters there) lives in the
  // per-process runtime directory above, so concurrent processes do not contend for it.
  if (!o.telemetry) a.push_back("--no-telemetry");
  a.insert(a.end(), o.extra.begin(), o.extra.end());
  return a;
}

Status eal_init(const EalOptions& opts) {
  std::lock_guard lock(g_eal_mu);
  if (g_eal_up) return Status::kSuccess;
  std::vector<std::string> args = eal_args(opts);
  args.insert(args.begin(), opts.program);
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  install_log_stream();
  // Before EAL parses its options: --log-level=urnic.*:debug then applies to urnic's types in
  // the order given, as to DPDK's own (a type registered later takes the first matching option).
  dp::log_register();
  const int rc = rte_eal_init(static_cast<int>(args.size()), argv.data());
  if (rc < 0) {
    // EALREADY: somebody else in this process brought EAL up; join it.
    if (rte_errno == EALREADY) {
      g_eal_up = true;
      return Status::kSuccess;
    }
    return rte_errno == ENOMEM ? Status::kInsufficientResources : Status::kInvalidParameter;
  }
  g_eal_up = true;
  wire::icrc_init();
  tidy_runtime_dirs();
  return Status::kSuccess;
}

bool eal_running() noexcept { return g_eal_up; }

void set_log_tap(LogTap tap, void* ctx) noexcept {
  std::lock_guard lock(g_eal_mu);
  if (g_log_stream == nullptr) return;
  ::flockfile(g_log_stream);  // the lock log_write runs under
  g_log_tap = tap;
  g_log_tap_ctx = ctx;
  ::funlockfile(g_log_stream);
}

Status probe_vdev(std::string_view devargs, uint16_t* port_id) {
  const std::string args(devargs);
  if (rte_dev_probe(args.c_str()) != 0) return Status::kInvalidParameter;
  const std::string name = args.substr(0, args.find(','));
  if (rte_eth_dev_get_port_by_name(name.c_str(), port_id) != 0) return Status::kInvalidParameter;
  return Status::kSuccess;
}

Status create_ring_pair(std::string_view name, uint16_t queues, uint16_t* a, uint16_t* b) {
  if (queues == 0 || queues > RTE_MAX_QUEUES_PER_PORT) return Status::kInvalidParameter;
  std::vector<rte_ring*> ab(queues), ba(queues);
  const std::string base(name);
  // 4096 slots per direction: more than a TX burst loop can put in flight before the peer's
  // RX burst drains it; a full ring drops like a full NIC queue would.
  constexpr unsigned kRingSize = 4096;
  for (uint16_t q = 0; q < queues; ++q) {
    const std::string n1 = base + "_ab" + std::to_string(q), n2 = base + "_ba" + std::to_string(q);
    ab[q] = rte_ring_create(n1.c_str(), kRingSize, static_cast<int>(rte_socket_id()),
                            RING_F_SP_ENQ | RING_F_SC_DEQ);
    ba[q] = rte_ring_create(n2.c_str(), kRingSize, static_cast<int>(rte_socket_id()),
                            RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (ab[q] == nullptr || ba[q] == nullptr) return Status::kInsufficientResources;
  }
  const std::string na = base + "_a", nb = base + "_b";
  const int pa =
      rte_eth_from_rings(na.c_str(), ba.data(), queues, ab.data(), queues, rte_socket_id());
  const int pb =
      rte_eth_from_rings(nb.c_str(), ab.data(), queues, ba.data(), queues, rte_socket_id());
  if (pa < 0 || pb < 0) return Status::kInsufficientResources;
  *a = static_cast<uint16_t>(pa);
  *b = static_cast<uint16_t>(pb);
  return Status::kSuccess;
}

}  // namespace urnic::ctl
