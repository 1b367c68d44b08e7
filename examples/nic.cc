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

#include "control/eal.h"
#include "urnic/config.h"

namespace urnic::tools {
namespace {

bool parse_mac(std::string_view s, wire::MacAddr* mac) {
  unsigned v[6];
  if (std::sscanf(std::string(s).c_str(), "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4],
                  &v[5]) != 6)
    return false;
  for (int i = 0; i < 6; ++i) (*mac)[i] = static_cast<uint8_t>(v[i]);
  return true;
}

// net_af_packet's default ring slots (2048 bytes) cannot hold a 4096-byte-MTU RoCEv2 frame: unless
// the devargs say otherwise, use the geometry of tests/loopback/port_vdev_test.cc. A slot holds
// dp::kMaxFrameLen + 66 bytes of TPACKET_V2 header room, rounded up to 4352 (17 x 256); blocks
// are whole pages holding whole slots (lcm with the page size); 512 slots.
std::string with_af_packet_geometry(const std::string& vdev) {
  if (vdev.rfind("net_af_packet", 0) != 0 || vdev.find("framesz=") != std::string::npos)
    return vdev;
  constexpr uint32_t kFrame = 4352;
  const uint32_t block = std::lcm(kFrame, static_cast<uint32_t>(::getpagesize()));
  const uint32_t per_block = block / kFrame;
  const uint32_t frames = (512 + per_block - 1) / per_block * per_block;
  std::string s = vdev;
  if (s.find("qpairs=") == std::string::npos) s += ",qpairs=1";
  return s + ",framesz=" + std::to_string(kFrame) + ",blocksz=" + std::to_string(block) +
         ",framecnt=" + std::to_string(frames);
}

}  // namespace

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
      wire::MacAddr m{};
      if (!parse_mac(*v3, &m)) {
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

std::string gid_string(const wire::Ipv6Addr& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, gid.data(), buf, sizeof(buf));
  return buf;
}

dp::EngineConfig Nic::engine_config() {
  dp::EngineConfig c;
  // The engine shares a small machine with the application, the control thread and (in the
  // interop tests) an emulated peer: it yields when idle.
  c.idle_yield_after = 1024;
  return c;
}

Nic::~Nic() {
  engine_.stop();
  adapter_.reset();
}

Status Nic::open(const NicOptions& opts) {
  opts_ = opts;
  ctl::EalOptions eo;
  eo.program = "urnic-tool";
  eo.memory = opts.huge ? ctl::EalOptions::Memory::kHuge : ctl::EalOptions::Memory::kNoHuge;
  eo.lcores = opts.lcores;
  if (Status s = ctl::eal_init(eo); s != Status::kSuccess) {
    std::fprintf(stderr, "urnic: EAL init failed: %s\n", std::string(to_string(s)).c_str());
    return s;
  }
  uint16_t port = 0;
  const std::string devargs = with_af_packet_geometry(opts.vdev);
  if (Status s = ctl::probe_vdev(devargs, &port); s != Status::kSuccess) {
    std::fprintf(stderr, "urnic: cannot probe %s\n", devargs.c_str());
    return s;
  }
  ctl::AdapterConfig ac;
  ac.port_id = port;
  ac.port.mbufs = 8191;
  ac.ipv4 = opts.ipv4;
  ac.mac = opts.mac;
  if (Status s = ctl::Adapter::open(ac, &engine_, &adapter_); s != Status::kSuccess) {
    std::fprintf(stderr, "urnic: adapter open failed: %s\n", std::string(to_string(s)).c_str());
    return s;
  }
  if (opts.tx_loss_ppm != 0 || !opts.tx_drops.empty()) {
    if (!kTesting) {
      std::fprintf(stderr, "urnic: fault injection needs a URNIC_TESTING build\n");
      return Status::kNotSupported;
    }
    dp::FaultConfig fc;
    fc.drop_ppm = opts.tx_loss_ppm;
    fc.seed = opts.loss_seed;
    for (const auto& [op, nth] : opts.tx_drops)
      fc.add_rule(op, nth, dp::FaultConfig::Action::kDrop);
    tx_fault_ = std::make_unique<dp::FaultInjector>(fc);
    adapter_->endpoint().set_faults(nullptr, tx_fault_.get());
  }
  pd_ = adapter_->alloc_pd();
  // The first lcore after the main one.
  const unsigned lcore = rte_get_next_lcore(rte_get_main_lcore(), 1, 0);
  if (lcore >= RTE_MAX_LCORE || !engine_.launch(lcore)) {
    std::fprintf(stderr, "urnic: no second lcore for the engine (--lcores=%s)\n",
                 opts.lcores.c_str());
    return Status::kInsufficientResources;
  }
  return Status::kSuccess;
}

wire::Ipv6Addr Nic::gid() const { return ctl::gid_from_ipv4(opts_.ipv4); }

std::string Nic::counters_line() {
  const dp::QpCounters q = adapter_->qp_counter_totals();
  const dp::EngineCounters& e = adapter_->endpoint_counters();
  uint64_t drops = 0;
  for (uint64_t d : e.rx_drops) drops += d;
  char buf[512];
  std::snprintf(
      buf, sizeof(buf),
      "urnic: tx_packets=%llu rx_packets=%llu retransmits=%llu timeouts=%llu "
      "duplicates=%llu out_of_sequence=%llu naks_sent=%llu naks_received=%llu "
      "rnr_naks_received=%llu rx_drops=%llu faults_dropped=%llu",
      static_cast<unsigned long long>(q.tx_packets), static_cast<unsigned long long>(q.rx_packets),
      static_cast<unsigned long long>(q.retransmits), static_cast<unsigned long long>(q.timeouts),
      static_cast<unsigned long long>(q.duplicate_requests),
      static_cast<unsigned long long>(q.out_of_sequence),
      static_cast<unsigned long long>(q.naks_sent[0] + q.naks_sent[1] + q.naks_sent[2] +
                                      q.naks_sent[3]),
      static_cast<unsigned long long>(q.naks_received[0] + q.naks_received[1] + q.naks_received[2] +
                                      q.naks_received[3]),
      static_cast<unsigned long long>(q.rnr_naks_received), static_cast<unsigned long long>(drops),
      static_cast<unsigned long long>(tx_fault_ ? tx_fault_->counters().dropped : 0));
  return buf;
}

size_t poll_cq(dp::Cq& cq, std::vector<ResultEx>& out, size_t want,
               std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ResultEx r[32];
  uint32_t idle = 0;
  while (out.size() < want) {
    const size_t n = cq.poll(r);
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
