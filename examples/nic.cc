#include "examples/nic.h"

#include <arpa/inet.h>
#include <sched.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string_view>
#include <thread>

namespace urnic::tools {

const char* nic_usage() {
  return "  --vdev=DEVARGS      DPDK device (e.g. net_af_packet0,iface=vdpdk0), required\n"
         "  --ip=A.B.C.D        the adapter's IPv4 address (GID ::ffff:A.B.C.D), required\n"
         "  --mac=XX:..:XX      MAC address (default: the port's)\n"
         "  --lcores=LIST       EAL lcores (default 0-1; the engine runs on the second)\n"
         "  --huge              EAL on hugepages\n"
         "  --tx-loss-ppm=N     drop N ppm of urnic's RoCEv2 frames (fault injector)\n"
         "  --loss-seed=S       seed of the fault injector\n"
         "  --tx-drop=OP:N      drop the Nth frame with BTH opcode OP (hex) urnic sends\n";
}

bool take_nic_options(int* argc, char** argv, NicOptions* o) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    std::string_view a(argv[i]);
    auto val = [&](std::string_view name) -> std::optional<std::string_view> {
      if (a.rfind(name, 0) == 0 && a.size() > name.size() && a[name.size()] == '=')
        return a.substr(name.size() + 1);
      return std::nullopt;
    };
    if (a == "--") {
      for (; i < *argc; ++i) argv[out++] = argv[i];
      break;
    }
    if (auto v = val("--vdev")) {
      o->vdev = *v;
    } else if (auto v2 = val("--ip")) {
      in_addr ip{};
      if (::inet_pton(AF_INET, std::string(*v2).c_str(), &ip) != 1) {
        std::fprintf(stderr, "bad --ip %s\n", std::string(*v2).c_str());
        return false;
      }
      o->ipv4 = ntohl(ip.s_addr);
    } else if (auto v3 = val("--mac")) {
      std::array<uint8_t, 6> m{};
      if (parse_mac(*v3, &m) != Status::kSuccess) {
        std::fprintf(stderr, "bad --mac\n");
        return false;
      }
      o->mac = m;
    } else if (auto v4 = val("--lcores")) {
      o->lcores = *v4;
    } else if (a == "--huge") {
      o->huge = true;
    } else if (auto v5 = val("--tx-loss-ppm")) {
      o->tx_loss_ppm = static_cast<uint32_t>(std::stoul(std::string(*v5)));
    } else if (auto v6 = val("--loss-seed")) {
      o->loss_seed = std::stoull(std::string(*v6));
    } else if (auto v7 = val("--tx-drop")) {
      unsigned op = 0, nth = 0;
      if (std::sscanf(std::string(*v7).c_str(), "%x:%u", &op, &nth) != 2 || op > 0xFF || nth == 0) {
        std::fprintf(stderr, "bad --tx-drop (OP:N, OP in hex)\n");
        return false;
      }
      o->tx_drops.emplace_back(static_cast<uint16_t>(op), nth);
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  argv[out] = nullptr;
  if (o->vdev.empty() || o->ipv4 == 0) {
    std::fprintf(stderr, "--vdev and --ip are required\n");
    return false;
  }
  return true;
}

std::string gid_string(const Gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, gid.data(), buf, sizeof(buf));
  return buf;
}

EngineConfig Nic::engine_config() {
  EngineConfig c;
  // The engine shares a small machine with the application, the control thread and (in the
  // interop tests) an emulated peer: it yields when idle.
  c.idle_yield_after = 1024;
  return c;
}

Nic::~Nic() {
  pd_.reset();
  adapter_.reset();
  engine_.stop();
}

Status Nic::open(const NicOptions& opts) {
  opts_ = opts;
  RuntimeConfig rc;
  rc.program = "urnic-tool";
  rc.memory = opts.huge ? RuntimeConfig::Memory::kHugepages : RuntimeConfig::Memory::kNoHuge;
  rc.lcores = opts.lcores;
  if (Status s = runtime_init(rc); s != Status::kSuccess) {
    std::fprintf(stderr, "urnic: EAL init failed: %s\n", last_error());
    return s;
  }
  uint16_t port = 0;
  if (Status s = open_vdev_port(opts.vdev, &port); s != Status::kSuccess) {
    std::fprintf(stderr, "urnic: %s\n", last_error());
    return s;
  }
  AdapterConfig ac;
  ac.port_id = port;
  ac.mbufs = 8191;
  ac.ipv4 = opts.ipv4;
  ac.mac = opts.mac;
  ac.cm = opts.cm;
  ac.tx_faults.drop_ppm = opts.tx_loss_ppm;
  ac.tx_faults.seed = opts.loss_seed;
  for (const auto& [op, nth] : opts.tx_drops)
    ac.tx_faults.add_rule(op, nth, FaultConfig::Action::kDrop);
  if (Status s = Adapter::open(ac, engine_, &adapter_); s != Status::kSuccess) {
    std::fprintf(
        stderr, "urnic: adapter open failed: %s%s\n", std::string(to_string(s)).c_str(),
        s == Status::kNotSupported ? " (fault injection needs a URNIC_TESTING build)" : "");
    return s;
  }
  if (Status s = adapter_->create_pd(nullptr, nullptr, &pd_); s != Status::kSuccess) {
    std::fprintf(stderr, "urnic: cannot create a PD: %s\n", std::string(to_string(s)).c_str());
    return s;
  }
  // The first worker lcore.
  const auto workers = worker_lcores();
  if (workers.empty() || !engine_.launch(workers.front())) {
    std::fprintf(stderr, "urnic: no second lcore for the engine (--lcores=%s)\n",
                 opts.lcores.c_str());
    return Status::kInsufficientResources;
  }
  return Status::kSuccess;
}

Gid Nic::gid() const {
  const uint32_t a = opts_.ipv4;
  return Gid{0,
             0,
             0,
             0,
             0,
             0,
             0,
             0,
             0,
             0,
             0xFF,
             0xFF,
             static_cast<uint8_t>(a >> 24),
             static_cast<uint8_t>(a >> 16),
             static_cast<uint8_t>(a >> 8),
             static_cast<uint8_t>(a)};
}

std::string Nic::counters_line() {
  AdapterCounters c;
  (void)adapter_->query_counters(&c);
  const QpCounters& q = c.qps;
  auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  char buf[512];
  std::snprintf(
      buf, sizeof(buf),
      "urnic: tx_packets=%llu rx_packets=%llu retransmits=%llu timeouts=%llu "
      "duplicates=%llu out_of_sequence=%llu naks_sent=%llu naks_received=%llu "
      "rnr_naks_received=%llu rx_drops=%llu faults_dropped=%llu",
      u(q.tx_packets), u(q.rx_packets), u(q.retransmits), u(q.timeouts), u(q.duplicate_requests),
      u(q.out_of_sequence), u(q.naks_sent[0] + q.naks_sent[1] + q.naks_sent[2] + q.naks_sent[3]),
      u(q.naks_received[0] + q.naks_received[1] + q.naks_received[2] + q.naks_received[3]),
      u(q.rnr_naks_received), u(c.port.rx_drops_total()), u(c.tx_faults.dropped));
  return buf;
}

void Nic::print_counters() {
  std::printf("%s\n", counters_line().c_str());
  std::fflush(stdout);
}

void Done::on_request(void* ctx, Status s) noexcept {
  auto* d = static_cast<Done*>(ctx);
  std::lock_guard lk(d->mu_);
  d->status_ = s;
  d->cv_.notify_all();
}

void Done::on_event(void* ctx) noexcept { on_request(ctx, Status::kSuccess); }

std::optional<Status> Done::wait(std::chrono::milliseconds t) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, t, [&] { return status_.has_value(); });
  return status_;
}

bool Done::done() {
  std::lock_guard lk(mu_);
  return status_.has_value();
}

Status register_buffer(Pd& pd, void* p, size_t n, uint32_t flags, Handle<Mr>* mr, uint32_t* token) {
  if (Status s = pd.create_mr(false, nullptr, nullptr, mr); s != Status::kSuccess) return s;
  if (Status s = (*mr)->register_mr(p, n, flags, nullptr, nullptr); s != Status::kSuccess) return s;
  *token = (*mr)->get_local_token();
  return Status::kSuccess;
}

Status FirstRequest::listen(Adapter& adapter, uint16_t port) {
  if (Status s =
          create_listener(adapter, &FirstRequest::on_connect, this, nullptr, nullptr, &listener_);
      s != Status::kSuccess)
    return s;
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_port = htons(port);
  return listener_->listen(reinterpret_cast<const sockaddr*>(&any), sizeof(any), nullptr, nullptr);
}

void FirstRequest::on_connect(void* ctx, Connector* c) noexcept {
  auto* self = static_cast<FirstRequest*>(ctx);
  Connector* none = nullptr;
  if (!self->first_.compare_exchange_strong(none, c)) {  // one connection only
    (void)c->reject(nullptr, 0);
    (void)c->close();
    return;
  }
  Done::on_request(&self->arrived_, Status::kSuccess);
}

Handle<Connector> FirstRequest::wait(std::chrono::milliseconds t) {
  if (!arrived_.wait(t)) return {};
  return Handle<Connector>(first_.load());
}

Status connect_retry(Adapter& adapter, Qp& qp, const sockaddr_in& dst,
                     std::span<const uint8_t> private_data, std::chrono::milliseconds patience,
                     Handle<Connector>* conn) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    if (Status s = create_connector(adapter, nullptr, nullptr, conn); s != Status::kSuccess)
      return s;
    Done connected;
    const Status s =
        (*conn)->connect(qp, nullptr, 0, reinterpret_cast<const sockaddr*>(&dst), sizeof(dst), 1, 1,
                         private_data.data(), static_cast<uint32_t>(private_data.size()),
                         &Done::on_request, &connected);
    if (s != Status::kPending) return s;
    const std::optional<Status> r = connected.wait(patience);
    if (!r) return Status::kIoTimeout;
    if (*r == Status::kSuccess) return Status::kSuccess;
    if ((*r != Status::kConnectionRefused && *r != Status::kHostUnreachable) ||
        std::chrono::steady_clock::now() >= deadline)
      return *r;
    conn->reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the peer is still starting
  }
}

size_t poll_cq(Cq& cq, std::vector<ResultEx>& out, size_t want, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ResultEx r[32];
  uint32_t idle = 0;
  while (out.size() < want) {
    const size_t n = cq.get_results_ex(r);
    if (n != 0) {
      out.insert(out.end(), r, r + n);
      idle = 0;
      continue;
    }
    if (++idle >= 256) {
      idle = 0;
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::yield();
    }
  }
  return out.size();
}

}  // namespace urnic::tools
