// Incast through the software switch (incast.h).
#include "switch/incast.h"

#include <rte_cycles.h>

#include <cstring>
#include <memory>

#include "urnic/urnic.h"

namespace urnic::sw {
namespace {

constexpr uint32_t kReceiverIp = 0x0A000064;  // 10.0.0.100
constexpr uint32_t kSenderIp = 0x0A000001;    // 10.0.0.1 + i

struct Host {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Adapter> adapter;
  Handle<Pd> pd;
  Handle<Cq> cq;
  std::vector<Handle<Qp>> qps;
  Handle<Mr> mr;
  std::vector<uint8_t> mem;
  std::array<uint8_t, 6> mac{};
  uint32_t ip = 0;
  ~Host() {
    // Objects before their adapter, the adapter before its engine.
    qps.clear();
    mr.reset();
    cq.reset();
    pd.reset();
    adapter.reset();
    engine.reset();
  }
};

class Incast {
 public:
  explicit Incast(const IncastConfig& cfg) : cfg_(cfg) {}
  // The switch goes first: its queues hold the hosts' mbufs, which must return to their pools
  // while those exist (run() quiesced the traffic, so nothing is left in flight elsewhere).
  ~Incast() { sw_.reset(); }
  IncastResult run();

 private:
  bool open_host(Host& h, uint32_t index, uint32_t ip, size_t mem, uint32_t qps);
  bool connect(uint32_t i);
  bool post(uint32_t i);
  bool poll(uint32_t i, std::vector<uint64_t>& bytes);
  bool quiesce();
  void sample(double t, std::vector<uint64_t>& since);
  bool fail(const std::string& what, Status s = Status::kSuccess) {
    if (r_.error.empty())
      r_.error = s == Status::kSuccess ? what : what + ": " + std::string(to_string(s));
    return false;
  }

  IncastConfig cfg_;
  IncastResult r_;
  bool reposting_ = true;
  std::vector<uint32_t> in_flight_;  // WRITEs posted and not completed, per sender
  std::unique_ptr<SoftSwitch> sw_;
  Host recv_;
  std::vector<std::unique_ptr<Host>> send_;
};

bool Incast::open_host(Host& h, uint32_t index, uint32_t ip, size_t mem, uint32_t qps) {
  uint16_t host_port = 0, sw_port = 0;
  const std::string ring = cfg_.name + std::to_string(index);
  if (Status s = create_ring_port_pair(ring, 1, &host_port, &sw_port); s != Status::kSuccess)
    return fail("create_ring_port_pair " + ring, s);
  if (sw_->add_port(sw_port) < 0) return fail("the switch could not start port " + ring);
  h.engine = std::make_unique<Engine>();
  h.mac = {2, 0, 0, 0, 0, static_cast<uint8_t>(index + 1)};
  h.ip = ip;
  AdapterConfig ac;
  ac.port_id = host_port;
  ac.ipv4 = ip;
  ac.mac = h.mac;
  ac.mbufs = 8191;
  ac.congestion = cfg_.congestion;
  if (Status s = Adapter::open(ac, *h.engine, &h.adapter); s != Status::kSuccess)
    return fail("Adapter::open", s);
  h.mem.assign(mem, 0);
  const uint32_t depth = cfg_.outstanding * qps + 16;
  if (Status s = h.adapter->create_pd(nullptr, nullptr, &h.pd); s != Status::kSuccess)
    return fail("create_pd", s);
  if (Status s = h.adapter->create_cq(depth, nullptr, nullptr, nullptr, nullptr, &h.cq);
      s != Status::kSuccess)
    return fail("create_cq", s);
  if (Status s = h.pd->create_mr(false, nullptr, nullptr, &h.mr); s != Status::kSuccess)
    return fail("create_mr", s);
  if (Status s = h.mr->register_mr(h.mem.data(), h.mem.size(), mr_flag::kAllowRemoteWrite, nullptr,
                                   nullptr);
      s != Status::kSuccess)
    return fail("register_mr", s);
  for (uint32_t q = 0; q < qps; ++q) {
    Handle<Qp> qp;
    if (Status s = h.pd->create_qp(*h.cq, *h.cq, nullptr, 4, cfg_.outstanding + 1, 1, 1, 0, nullptr,
                                   nullptr, &qp);
        s != Status::kSuccess)
      return fail("create_qp", s);
    h.qps.push_back(std::move(qp));
  }
  return true;
}

// Sender i's QP and the receiver's QP i, towards each other (manual connect).
bool Incast::connect(uint32_t i) {
  Qp* ends[2] = {send_[i]->qps[0].get(), recv_.qps[i].get()};
  const Host* hosts[2] = {send_[i].get(), &recv_};
  for (int e = 0; e < 2; ++e) {
    auto* ext = ends[e]->query_extension<QpConnectExtension>();
    auto* peer = ends[1 - e]->query_extension<QpConnectExtension>();
    if (ext == nullptr || peer == nullptr) return fail("QpConnectExtension missing");
    using namespace qp_attr_mask;
    QpAttributes a;
    a.state = QpState::kInit;
    if (Status s = ext->modify(a, kState | kAccessFlags, nullptr, nullptr); s != Status::kSuccess)
      return fail("modify INIT", s);
    a.state = QpState::kRtr;
    a.av.dst_ipv4 = hosts[1 - e]->ip;
    a.av.dst_mac = hosts[1 - e]->mac;
    a.path_mtu = cfg_.mtu;
    a.dest_qpn = peer->qpn();
    a.rq_psn = 0x100;
    a.min_rnr_timer = 1;
    if (Status s = ext->modify(
            a, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMinRnrTimer | kMaxDestRdAtomic,
            nullptr, nullptr);
        s != Status::kSuccess)
      return fail("modify RTR", s);
    a.state = QpState::kRts;
    a.sq_psn = 0x100;
    if (Status s = ext->modify(a, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic,
                               nullptr, nullptr);
        s != Status::kSuccess)
      return fail("modify RTS", s);
  }
  return true;
}

bool Incast::post(uint32_t i) {
  Host& h = *send_[i];
  const Sge sge{reinterpret_cast<uint64_t>(h.mem.data()), cfg_.message, h.mr->get_local_token()};
  const uint64_t dst = reinterpret_cast<uint64_t>(recv_.mem.data()) + uint64_t{i} * cfg_.message;
  if (Status s = h.qps[0]->write(nullptr, {&sge, 1}, dst, recv_.mr->get_remote_token(), 0);
      s != Status::kSuccess)
    return fail("Qp::write", s);
  ++in_flight_[i];
  return true;
}

bool Incast::poll(uint32_t i, std::vector<uint64_t>& bytes) {
  ResultEx r[16];
  const size_t n = send_[i]->cq->get_results_ex(r);
  for (size_t k = 0; k < n; ++k) {
    if (r[k].status != Status::kSuccess) {
      r_.transport_failed = true;
      return fail("sender " + std::to_string(i) + ": a WRITE completed with", r[k].status);
    }
    bytes[i] += cfg_.message;
    --in_flight_[i];
    if (reposting_ && !post(i)) return false;
  }
  return true;
}

void Incast::sample(double t, std::vector<uint64_t>& since) {
  IncastResult::Sample s;
  s.t = t;
  for (uint32_t i = 0; i < cfg_.senders; ++i) {
    const QpCounters c = send_[i]->qps[0]->query_extension<QpExtension>()->counters();
    const uint32_t max = cfg_.congestion.dcqcn.max_rate_mbps;
    s.rate_mbps.push_back(c.cc_paced_mbps != 0 ? static_cast<double>(c.cc_paced_mbps)
                                               : static_cast<double>(max != 0 ? max : 10'000));
    s.goodput_mbps.push_back(static_cast<double>(since[i]) * 8 / cfg_.sample_s / 1e6);
    since[i] = 0;
  }
  r_.trace.push_back(std::move(s));
}

// Stops reposting and runs until every WRITE completed and the switch is empty (10 s at most).
bool Incast::quiesce() {
  reposting_ = false;
  std::vector<uint64_t> ignored(cfg_.senders, 0);
  const uint64_t deadline = rte_get_tsc_cycles() + 10 * rte_get_tsc_hz();
  for (;;) {
    const uint64_t now = rte_get_tsc_cycles();
    recv_.engine->run_once();
    for (auto& h : send_) h->engine->run_once();
    sw_->step(now);
    bool busy = false;
    for (uint32_t i = 0; i < cfg_.senders; ++i) {
      if (!poll(i, ignored)) return false;
      busy |= in_flight_[i] != 0;
    }
    for (uint32_t p = 0; p < sw_->ports(); ++p) busy |= sw_->queued_bytes(p) != 0;
    if (!busy) return true;
    if (now > deadline) return fail("the WRITEs in flight did not complete within 10 s");
  }
}

IncastResult Incast::run() {
  sw_ = std::make_unique<SoftSwitch>(cfg_.fabric);
  in_flight_.assign(cfg_.senders, 0);
  if (!open_host(recv_, 0, kReceiverIp, size_t{cfg_.message} * cfg_.senders, cfg_.senders))
    return r_;
  for (uint32_t i = 0; i < cfg_.senders; ++i) {
    send_.push_back(std::make_unique<Host>());
    if (!open_host(*send_.back(), i + 1, kSenderIp + i, cfg_.message, 1)) return r_;
    for (uint32_t b = 0; b < cfg_.message; ++b)
      send_.back()->mem[b] = static_cast<uint8_t>(b * 13 + i * 29 + 1);
    if (!connect(i)) return r_;
  }
  for (uint32_t i = 0; i < cfg_.senders; ++i)
    for (uint32_t k = 0; k < cfg_.outstanding; ++k)
      if (!post(i)) return r_;

  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t start = rte_get_tsc_cycles();
  const auto at = [&](double s) {
    return start + static_cast<uint64_t>(s * static_cast<double>(hz));
  };
  const uint64_t measure = at(cfg_.warmup_s);
  std::vector<uint64_t> win(cfg_.senders, 0), since(cfg_.senders, 0);
  DepthHistogram depth0{};
  uint64_t drops0 = 0, marks0 = 0;
  uint32_t next_window = 0;
  double next_sample = cfg_.sample_s;
  const auto drops_now = [&] { return sw_->counters(0).tail_drops + sw_->counters(0).red_drops; };
  for (uint64_t now = start;; now = rte_get_tsc_cycles()) {
    recv_.engine->run_once();
    for (auto& s : send_) s->engine->run_once();
    sw_->step(now);
    for (uint32_t i = 0; i < cfg_.senders; ++i) {
      const uint64_t before = win[i];
      if (!poll(i, win)) return r_;
      since[i] += win[i] - before;
    }
    const double t = static_cast<double>(now - start) / static_cast<double>(hz);
    if (t >= next_sample) {
      sample(t, since);
      next_sample += cfg_.sample_s;
    }
    if (now < measure) {
      win.assign(cfg_.senders, 0);
      depth0 = sw_->depth(0);
      drops0 = drops_now();
      marks0 = sw_->counters(0).ce_marked;
      continue;
    }
    if (now < at(cfg_.warmup_s + cfg_.window_s * (next_window + 1))) continue;
    IncastWindow w;
    for (uint32_t i = 0; i < cfg_.senders; ++i) {
      w.goodput_mbps.push_back(static_cast<double>(win[i]) * 8 / cfg_.window_s / 1e6);
      w.aggregate_mbps += w.goodput_mbps.back();
    }
    w.jain = jain_index(w.goodput_mbps);
    w.drops = drops_now() - drops0 - r_.drops_measured;
    w.marks = sw_->counters(0).ce_marked - marks0;
    marks0 = sw_->counters(0).ce_marked;
    r_.drops_measured += w.drops;
    r_.windows.push_back(std::move(w));
    win.assign(cfg_.senders, 0);
    if (++next_window == cfg_.windows) break;
  }
  if (!quiesce()) return r_;
  DepthHistogram d{};
  const DepthHistogram& all = sw_->depth(0);
  for (uint32_t b = 0; b < DepthHistogram::kBuckets; ++b)
    d.count[b] = all.count[b] - depth0.count[b];
  d.total = all.total - depth0.total;
  r_.depth_p50 = d.quantile(0.5);
  r_.depth_p99 = d.quantile(0.99);
  r_.depth_max = sw_->counters(0).max_depth;
  r_.drops_total = drops_now();
  for (uint32_t i = 0; i < cfg_.senders; ++i) {
    const QpCounters s = send_[i]->qps[0]->query_extension<QpExtension>()->counters();
    const QpCounters q = recv_.qps[i]->query_extension<QpExtension>()->counters();
    r_.cnps_received += s.cnps_received;
    r_.retransmits += s.retransmits;
    r_.cnps_sent += q.cnps_sent;
  }
  // Every WRITE a sender made carried the same bytes to the same place, and all have completed:
  // the receiver's window i holds sender i's pattern.
  r_.data_ok = true;
  for (uint32_t i = 0; i < cfg_.senders; ++i)
    r_.data_ok &= std::memcmp(recv_.mem.data() + size_t{i} * cfg_.message, send_[i]->mem.data(),
                              cfg_.message) == 0;
  return r_;
}

}  // namespace

double jain_index(const std::vector<double>& x) {
  double sum = 0, sq = 0;
  for (double v : x) {
    sum += v;
    sq += v * v;
  }
  return sq == 0 ? 0 : sum * sum / (static_cast<double>(x.size()) * sq);
}

IncastResult run_incast(const IncastConfig& cfg) { return Incast(cfg).run(); }

}  // namespace urnic::sw
