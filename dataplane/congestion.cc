// Notification point and CNP delivery (congestion.h). A CNP is a QP's business only: it carries
// no PSN, is never acknowledged and never retransmitted (A17.9.3), so losing one (TX buffer
// full) costs nothing but a later CNP for a later CE mark.
#include "dataplane/congestion.h"

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include "dataplane/endpoint.h"
#include "dataplane/internal.h"
#include "dataplane/qp.h"

namespace urnic::dp {

namespace {

// A CNP to the QP's peer (rocev2.md §5.2, as ConnectX builds one): the QP's addresses and UDP
// source port, the CNP's own DSCP with ECT(0), BTH opcode 0x81 with BECN set, P_Key 0xFFFF, the
// peer's QPN, PSN 0, no AckReq, then 16 reserved zero bytes and the ICRC.
bool send_cnp_lc(Endpoint& ep, const Qp& qp) noexcept {
  if (ep.tx_space() == 0) return false;
  wire::NetHeaders av = lc(qp).attr.av;
  av.traffic_class = static_cast<uint8_t>(lc(qp).attr.cc.cnp_dscp << 2 | kEcnEct0);
  wire::TransportHeaders th;
  th.bth.opcode = wire::opc::kCnp;
  th.bth.pkey = wire::Be16::of(wire::kDefaultPkey);
  wire::Bth::Becn::set(th.bth, 1u);
  // To the peer's QP, the one whose frames were marked (a test hook names our own instead).
  wire::Bth::DestQp::set(th.bth,
                         qp.config().broken.cc_cnp_dest_qp ? qp.qpn() : lc(qp).attr.dest_qpn);
  uint8_t* payload = nullptr;
  rte_mbuf* m = frame_lc(ep, av, th, 0, &payload);
  if (m == nullptr) [[unlikely]]
    return false;
  wire::finish_frame(rte_pktmbuf_mtod(m, uint8_t*), av, wire::opc::kCnp, 0);
  ep.tx_append(m);
  return true;
}

}  // namespace

void cc_on_ce_lc(Endpoint& ep, Qp& qp, uint64_t now) noexcept {
  auto& q = lc(qp);
  ++q.counters.ce_marked;
  const CongestionConfig& cc = q.attr.cc;
  if (!cc.enabled) return;
  // One CNP per QP per interval (ConnectX min_time_between_cnps; the paper's 50 us): the
  // reaction point cuts at most once per monitor period anyway.
  if (q.last_cnp_tsc != 0 && now - q.last_cnp_tsc < tsc_from_ns(cc.cnp_interval_us * 1000ull) &&
      !qp.config().broken.cc_cnp_unpaced)
    return;
  if (!send_cnp_lc(ep, qp)) return;
  q.last_cnp_tsc = now != 0 ? now : 1;
  ++q.counters.cnps_sent;
}

void cc_on_cnp_lc(Qp& qp, uint64_t now) noexcept {
  auto& q = lc(qp);
  ++q.counters.cnps_received;
  if (!q.attr.cc.enabled) return;
  if (q.dcqcn.on_cnp(now)) ++q.counters.cc_rate_decreases;
  cc_publish_rate_lc(qp);
}

void cc_reset_lc(Qp& qp) noexcept {
  auto& q = lc(qp);
  DcqcnConfig d = q.attr.cc.dcqcn;
  // Test hooks (BrokenRules): a monitor period of 5 ms; no increase timer or byte counter.
  if (qp.config().broken.cc_reduce_period) d.reduce_period_us = 5000;
  if (qp.config().broken.cc_no_recovery) {
    d.time_reset_us = UINT32_MAX;
    d.byte_reset = 0;
  }
  q.dcqcn.init(d, cc_max_rate_mbps(q.attr.cc), rte_get_tsc_hz());
  q.last_cnp_tsc = 0;
  q.counters.cc_paced_mbps = 0;
}

}  // namespace urnic::dp
