// The rest of libibverbs' public surface: strings, rate conversions, fork support, the kernel
// ABI copy helpers librdmacm uses, and the verbs urnic does not offer (each failing with the
// errno rdma-core documents for an unsupported verb).
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include <cstring>
#include <iterator>

#include "verbs/internal.h"

using namespace urnic::verbs;

namespace {

template <size_t N>
const char* pick(const char* const (&names)[N], unsigned i) {
  return i < N ? names[i] : "unknown";
}

// (rate enum, multiple of 2.5 Gb/s, Mb/s), IBTA §9.7.6.1 / the enum ibv_rate values.
struct Rate {
  ibv_rate rate;
  int mult;
  int mbps;
};
constexpr Rate kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},     {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},     {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},    {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},  {IBV_RATE_14_GBPS, 5, 14062},
    {IBV_RATE_56_GBPS, 22, 56250},    {IBV_RATE_112_GBPS, 45, 112500},
    {IBV_RATE_168_GBPS, 67, 168750},  {IBV_RATE_25_GBPS, 10, 25781},
    {IBV_RATE_100_GBPS, 40, 103125},  {IBV_RATE_200_GBPS, 80, 206250},
    {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},    {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},
};

}  // namespace

extern "C" {

static_assert(static_cast<int>(urnic::WcStatus::kSuccess) == IBV_WC_SUCCESS &&
              static_cast<int>(urnic::WcStatus::kWrFlushErr) == IBV_WC_WR_FLUSH_ERR &&
              static_cast<int>(urnic::WcStatus::kRemAbortErr) == IBV_WC_REM_ABORT_ERR &&
              static_cast<int>(urnic::WcStatus::kGeneralErr) == IBV_WC_GENERAL_ERR);

const char* ibv_wc_status_str(ibv_wc_status s) {
  // The statuses urnic completes with are the public API's (WcStatus numbers them as verbs
  // does), named from its one table; then the tag-matching ones no urnic completion has.
  if (s <= IBV_WC_GENERAL_ERR) return urnic::describe(static_cast<urnic::WcStatus>(s));
  static const char* const kTagMatching[] = {"TM error", "TM rendezvous error"};
  return pick(kTagMatching, static_cast<unsigned>(s) - IBV_WC_TM_ERR);
}

const char* ibv_event_type_str(ibv_event_type e) {
  static const char* const kNames[] = {
      "CQ error",
      "local work queue catastrophic error",
      "invalid request local work queue error",
      "local access violation work queue error",
      "communication established",
      "send queue drained",
      "path migrated",
      "path migration request error",
      "local catastrophic error",
      "port active",
      "port error",
      "LID change",
      "P_Key change",
      "SM change",
      "SRQ catastrophic error",
      "SRQ limit reached",
      "last WQE reached",
      "client reregistration",
      "GID table change",
      "WQ fatal",
  };
  return pick(kNames, static_cast<unsigned>(e));
}

const char* ibv_node_type_str(ibv_node_type t) {
  // Indexed by the enum's value: IBV_NODE_CA is 1, and 0 (like IBV_NODE_UNKNOWN, -1, and any
  // value past the table) has no name.
  static const char* const kNames[] = {"unknown",           "InfiniBand channel adapter",
                                       "InfiniBand switch", "InfiniBand router",
                                       "iWARP NIC",         "usNIC",
                                       "usNIC UDP",         "unspecified"};
  return pick(kNames, static_cast<unsigned>(t));
}

const char* ibv_port_state_str(ibv_port_state s) {
  static const char* const kNames[] = {"PORT_NOP",   "PORT_DOWN",   "PORT_INIT",
                                       "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
  return pick(kNames, static_cast<unsigned>(s));
}

int ibv_rate_to_mult(ibv_rate r) {
  for (const Rate& x : kRates)
    if (x.rate == r) return x.mult;
  return r == IBV_RATE_MAX ? 0 : -1;
}

ibv_rate mult_to_ibv_rate(int mult) {
  for (const Rate& x : kRates)
    if (x.mult == mult) return x.rate;
  return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(ibv_rate r) {
  for (const Rate& x : kRates)
    if (x.rate == r) return x.mbps;
  return r == IBV_RATE_MAX ? 0 : -1;
}

ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const Rate& x : kRates)
    if (x.mbps == mbps) return x.rate;
  return IBV_RATE_MAX;
}

// No kernel pins the memory: fork needs no madvise(MADV_DONTFORK) here.
int ibv_fork_init(void) { return 0; }
ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
int ibv_dontfork_range(void*, size_t) { return 0; }
int ibv_dofork_range(void*, size_t) { return 0; }

// There is no sysfs behind urnic's devices.
const char* ibv_get_sysfs_path(void) { return "/sys"; }
int ibv_read_sysfs_file(const char*, const char*, char*, size_t) {
  errno = ENOENT;
  return -1;
}

void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof dst->grh.dgid);
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = src->qp_access_flags;
  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;
  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src) {
  std::memcpy(dst->dgid.raw, src->dgid, 16);
  std::memcpy(dst->sgid.raw, src->sgid, 16);
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = static_cast<int>(src->raw_traffic);
  dst->flow_label = src->flow_label;
  dst->reversible = static_cast<int>(src->reversible);
  dst->mtu = static_cast<uint8_t>(src->mtu);
  dst->pkey = src->pkey;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->numb_path = src->numb_path;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
}

void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src) {
  std::memcpy(dst->dgid, src->dgid.raw, 16);
  std::memcpy(dst->sgid, src->sgid.raw, 16);
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = static_cast<uint32_t>(src->raw_traffic);
  dst->flow_label = src->flow_label;
  dst->reversible = static_cast<uint32_t>(src->reversible);
  dst->mtu = src->mtu;
  dst->pkey = src->pkey;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->numb_path = src->numb_path;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
}

// ---- Not offered ----------------------------------------------------------------------------

// Multicast needs UD QPs (issue 16 item 5).
int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }
int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }
// The L2 address of a GID is resolved by the adapter itself (ARP / ND at modify_qp).
int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t[6], uint16_t*) {
  return EOPNOTSUPP;
}
// Enhanced connection establishment is a ConnectX feature negotiated by rdma_cm.
int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
// Sharing objects between processes goes through the kernel's uverbs file.
ibv_context* ibv_import_device(int) { return fail_null<ibv_context>(EOPNOTSUPP); }
ibv_pd* ibv_import_pd(ibv_context*, uint32_t) { return fail_null<ibv_pd>(EOPNOTSUPP); }
void ibv_unimport_pd(ibv_pd*) {}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) { return fail_null<ibv_mr>(EOPNOTSUPP); }
void ibv_unimport_mr(ibv_mr*) {}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) { return fail_null<ibv_dm>(EOPNOTSUPP); }
void ibv_unimport_dm(ibv_dm*) {}
// Whether a message's data lands in order: not promised (retransmitted packets rewrite it).
int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) { return 0; }

}  // extern "C"
