// urnicd: the daemon that owns urnic's ports and serves client processes (docs/daemon.md,
// issue 38). It brings up DPDK once, opens each configured port as an adapter over its engines
// (which run ARP/ND, the connection manager on QP1 and the RoCEv2 transport), publishes
// telemetry, and serves clients on its Unix socket until SIGTERM or SIGINT.
//
//   urnicd [--foreground] [--config FILE] [--socket PATH] [--set SECTION.KEY=VALUE]... [--check]
//
// Without --foreground it detaches (fork, setsid) once it is ready, so that a start that fails
// says why on the terminal and exits non-zero. Exit status: 0 after a clean shutdown, 1 for a
// bad configuration or a failed start, 2 for a bad command line.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_launch.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "daemon/config.h"
#include "daemon/server.h"
#include "daemon/telemetry.h"
#include "urnic/urnic.h"

namespace {

using namespace urnic;
namespace ud = urnic::daemon;

constexpr const char* kDefaultConfig = "/etc/urnic/urnicd.conf";

struct Args {
  bool foreground = false, check = false;
  std::string config;  // empty: kDefaultConfig if it exists
  std::vector<std::string> sets;
};

void usage(FILE* f) {
  std::fprintf(f,
               "usage: urnicd [--foreground] [--config FILE] [--socket PATH]\n"
               "              [--set SECTION.KEY=VALUE]... [--check]\n"
               "  --foreground  stay attached to the terminal (systemd, tests)\n"
               "  --config      configuration file (default %s if it exists)\n"
               "  --socket      the client socket (= --set daemon.socket=PATH)\n"
               "  --set         override one key, e.g. --set port.urnic0.ipv4=10.0.0.1\n"
               "  --check       check the configuration, print it and exit\n"
               "With no port configured: the in-memory pair urnic0/urnic1 (docs/daemon.md).\n",
               kDefaultConfig);
}

bool parse_args(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&](const char* opt) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "urnicd: %s needs a value\n", opt);
        return nullptr;
      }
      return argv[++i];
    };
    const char* v = nullptr;
    if (s == "--foreground" || s == "-f") {
      a->foreground = true;
    } else if (s == "--check") {
      a->check = true;
    } else if (s == "--help" || s == "-h") {
      usage(stdout);
      std::exit(0);
    } else if (s == "--config") {
      if ((v = value("--config")) == nullptr) return false;
      a->config = v;
    } else if (s == "--socket") {
      if ((v = value("--socket")) == nullptr) return false;
      a->sets.push_back(std::string("daemon.socket=") + v);
    } else if (s == "--set") {
      if ((v = value("--set")) == nullptr) return false;
      a->sets.push_back(v);
    } else {
      std::fprintf(stderr, "urnicd: unknown option '%s'\n", s.c_str());
      return false;
    }
  }
  return true;
}

bool load_config(const Args& a, ud::Config* c, std::string* err) {
  std::string path = a.config;
  if (path.empty() && std::filesystem::exists(kDefaultConfig)) path = kDefaultConfig;
  if (!path.empty() && !ud::load_file(path, c, err)) return false;
  for (const auto& s : a.sets)
    if (!ud::apply_override(c, s, err)) return false;
  return ud::finish(c, err);
}

// An exclusive lock on `path` (created if need be) holding our pid and what we serve, kept
// until the process exits however it exits (the kernel drops flocks of a dead process). false
// with *err naming the owner when another process holds it.
bool take_lock(const std::string& path, const std::string& what, const std::string& socket,
               std::string* err) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    *err = "cannot open the lock " + path + ": " + std::strerror(errno);
    return false;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char owner[256] = {};
    const ssize_t n = ::pread(fd, owner, sizeof owner - 1, 0);
    if (n > 0 && owner[n - 1] == '\n') owner[n - 1] = '\0';
    *err = what + " is owned by another urnicd (" + (n > 0 ? owner : "pid unknown") + "; lock " +
           path + "): refusing to start a second daemon on it";
    ::close(fd);
    return false;
  }
  const std::string me = "pid " + std::to_string(::getpid()) + ", socket " + socket + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) < 0) {
    *err = "cannot write the lock " + path;
    return false;
  }
  return true;  // fd stays open (and locked) for the life of the process
}

uint64_t netns_inode() {
  struct stat st {};
  return ::stat("/proc/self/ns/net", &st) == 0 ? st.st_ino : 0;
}

// The socket's lock, then every port's that is visible outside the process.
bool take_locks(const ud::Config& c, std::string* err) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(c.socket).parent_path(), ec);
  std::filesystem::create_directories(c.lock_dir, ec);
  if (!take_lock(c.socket + ".lock", "the socket " + c.socket, c.socket, err)) return false;
  const uint64_t ns = netns_inode();
  for (const auto& p : c.ports) {
    const std::string id = ud::port_identity(p, ns);
    if (id.empty()) continue;
    if (!take_lock(c.lock_dir + "/" + id + ".lock", "port " + p.name + " (" + id + ")", c.socket,
                   err))
      return false;
  }
  return true;
}

RuntimeConfig runtime_config(const ud::Config& c) {
  RuntimeConfig rc;
  rc.program = "urnicd";
  rc.memory = c.memory == "huge"     ? RuntimeConfig::Memory::kHugepages
              : c.memory == "nohuge" ? RuntimeConfig::Memory::kNoHuge
                                     : RuntimeConfig::Memory::kAuto;
  rc.memory_mb = c.memory_mb;
  rc.lcores = c.lcores;
  rc.log_level = c.log_level;
  rc.file_prefix = c.file_prefix;
  for (const auto& p : c.ports) rc.pci = rc.pci || !p.pci.empty();
  return rc;
}

// The running daemon: engines, ports and adapters, in the order they are torn down.
// One engine's lcore: the engine's steps and its bridge's, napping when both are idle.
struct Lcore {
  Engine* engine = nullptr;
  ud::Bridge* bridge = nullptr;
  uint32_t idle_sleep_us = 0;
  unsigned lcore = 0;
  std::atomic<bool> stop{false};
};

int lcore_loop(void* arg) {
  auto* l = static_cast<Lcore*>(arg);
  const uint64_t sleep_after = rte_get_tsc_hz() / 1000000 * EngineConfig::kIdleSleepAfterUs;
  uint64_t quiet_since = 0;
  uint32_t nap_us = 16, idle = 0;
  while (!l->stop.load(std::memory_order_relaxed)) {
    bool busy = l->engine->run_once();
    busy |= l->bridge->poll();
    if (busy) {
      quiet_since = 0;
      nap_us = 16;
      idle = 0;
      continue;
    }
    // Idle (EngineConfig::idle_sleep_us): first yield now and then to the daemon's other
    // threads, then nap, longer the longer nothing happens.
    const uint64_t now = rte_get_tsc_cycles();
    if (quiet_since == 0) quiet_since = now;
    if (l->idle_sleep_us != 0 && now - quiet_since > sleep_after) {
      l->bridge->nap(*l->engine, std::min(nap_us, l->idle_sleep_us));
      nap_us = std::min(nap_us * 2, l->idle_sleep_us);
    } else if (++idle >= 256) {
      idle = 0;
      sched_yield();
    }
  }
  return 0;
}

struct Daemon {
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<std::unique_ptr<ud::Bridge>> bridges;
  std::vector<std::unique_ptr<Lcore>> lcores;
  std::vector<std::unique_ptr<Adapter>> adapters;
  std::vector<ud::ServedAdapter> served;

  std::vector<ud::Bridge*> bridge_ptrs() const {
    std::vector<ud::Bridge*> b;
    for (const auto& p : bridges) b.push_back(p.get());
    return b;
  }
  void stop_lcores() {
    for (auto& l : lcores) {
      l->stop.store(true, std::memory_order_relaxed);
      rte_eal_wait_lcore(l->lcore);
    }
    lcores.clear();
  }
};

using RingPairs = std::vector<std::pair<std::string, std::array<uint16_t, 2>>>;

// The port of `p`: a vdev, a PCI NIC, or one side of a ring pair (the first side seen creates
// both, `rings` remembers them for the other).
bool open_port_id(const ud::PortConfig& p, const ud::Config& c, RingPairs* rings, uint16_t* id,
                  std::string* err) {
  Status s = Status::kSuccess;
  if (!p.devargs.empty()) {
    s = open_vdev_port(p.devargs, id);
  } else if (!p.pci.empty()) {
    s = open_pci_port(p.pci, id);
  } else {
    const std::string pair = p.ring.substr(0, p.ring.size() - 2);
    auto it =
        std::find_if(rings->begin(), rings->end(), [&](const auto& r) { return r.first == pair; });
    if (it == rings->end()) {
      std::array<uint16_t, 2> ab{};
      s = create_ring_port_pair(pair, static_cast<uint16_t>(c.engines), &ab[0], &ab[1]);
      rings->emplace_back(pair, ab);
      it = rings->end() - 1;
    }
    *id = it->second[p.ring.back() == 'a' ? 0 : 1];
  }
  if (s != Status::kSuccess) *err = "[port " + p.name + "]: " + last_error();
  return s == Status::kSuccess;
}

// A ring side has no MAC of its own (net_ring reports zeros): a locally administered one from
// its IPv4 address, else from its position.
std::array<uint8_t, 6> ring_mac(const ud::PortConfig& p, size_t index) {
  const uint32_t v = p.ipv4 != 0 ? p.ipv4 : static_cast<uint32_t>(index + 1);
  return {0x02,
          0x00,
          static_cast<uint8_t>(v >> 24),
          static_cast<uint8_t>(v >> 16),
          static_cast<uint8_t>(v >> 8),
          static_cast<uint8_t>(v)};
}

bool open_ports(const ud::Config& c, Daemon* d, std::string* err) {
  const std::vector<unsigned> workers = worker_lcores();
  if (workers.size() < c.engines) {
    *err = "lcores '" + c.lcores + "' give " + std::to_string(workers.size()) +
           " worker lcores for " + std::to_string(c.engines) +
           " engines (the first lcore is the daemon's own thread), e.g. lcores = 0-" +
           std::to_string(c.engines);
    return false;
  }
  // Driven by urnicd's own lcore loop (engine steps and bridge steps), and by the main thread
  // while it waits for a synchronous request (shared_drive: one step at a time).
  EngineConfig ec;
  ec.shared_drive = true;
  for (uint32_t i = 0; i < c.engines; ++i) {
    d->engines.push_back(std::make_unique<Engine>(ec));
    d->bridges.push_back(std::make_unique<ud::Bridge>());
    if (!d->bridges.back()->make_doorbell()) {
      *err = "cannot make engine " + std::to_string(i) + "'s doorbell (memfd, eventfd)";
      return false;
    }
  }
  RingPairs rings;
  for (const auto& p : c.ports) {
    uint16_t id = 0;
    if (!open_port_id(p, c, &rings, &id, err)) return false;
    AdapterConfig ac;
    ac.port_id = id;
    ac.ipv4 = p.ipv4;
    ac.ipv6 = p.ipv6;
    ac.ipv4_prefix_len = p.ipv4_len;
    ac.ipv6_prefix_len = p.ipv6_len;
    ac.routes = p.routes;
    ac.mac = p.mac;
    if (!ac.mac && !p.ring.empty()) ac.mac = ring_mac(p, d->served.size());
    ac.mbufs = p.mbufs;
    ac.max_qps = p.max_qps;
    std::vector<Engine*> engs;
    for (uint32_t i = 0; i < p.engines; ++i) engs.push_back(d->engines[i].get());
    std::unique_ptr<Adapter> a;
    if (Status s = Adapter::open(ac, engs, &a); s != Status::kSuccess) {
      *err = "[port " + p.name + "]: Adapter::open: " + std::string(to_string(s));
      return false;
    }
    ud::ServedAdapter sa;
    ipc::set_name(sa.entry.name, p.name);
    sa.entry.ipv4 = p.ipv4;
    if (p.ipv6) std::memcpy(sa.entry.ipv6, p.ipv6->data(), 16);
    sa.entry.has_ipv6 = p.ipv6 ? 1 : 0;
    sa.entry.engines = p.engines;
    if (auto* ext = a->query_extension<AdapterExtension>(); ext != nullptr) {
      // The adapter's own: on an AF_XDP port given no address, the interface's (kernel_net).
      const LocalAddress l = ext->local_address();
      std::memcpy(sa.entry.mac, l.mac.data(), 6);
      sa.entry.ipv4 = l.ipv4;
      sa.entry.has_ipv6 = l.has_ipv6 ? 1 : 0;
      if (l.has_ipv6) std::memcpy(sa.entry.ipv6, l.ipv6.data(), 16);
    }
    if (port_mtu(id, &sa.entry.mtu) != Status::kSuccess) sa.entry.mtu = 1500;
    sa.adapter = a.get();
    d->served.push_back(sa);
    d->adapters.push_back(std::move(a));
  }
  for (uint32_t i = 0; i < c.engines; ++i) {
    auto l = std::make_unique<Lcore>();
    l->engine = d->engines[i].get();
    l->bridge = d->bridges[i].get();
    l->idle_sleep_us = c.idle_sleep_us;
    l->lcore = workers[i];
    if (rte_eal_remote_launch(lcore_loop, l.get(), workers[i]) != 0) {
      *err =
          "cannot launch engine " + std::to_string(i) + " on lcore " + std::to_string(workers[i]);
      return false;
    }
    d->lcores.push_back(std::move(l));
  }
  return true;
}

// Detaching (no --foreground): the parent waits for the child to say it is ready (one byte on
// a pipe) or to fail (the pipe closes), so that a failed start exits non-zero on the terminal.
// Before EAL: its threads would not survive a fork. Returns the pipe's write end in the child
// (-1 in the foreground); the parent never returns.
int detach_from_terminal() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("urnicd: fork");
    std::exit(1);
  }
  if (pid > 0) {
    ::close(p[1]);
    char ok = 0;
    const bool ready = ::read(p[0], &ok, 1) == 1;
    std::exit(ready ? 0 : 1);
  }
  ::close(p[0]);
  ::setsid();
  return p[1];
}

void announce_ready(int ready_fd, const ud::Config& c) {
  std::fprintf(stderr, "urnicd: ready, pid %d, %zu adapters, socket %s, telemetry -f %s\n",
               ::getpid(), c.ports.size(), c.socket.c_str(), c.file_prefix.c_str());
  if (ready_fd < 0) return;
  const char ok = 1;
  if (::write(ready_fd, &ok, 1) != 1) std::perror("urnicd: readiness pipe");
  ::close(ready_fd);
  // From here on, nothing of ours may write to the terminal the daemon left.
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::close(null);
  }
}

// The socket group by name or number; -1 (leave it) when unset.
bool socket_group(const ud::Config& c, gid_t* g, std::string* err) {
  *g = static_cast<gid_t>(-1);
  if (c.socket_group.empty()) return true;
  if (const group* gr = ::getgrnam(c.socket_group.c_str()); gr != nullptr) {
    *g = gr->gr_gid;
    return true;
  }
  char* end = nullptr;
  const unsigned long n = std::strtoul(c.socket_group.c_str(), &end, 10);
  if (*end == '\0' && end != c.socket_group.c_str() && n < 0xffffffffUL) {
    *g = static_cast<gid_t>(n);
    return true;
  }
  *err = "socket_group '" + c.socket_group + "': no such group";
  return false;
}

// daemon.device_nodes: <dir>/uverbs-<adapter> -> /dev/null for each adapter (the verbs library
// names its devices' dev_name so), made unless something is there already; returns what was
// made, for remove_device_nodes at shutdown. Failures are reported and leave the daemon running
// (only programs that look for the node, such as UCX, miss the device).
std::vector<std::string> make_device_nodes(const ud::Config& c, const Daemon& d) {
  std::vector<std::string> made;
  if (c.device_nodes.empty()) return made;
  if (::mkdir(c.device_nodes.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "urnicd: device_nodes: cannot make %s: %s\n", c.device_nodes.c_str(),
                 std::strerror(errno));
    return made;
  }
  for (const ud::ServedAdapter& a : d.served) {
    const std::string path = c.device_nodes + "/uverbs-" + a.entry.name;
    if (::symlink("/dev/null", path.c_str()) == 0) {
      made.push_back(path);
    } else if (errno != EEXIST) {
      std::fprintf(stderr, "urnicd: device_nodes: cannot make %s: %s\n", path.c_str(),
                   std::strerror(errno));
    }
  }
  return made;
}

void remove_device_nodes(const ud::Config& c, const std::vector<std::string>& made) {
  for (const std::string& p : made) (void)::unlink(p.c_str());
  if (!made.empty()) (void)::rmdir(c.device_nodes.c_str());  // when empty: another's stay
}

int start_failed(const std::string& err) {
  std::fprintf(stderr, "urnicd: %s\n", err.c_str());
  return 1;
}

// Brought up, serving, and taken down in order: clients are told first (their connections
// close: kDeviceRemoved on their next call), then the adapters close (QPs flushed, peers
// disconnected by the CM), then the engines stop.
int serve(const ud::Config& c, int ready_fd) {
  std::string err;
  gid_t group = 0;
  if (!socket_group(c, &group, &err) || !take_locks(c, &err)) return start_failed(err);
  if (runtime_init(runtime_config(c)) != Status::kSuccess)
    return start_failed(std::string("DPDK: ") + last_error());
  auto d = std::make_unique<Daemon>();
  if (!open_ports(c, d.get(), &err)) {
    d->stop_lcores();
    return start_failed(err);
  }
  ud::ServerOptions so;
  so.socket_path = c.socket;
  so.socket_mode = c.socket_mode;
  so.socket_group = group;
  so.max_clients = c.max_clients;
  so.quotas = ud::Quotas{c.quota_pds, c.quota_cqs, c.quota_qps, c.quota_mrs,
                         uint64_t{c.quota_shared_mb} << 20};
  auto server = std::make_unique<ud::Server>(so, d->served, d->bridge_ptrs());
  if (!server->listen(&err)) return start_failed(err);
  const std::vector<std::string> nodes = make_device_nodes(c, *d);
  ud::telemetry_publish(server.get());
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  const int sigfd = ::signalfd(-1, &set, SFD_CLOEXEC);
  announce_ready(ready_fd, c);
  const int sig = server->run(sigfd);
  std::fprintf(stderr, "urnicd: %s, shutting down\n", sig > 0 ? strsignal(sig) : "error");
  ud::telemetry_publish(nullptr);
  server->shutdown();  // clients' objects closed while the lcores still run their bridges
  d->stop_lcores();
  d->adapters.clear();  // QPs flushed, peers disconnected: this thread steps the engines now
  d.reset();
  remove_device_nodes(c, nodes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse_args(argc, argv, &args)) {
    usage(stderr);
    return 2;
  }
  ud::Config c;
  std::string err;
  if (!load_config(args, &c, &err)) return start_failed(err);
  if (args.check) {
    std::printf("urnicd: configuration ok: socket %s, %u engines on lcores %s, %zu ports:\n",
                c.socket.c_str(), c.engines, c.lcores.c_str(), c.ports.size());
    for (const auto& p : c.ports) {
      std::printf("  %s: %s%s%s, %u engines\n", p.name.c_str(), p.devargs.c_str(), p.pci.c_str(),
                  p.ring.empty() ? "" : ("ring " + p.ring).c_str(), p.engines);
      for (const Route& r : p.routes) std::printf("    route %s\n", to_string(r).c_str());
    }
    return 0;
  }
  // Signals are taken from a signalfd by the main loop: blocked here, before EAL starts its
  // threads (they inherit the mask), so that none of them is chosen to run a handler.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  const int ready_fd = args.foreground ? -1 : detach_from_terminal();
  return serve(c, ready_fd);
}
