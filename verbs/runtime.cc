// The verbs layer's process-wide state: its configuration (environment or file), and the lazy
// bring-up of EAL, ports, adapters and the engine on the first ibv_open_device (issue 16 item 1:
// no kernel help, EAL comes up inside the application's process).
#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>

#include "dataplane/log.h"
#include "urnic/daemon.h"
#include "verbs/internal.h"

namespace urnic::verbs {
namespace {

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// Applies KEY=VALUE (KEY without the URNIC_ prefix, any case). False for an unknown key or a
// value that does not parse.
bool apply(Config& c, std::string key, const std::string& v) {
  for (auto& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  auto number = [&](auto* out, unsigned long long max) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 0);
    if (v.empty() || *end != '\0' || errno != 0 || n > max) return false;
    *out = static_cast<std::remove_pointer_t<decltype(out)>>(n);
    return true;
  };
  if (key == "devargs")
    c.devargs = v;
  else if (key == "pci")
    c.pci = v;
  else if (key == "name")
    c.name = v;
  else if (key == "ipv4" || key == "ip")
    c.ipv4 = v;
  else if (key == "ipv6")
    c.ipv6 = v;
  else if (key == "mac")
    c.mac = v;
  else if (key == "routes")
    c.routes = v;
  else if (key == "lcores")
    c.lcores = v;
  else if (key == "memory")
    c.memory = v;
  else if (key == "log_level")
    c.log_level = v;
  else if (key == "break_rules") {
    BrokenRules r;  // a later setting replaces an earlier one, as for every key
    if (parse_broken_rules(v, &r, nullptr) != Status::kSuccess) return false;
    c.break_rules = r;
  } else if (key == "engine_cpu")
    return number(&c.engine_cpu, CPU_SETSIZE - 1);
  else if (key == "memory_mb")
    return number(&c.memory_mb, 1u << 20);
  else if (key == "max_qps")
    return number(&c.max_qps, 1u << 24);
  else
    return false;
  return true;
}

Config load_config() {
  Config c;
  if (const char* f = std::getenv("URNIC_CONFIG")) {
    std::ifstream in(f);
    if (!in) {
      c.error = std::string("URNIC_CONFIG: cannot read ") + f;
      return c;
    }
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      const std::string t = trim(line.substr(0, line.find('#')));
      if (t.empty()) continue;
      const auto eq = t.find('=');
      std::string key = eq == std::string::npos ? t : trim(t.substr(0, eq));
      if (key.rfind("URNIC_", 0) == 0) key = key.substr(6);
      if (eq == std::string::npos || !apply(c, key, trim(t.substr(eq + 1)))) {
        c.error = std::string(f) + ":" + std::to_string(n) + ": bad line '" + t + "'";
        return c;
      }
    }
  }
  static const char* const kKeys[] = {"DEVARGS",   "PCI",     "NAME",   "IPV4",       "IPV6",
                                      "MAC",       "LCORES",  "MEMORY", "LOG_LEVEL",  "ENGINE_CPU",
                                      "MEMORY_MB", "MAX_QPS", "ROUTES", "BREAK_RULES"};
  for (const char* k : kKeys) {
    const std::string var = std::string("URNIC_") + k;
    if (const char* v = std::getenv(var.c_str()); v != nullptr && !apply(c, k, v)) {
      c.error = var + ": bad value '" + v + "'";
      return c;
    }
  }
  if (!c.devargs.empty() && !c.pci.empty()) c.error = "URNIC_DEVARGS and URNIC_PCI are exclusive";
  if (!c.memory.empty() && c.memory != "auto" && c.memory != "huge" && c.memory != "nohuge")
    c.error = "URNIC_MEMORY must be auto, huge or nohuge, not '" + c.memory + "'";
  if (c.name.empty() || c.name.size() >= IBV_SYSFS_NAME_MAX - 1)
    c.error = "URNIC_NAME must have 1 .. 62 characters";
  return c;
}

bool parse_addresses(const Config& c, Device& d, std::string* why) {
  std::array<uint8_t, 16> g{};
  bool v4 = false;
  if (!c.ipv4.empty()) {
    if (parse_address(c.ipv4, &g, &d.ipv4_len, &v4) != Status::kSuccess || !v4)
      return *why = "bad URNIC_IPV4 " + c.ipv4, false;
    d.ipv4 = uint32_t{g[12]} << 24 | uint32_t{g[13]} << 16 | uint32_t{g[14]} << 8 | g[15];
  }
  if (!c.ipv6.empty()) {
    if (parse_address(c.ipv6, &g, &d.ipv6_len, &v4) != Status::kSuccess || v4)
      return *why = "bad URNIC_IPV6 " + c.ipv6, false;
    d.ipv6 = g;
  }
  // URNIC_ROUTES="198.51.100.0/24 via 192.0.2.1; default via 192.0.2.254"
  for (size_t i = 0; i <= c.routes.size();) {
    const size_t j = std::min(c.routes.find(';', i), c.routes.size());
    const std::string one = trim(c.routes.substr(i, j - i));
    i = j + 1;
    if (one.empty()) continue;
    Route r;
    std::string reason;
    if (parse_route(one, &r, &reason) != Status::kSuccess)
      return *why = "bad URNIC_ROUTES: " + reason, false;
    d.routes.push_back(r);
  }
  if (!c.mac.empty()) {
    unsigned v[6];
    char tail = 0;
    if (std::sscanf(c.mac.c_str(), "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                    &tail) != 6)
      return *why = "bad URNIC_MAC " + c.mac, false;
    std::array<uint8_t, 6> m{};
    for (int i = 0; i < 6; ++i) m[i] = static_cast<uint8_t>(v[i]);
    d.mac = m;
  }
  return true;
}

std::unique_ptr<Device> make_device(const std::string& name, unsigned index) {
  auto d = std::make_unique<Device>();
  d->index = index;
  d->dev.node_type = IBV_NODE_CA;
  d->dev.transport_type = IBV_TRANSPORT_IB;  // what RoCE devices report (rxe too)
  std::snprintf(d->dev.name, sizeof d->dev.name, "%s", name.c_str());
  std::snprintf(d->dev.dev_name, sizeof d->dev.dev_name, "uverbs-%s", name.c_str());
  // No sysfs: urnic's devices live in the process, not in the kernel.
  std::snprintf(d->dev.dev_path, sizeof d->dev.dev_path, "/dev/null");
  std::snprintf(d->dev.ibdev_path, sizeof d->dev.ibdev_path, "/dev/null");
  return d;
}

// The CPUs this thread may run on, in increasing order.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0)
    for (int i = 0; i < CPU_SETSIZE; ++i)
      if (CPU_ISSET(i, &set)) cpus.push_back(i);
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

}  // namespace

Runtime& Runtime::get() noexcept {
  static Runtime* r = new Runtime();  // never destroyed: contexts may be closed at exit
  return *r;
}

Runtime::Runtime() : cfg_(load_config()) {
  if (!cfg_.error.empty()) return;
  if (daemon_configured()) {
    attached_ = true;
    attach_devices();
    return;
  }
  std::string why;
  if (cfg_.devargs.empty() && cfg_.pci.empty()) {
    // No port configured: two devices wired back to back in memory (net_ring), so that a verbs
    // program can talk to itself with no NIC and no privileges.
    for (unsigned i = 0; i < 2; ++i) {
      auto d = make_device(
          cfg_.name.substr(0, cfg_.name.size() - (cfg_.name.back() == '0')) + std::to_string(i), i);
      d->ring = true;
      d->mac = std::array<uint8_t, 6>{0x02, 'u', 'r', 'n', 0, static_cast<uint8_t>(i + 1)};
      d->ipv4 = 0xC6126401u + i;  // 198.18.100.1 / .2 (RFC 2544 range; never leaves the process)
      devs_.push_back(std::move(d));
    }
    return;
  }
  auto d = make_device(cfg_.name, 0);
  if (!parse_addresses(cfg_, *d, &why)) {
    cfg_.error = why;
    return;
  }
  devs_.push_back(std::move(d));
}

std::vector<Device*> Runtime::devices() noexcept {
  std::vector<Device*> out;
  if (!cfg_.error.empty()) {
    std::fprintf(stderr, "urnic verbs: %s\n", cfg_.error.c_str());
    errno = EINVAL;
    return out;
  }
  for (auto& d : devs_) out.push_back(d.get());
  return out;
}

int Runtime::acquire(Device*) noexcept {
  std::lock_guard lock(mu_);
  if (!up_) {
    if (const int err = bring_up_locked(); err != 0) return err;
    up_ = true;
  }
  ++users_;
  return 0;
}

// The adapters stay up when the last context closes, as a NIC's driver stays loaded: DPDK frees
// a net_ring port when it is closed, and bringing EAL's ports up again costs the next open
// seconds. They go with the process.
void Runtime::release(Device*) noexcept {
  std::lock_guard lock(mu_);
  if (users_ > 0) --users_;
}

namespace {

// EAL on the application's thread: its affinity is restored afterwards, so that bringing up a
// device does not pin the application (EAL pins the thread that initialises it).
int start_eal(const Config& c) {
  if (runtime_running()) return 0;
  RuntimeConfig rc;
  rc.program = "urnic-verbs";
  rc.memory = c.memory == "huge"     ? RuntimeConfig::Memory::kHugepages
              : c.memory == "nohuge" ? RuntimeConfig::Memory::kNoHuge
                                     : RuntimeConfig::Memory::kAuto;
  rc.memory_mb = c.memory_mb;
  if (!c.log_level.empty()) rc.log_level = c.log_level;
  if (!c.pci.empty()) {
    rc.pci = true;
    rc.pci_allow = {c.pci};
  }
  // One lcore (EAL's main, this thread) unless told otherwise: the engine is not launched on an
  // lcore but driven by the application's threads and the progress thread (Runtime::drive).
  rc.lcores = c.lcores.empty() ? std::to_string(allowed_cpus().front()) : c.lcores;
  cpu_set_t saved;
  const bool have = pthread_getaffinity_np(pthread_self(), sizeof saved, &saved) == 0;
  const Status s = runtime_init(rc);
  if (have) pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
  if (s != Status::kSuccess) {
    std::fprintf(stderr, "urnic verbs: EAL: %s\n", last_error());
    return ENODEV;
  }
  return 0;
}

}  // namespace

// Attach mode (URNIC_DAEMON, docs/daemon.md): one device per adapter of the daemon, by its name,
// with its addresses (a daemon's names are at most 31 characters: they fit ibv_device's); no EAL,
// port or engine in this process.
void Runtime::attach_devices() noexcept {
  std::vector<DaemonAdapter> ads;
  if (attach() != Status::kSuccess || daemon_adapters(&ads) != Status::kSuccess) {
    cfg_.error = std::string("URNIC_DAEMON: ") + last_error();
    return;
  }
  for (unsigned i = 0; i < ads.size(); ++i) {
    auto d = make_device(ads[i].name, i);
    d->ipv4 = ads[i].ipv4;
    d->ipv6 = ads[i].ipv6;
    d->mac = ads[i].mac;
    d->port_mtu = ads[i].mtu;
    devs_.push_back(std::move(d));
  }
}

int Runtime::bring_up_locked() noexcept {
  if (attached_) {
    for (auto& d : devs_) {
      if (const Status s = Adapter::open(d->dev.name, &d->adapter); s != Status::kSuccess) {
        std::fprintf(stderr, "urnic verbs: %s: %s\n", d->dev.name, last_error());
        tear_down_locked();
        return status_errno(s);
      }
      d->ext = d->adapter->query_extension<AdapterExtension>();
      d->info = d->adapter->adapter_info();
    }
    return 0;
  }
  if (const int err = start_eal(cfg_); err != 0) return err;
  static bool ring_made = false;  // net_ring ports live as long as the process
  static uint16_t ring_a = 0, ring_b = 0;
  for (auto& d : devs_) {
    Status s = Status::kSuccess;
    if (d->ring) {
      if (!ring_made) s = create_ring_port_pair("verbs", 1, &ring_a, &ring_b);
      ring_made = ring_made || s == Status::kSuccess;
      d->port = d->index == 0 ? ring_a : ring_b;
    } else if (!cfg_.devargs.empty()) {
      s = open_vdev_port(cfg_.devargs, &d->port);
    } else {
      s = open_pci_port(cfg_.pci, &d->port);
    }
    if (s != Status::kSuccess) {
      dp::log_line(dp::LogType::kVerbs, RTE_LOG_ERR, "port of %s: %s", d->dev.name, last_error());
      return ENODEV;
    }
    if (port_mtu(d->port, &d->port_mtu) != Status::kSuccess) d->port_mtu = 1500;
  }
  EngineConfig ec;
  ec.shared_drive = true;  // never launched: driven by application threads and progress_loop
  ec.max_qps = cfg_.max_qps * static_cast<uint32_t>(devs_.size());
  engine_ = std::make_unique<Engine>(ec);
  for (auto& d : devs_) {
    AdapterConfig ac;
    ac.port_id = d->port;
    ac.ipv4 = d->ipv4;
    ac.ipv6 = d->ipv6;
    ac.ipv4_prefix_len = d->ipv4_len;
    ac.ipv6_prefix_len = d->ipv6_len;
    ac.routes = d->routes;
    ac.mac = d->mac;
    ac.max_qps = cfg_.max_qps;
    ac.broken_rules = cfg_.break_rules;
    const Status s = Adapter::open(ac, *engine_, &d->adapter);
    if (s != Status::kSuccess) {
      dp::log_line(dp::LogType::kVerbs, RTE_LOG_ERR, "opening %s failed: %s (0x%08x)", d->dev.name,
                   dp::status_name(s), static_cast<unsigned>(s));
      tear_down_locked();
      return status_errno(s);
    }
    d->ext = d->adapter->query_extension<AdapterExtension>();
    d->info = d->adapter->adapter_info();
  }
  progress_ = std::thread([this] { progress_loop(); });
  if (cfg_.engine_cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cfg_.engine_cpu, &set);
    pthread_setaffinity_np(progress_.native_handle(), sizeof set, &set);
  }
  progress_.detach();  // runs as long as the process (the adapters stay up, see release)
  return 0;
}

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
// An application thread that drove the engine this recently is taken to be polling still.
constexpr int64_t kAppActiveNs = 200'000;
}  // namespace

void Runtime::drive() noexcept {
  if (attached_) return;  // the daemon's engines run by themselves
  last_app_drive_.store(now_ns(), std::memory_order_relaxed);
  engine_->run_once();
}

void Runtime::app_blocks() noexcept {
  last_app_drive_.store(0, std::memory_order_relaxed);
  std::lock_guard lock(pmu_);
  pcv_.notify_one();
}

// The progress thread: drives the engine while no application thread does (a passive side, an
// application blocked in ibv_get_cq_event or busy elsewhere). Spins while there is work, yields
// the CPU when idle for a while, then sleeps in 50 us naps that ibv_get_cq_event cuts short.
// While an application thread drives, it only checks every 100 us whether it still does: naps
// that wake more often preempt the polling application (a woken sleeper runs first), which on a
// machine with fewer CPUs than busy threads costs more than it gains (measured: ib_send_lat
// typical 3.5 us with these settings, 18 us with 20 us naps).
void Runtime::progress_loop() noexcept {
  uint32_t idle = 0;
  for (;;) {
    const bool app = now_ns() - last_app_drive_.load(std::memory_order_relaxed) < kAppActiveNs;
    if (!app && engine_->run_once()) {
      idle = 0;
      continue;
    }
    if (!app && ++idle < 256) continue;
    if (!app && idle < 4096) {
      sched_yield();
      continue;
    }
    std::unique_lock lock(pmu_);
    pcv_.wait_for(lock, std::chrono::microseconds(app ? 100 : 50));
  }
}

// A failed bring-up: what was opened is closed again.
void Runtime::tear_down_locked() noexcept {
  for (auto& d : devs_) {
    d->adapter.reset();
    d->ext = nullptr;
  }
  engine_.reset();
}

}  // namespace urnic::verbs
