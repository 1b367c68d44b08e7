// The adapters' counters on DPDK's telemetry socket (issue 14 item 5): every counter the API
// exposes (Adapter::query_counters, QpExtension::counters) under /urnic/..., readable from
// another process while traffic runs with `dpdk-telemetry.py -f urnic<pid>` (the process's EAL
// file prefix, control/eal.cc):
//
//   /urnic/adapters             the ids of the open adapters
//   /urnic/adapter,<id>         one adapter: "engines", "port" (what its engines counted on its
//                               port queues: packets, bytes, steps, drops by reason, parse
//                               errors by kind, hand-offs), "qps" (the sum over its QPs), "cm",
//                               "tx_faults", "rx_faults"
//   /urnic/engine,<id>,<i>      engine i's share of "port" (its queue)
//   /urnic/qps,<id>             the QP numbers of an adapter
//   /urnic/qp,<id>,<qpn>        one QP's counters (NAKs by syndrome, completions by status ...)
//
// The handlers run on DPDK's telemetry thread. They read the same snapshots the API returns (each
// field read once while the engine counts on), under the registry's lock, which an adapter's
// shutdown takes before anything of the adapter goes away.
#include <rte_telemetry.h>

#include <array>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "control/ndk_internal.h"

namespace urnic::detail {
namespace {

std::mutex g_mu;
std::map<uint64_t, AdapterImpl*> g_adapters;  // by id, in opening order
uint64_t g_next_id = 0;
std::once_flag g_registered;

template <class T>
struct Field {
  const char* name;
  uint64_t T::*member;
};

constexpr std::array<Field<QpCounters>, 34> kQpFields = {{
    {"tx_packets", &QpCounters::tx_packets},
    {"tx_bytes", &QpCounters::tx_bytes},
    {"rx_packets", &QpCounters::rx_packets},
    {"rx_bytes", &QpCounters::rx_bytes},
    {"retransmits", &QpCounters::retransmits},
    {"timeouts", &QpCounters::timeouts},
    {"acks_sent", &QpCounters::acks_sent},
    {"acks_received", &QpCounters::acks_received},
    {"rnr_naks_sent", &QpCounters::rnr_naks_sent},
    {"rnr_naks_received", &QpCounters::rnr_naks_received},
    {"duplicate_requests", &QpCounters::duplicate_requests},
    {"out_of_sequence", &QpCounters::out_of_sequence},
    {"implied_naks", &QpCounters::implied_naks},
    {"dropped_bad_state", &QpCounters::dropped_bad_state},
    {"dropped_stale", &QpCounters::dropped_stale},
    {"completions_ok", &QpCounters::completions_ok},
    {"completions_error", &QpCounters::completions_error},
    {"completions_flushed", &QpCounters::completions_flushed},
    {"completions_dropped", &QpCounters::completions_dropped},
    {"cq_overrun_errors", &QpCounters::cq_overrun_errors},
    {"rnr_naks_coalesced", &QpCounters::rnr_naks_coalesced},
    {"resp_queue_full", &QpCounters::resp_queue_full},
    {"ce_marked", &QpCounters::ce_marked},
    {"cnps_sent", &QpCounters::cnps_sent},
    {"cnps_received", &QpCounters::cnps_received},
    {"cc_rate_decreases", &QpCounters::cc_rate_decreases},
    {"cc_paced_mbps", &QpCounters::cc_paced_mbps},
    {"selective_retransmits", &QpCounters::selective_retransmits},
    {"ooo_held", &QpCounters::ooo_held},
    {"ooo_dropped", &QpCounters::ooo_dropped},
    {"sr_probes", &QpCounters::sr_probes},
    {"qkey_violations", &QpCounters::qkey_violations},
    {"datagrams_too_long", &QpCounters::datagrams_too_long},
    {"datagrams_no_receive", &QpCounters::datagrams_no_receive},
}};

constexpr std::array<Field<PortCounters>, 13> kPortFields = {{
    {"steps", &PortCounters::steps},
    {"busy_steps", &PortCounters::busy_steps},
    {"rx_packets", &PortCounters::rx_packets},
    {"rx_bytes", &PortCounters::rx_bytes},
    {"tx_packets", &PortCounters::tx_packets},
    {"tx_bytes", &PortCounters::tx_bytes},
    {"mbuf_alloc_failures", &PortCounters::mbuf_alloc_failures},
    {"tx_ring_full", &PortCounters::tx_ring_full},
    {"tx_kicks", &PortCounters::tx_kicks},
    {"handoffs_out", &PortCounters::handoffs_out},
    {"handoffs_in", &PortCounters::handoffs_in},
    {"looped_back", &PortCounters::looped_back},
    {"rx_drops_total", nullptr},
}};

constexpr std::array<Field<CmCounters>, 12> kCmFields = {{
    {"mads_in", &CmCounters::mads_in},
    {"mads_out", &CmCounters::mads_out},
    {"duplicates", &CmCounters::duplicates},
    {"unmatched", &CmCounters::unmatched},
    {"retransmits", &CmCounters::retransmits},
    {"timeouts", &CmCounters::timeouts},
    {"rej_sent", &CmCounters::rej_sent},
    {"rej_received", &CmCounters::rej_received},
    {"mra_sent", &CmCounters::mra_sent},
    {"mra_received", &CmCounters::mra_received},
    {"decode_errors", &CmCounters::decode_errors},
    {"mads_dropped", &CmCounters::mads_dropped},
}};

constexpr std::array<Field<FaultCounters>, 8> kFaultFields = {{
    {"seen", &FaultCounters::seen},
    {"dropped", &FaultCounters::dropped},
    {"duplicated", &FaultCounters::duplicated},
    {"reordered", &FaultCounters::reordered},
    {"corrupted", &FaultCounters::corrupted},
    {"scripted", &FaultCounters::scripted},
    {"ce_marked", &FaultCounters::ce_marked},
    {"delayed", &FaultCounters::delayed},
}};

// NAK codes (IBTA §9.7.5.2.3, table 44), the index of QpCounters::naks_*.
constexpr std::array<const char*, 4> kNakNames = {"seq_err", "invalid_request", "remote_access",
                                                  "remote_op"};

template <class T, size_t N>
void add_fields(rte_tel_data* d, const T& c, const std::array<Field<T>, N>& fields) {
  for (const Field<T>& f : fields)
    if (f.member != nullptr) rte_tel_data_add_dict_u64(d, f.name, c.*f.member);
}

// A dict that `fill` fills, as the value `name` of `d` (one level of nesting, as telemetry
// allows).
template <class Fill>
void add_group(rte_tel_data* d, const char* name, Fill fill) {
  rte_tel_data* g = rte_tel_data_alloc();
  if (g == nullptr) return;
  rte_tel_data_start_dict(g);
  fill(g);
  if (rte_tel_data_add_dict_container(d, name, g, 0) != 0) rte_tel_data_free(g);
}
// The same with `c`'s fields.
template <class T, size_t N>
void add_group(rte_tel_data* d, const char* name, const T& c,
               const std::array<Field<T>, N>& fields) {
  add_group(d, name, [&](rte_tel_data* g) { add_fields(g, c, fields); });
}

void add_qp_fields(rte_tel_data* d, const QpCounters& c) {
  add_fields(d, c, kQpFields);
  for (size_t i = 0; i < kNakNames.size(); ++i) {
    rte_tel_data_add_dict_u64(d, (std::string("naks_sent_") + kNakNames[i]).c_str(),
                              c.naks_sent[i]);
    rte_tel_data_add_dict_u64(d, (std::string("naks_received_") + kNakNames[i]).c_str(),
                              c.naks_received[i]);
  }
  // The verbs names of the statuses (to_string(WcStatus)) in snake case, as ibv_wc_status_str's.
  for (size_t i = 0; i <= static_cast<size_t>(WcStatus::kGeneralErr); ++i) {
    std::string key = std::string("completions_") + to_string(static_cast<WcStatus>(i));
    for (char& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    rte_tel_data_add_dict_u64(d, key.c_str(), c.completions_by_status[i]);
  }
}

void add_port_fields(rte_tel_data* d, const PortCounters& c) {
  add_fields(d, c, kPortFields);
  rte_tel_data_add_dict_u64(d, "rx_drops_total", c.rx_drops_total());
  for (size_t i = 0; i < static_cast<size_t>(RxDrop::kCount); ++i)
    rte_tel_data_add_dict_u64(
        d, (std::string("rx_drops_") + to_string(static_cast<RxDrop>(i))).c_str(), c.rx_drops[i]);
  for (size_t i = 1; i < kParseErrorCount; ++i)
    rte_tel_data_add_dict_u64(d, (std::string("parse_errors_") + parse_error_name(i)).c_str(),
                              c.parse_errors[i]);
}

// Parses "<a>" or "<a>,<b>" of decimal numbers; false when `params` is anything else.
bool parse_ids(const char* params, uint64_t* a, uint64_t* b) {
  if (params == nullptr || *params == '\0') return false;
  char* end = nullptr;
  *a = std::strtoull(params, &end, 10);
  if (end == params) return false;
  if (b == nullptr) return *end == '\0';
  if (*end != ',') return false;
  const char* p = end + 1;
  *b = std::strtoull(p, &end, 10);
  return end != p && *end == '\0';
}

AdapterImpl* adapter_locked(uint64_t id) {
  auto it = g_adapters.find(id);
  return it == g_adapters.end() ? nullptr : it->second;
}

int list_adapters(const char*, const char*, rte_tel_data* d) {
  std::lock_guard lk(g_mu);
  rte_tel_data_start_array(d, RTE_TEL_U64_VAL);
  for (const auto& [id, a] : g_adapters) rte_tel_data_add_array_u64(d, id);
  return 0;
}

int adapter_info(const char*, const char* params, rte_tel_data* d) {
  uint64_t id = 0;
  if (!parse_ids(params, &id, nullptr)) return -EINVAL;
  std::lock_guard lk(g_mu);
  AdapterImpl* a = adapter_locked(id);
  if (a == nullptr) return -ENODEV;
  AdapterCounters c;
  if (a->pub->query_counters(&c) != Status::kSuccess) return -EIO;
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "port_id", a->ctl->port().id());
  rte_tel_data_add_dict_u64(d, "engines", c.engines);
  add_group(d, "port", [&](rte_tel_data* g) { add_port_fields(g, c.port); });
  add_group(d, "qps", [&](rte_tel_data* g) { add_qp_fields(g, c.qps); });
  add_group(d, "cm", c.cm, kCmFields);
  add_group(d, "tx_faults", c.tx_faults, kFaultFields);
  add_group(d, "rx_faults", c.rx_faults, kFaultFields);
  return 0;
}

int engine_info(const char*, const char* params, rte_tel_data* d) {
  uint64_t id = 0, e = 0;
  if (!parse_ids(params, &id, &e)) return -EINVAL;
  std::lock_guard lk(g_mu);
  AdapterImpl* a = adapter_locked(id);
  if (a == nullptr) return -ENODEV;
  PortCounters c;
  if (e > UINT32_MAX ||
      a->pub->query_engine_counters(static_cast<uint32_t>(e), &c) != Status::kSuccess)
    return -ENOENT;
  rte_tel_data_start_dict(d);
  add_port_fields(d, c);
  return 0;
}

// Calls f(qpn, qp) for each live QP of `a` (a->mu held).
template <class F>
void for_each_qp(AdapterImpl* a, F&& f) {
  std::lock_guard lk(a->mu);
  for (const ObjectImpl* o : a->objects)
    if (o->type == ObjectType::kQp) {
      const auto* q = static_cast<const QpImpl*>(o);
      f(q->qp.qpn(), *q);
    }
}

int list_qps(const char*, const char* params, rte_tel_data* d) {
  uint64_t id = 0;
  if (!parse_ids(params, &id, nullptr)) return -EINVAL;
  std::lock_guard lk(g_mu);
  AdapterImpl* a = adapter_locked(id);
  if (a == nullptr) return -ENODEV;
  rte_tel_data_start_array(d, RTE_TEL_U64_VAL);
  for_each_qp(a, [&](uint32_t qpn, const QpImpl&) { rte_tel_data_add_array_u64(d, qpn); });
  return 0;
}

int qp_info(const char*, const char* params, rte_tel_data* d) {
  uint64_t id = 0, qpn = 0;
  if (!parse_ids(params, &id, &qpn)) return -EINVAL;
  std::lock_guard lk(g_mu);
  AdapterImpl* a = adapter_locked(id);
  if (a == nullptr) return -ENODEV;
  bool found = false;
  for_each_qp(a, [&](uint32_t n, const QpImpl& q) {
    if (n != qpn || found) return;
    found = true;
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_string(d, "state", to_string(q.qp.public_state()));
    rte_tel_data_add_dict_string(d, "service", q.qp.config().ud ? "UD" : "RC");
    add_qp_fields(d, q.qp.counters());
  });
  return found ? 0 : -ENOENT;
}

void register_commands() {
  rte_telemetry_register_cmd("/urnic/adapters", list_adapters,
                             "The ids of the open urnic adapters. No parameters");
  rte_telemetry_register_cmd("/urnic/adapter", adapter_info,
                             "An adapter's port, QP-sum, CM and fault counters. Parameters: id");
  rte_telemetry_register_cmd("/urnic/engine", engine_info,
                             "One engine's share of an adapter's port counters (its queue). "
                             "Parameters: adapter id,engine index");
  rte_telemetry_register_cmd("/urnic/qps", list_qps,
                             "The QP numbers of an adapter. Parameters: adapter id");
  rte_telemetry_register_cmd("/urnic/qp", qp_info,
                             "One QP's state and counters. Parameters: adapter id,QP number");
}

}  // namespace

uint64_t telemetry_add(AdapterImpl* a) {
  std::call_once(g_registered, register_commands);
  std::lock_guard lk(g_mu);
  g_adapters[g_next_id] = a;
  return g_next_id++;
}

void telemetry_remove(AdapterImpl* a) noexcept {
  std::lock_guard lk(g_mu);
  for (auto it = g_adapters.begin(); it != g_adapters.end(); ++it) {
    if (it->second == a) {
      g_adapters.erase(it);
      return;
    }
  }
}

}  // namespace urnic::detail
