// Unreliable Datagram QPs on the engine (IBTA Vol. 1 §9.8; Annex A17 for RoCEv2; include/urnic/
// datagram.h for the consumer's view). A datagram QP has no requester window, completer or
// responder: each send WQE becomes one UD SEND ONLY frame and completes as soon as the frame is
// queued to the port (nothing acknowledges it, §9.8.1), and each arriving datagram consumes one
// receive or is dropped. The datagram's destination travels in the WQE (wqe.h, ud_*).
#include <cstring>

#include "dataplane/internal.h"
#include "dataplane/srq.h"
#include "urnic/datagram.h"

namespace urnic::dp {
namespace {

namespace opc = wire::opc;

// IBTA §10.2.5: a send whose Q_Key has the high-order bit set uses the QP's own Q_Key instead
// (the controlled Q_Keys cannot be named by the sender directly).
constexpr uint32_t kQkeyUseQp = 0x80000000u;

// Builds and queues the frame of one datagram. False when no mbuf was free (the WQE stays for the
// next step); true otherwise, with *wc the completion status.
bool send_one_lc(Endpoint& ep, Qp& qp, const SendWqe& w, WcStatus* wc) noexcept {
  *wc = WcStatus::kSuccess;
  // A datagram is one packet: longer than the path MTU is a local length error (§9.8.2).
  if (w.length > qp.config().ud_mtu) {
    *wc = WcStatus::kLocLenErr;
    return true;
  }
  wire::NetHeaders net = *static_cast<const wire::NetHeaders*>(ud_net(w));
  net.udp_sport = wire::udp_sport_for(qp.qpn(), ud_qpn(w));
  const uint8_t op = w.opcode == WrOpcode::kSendWithImm ? opc::kUdSendOnlyImm : opc::kUdSendOnly;
  wire::TransportHeaders th;
  th.bth.opcode = op;
  th.bth.pkey = wire::Be16::of(wire::kDefaultPkey);
  wire::Bth::DestQp::set(th.bth, ud_qpn(w));
  wire::Bth::Psn::set(th.bth, lc(qp).req.psn.value());
  // AckReq stays clear: the unreliable services have no acknowledgements (§9.8; rxe clears it
  // for UD QPs too).
  if (w.flags & op_flag::kSendAndSolicitEvent) wire::Bth::Se::set(th.bth, 1u);
  const uint32_t qkey = (ud_qkey(w) & kQkeyUseQp) != 0 ? lc(qp).attr.qkey : ud_qkey(w);
  th.deth.qkey = wire::Be32::of(qkey);
  wire::Deth::SrcQp::set(th.deth, qp.qpn() + (qp.config().broken.ud_src_qp ? 1u : 0u));
  if (w.opcode == WrOpcode::kSendWithImm) th.imm.imm = wire::Be32::of(w.imm_or_inv);
  uint8_t* payload = nullptr;
  rte_mbuf* m = frame_lc(ep, net, th, w.length, &payload);
  if (m == nullptr) return false;
  *wc = gather_lc(ep.mrs(), qp.config().pd, w, 0, w.length, payload, nullptr);
  if (*wc != WcStatus::kSuccess) {
    rte_pktmbuf_free(m);
    return true;
  }
  const uint32_t len = wire::finish_frame(rte_pktmbuf_mtod(m, uint8_t*), net, op, w.length);
  ++lc(qp).counters.tx_packets;
  lc(qp).counters.tx_bytes += len;
  ep.tx_append(m);
  lc(qp).req.psn = lc(qp).req.psn + 1;
  return true;
}

}  // namespace

uint32_t datagram_tx_lc(Endpoint& ep, Qp& qp, uint32_t budget) noexcept {
  // SQD has nothing in flight to finish (a datagram completes when it leaves), so it starts
  // nothing, like RTR (IBTA §10.3.1).
  if (lc(qp).state != QpState::kRts) return 0;
  uint32_t built = 0;
  while (built < budget) {
    const SendWqe* w = lc(qp).sq.front();
    if (w == nullptr) break;
    WcStatus wc = WcStatus::kSuccess;
    if (!send_one_lc(ep, qp, *w, &wc)) break;  // mempool empty: next step
    qp_complete_sq_head_lc(qp, wc);
    if (wc != WcStatus::kSuccess) {
      // A failed work request moves the QP to the error state (IBTA §10.8.3.3; UD's send queue
      // error state is not kept apart from ERR here).
      qp_to_error_lc(ep, qp, {"datagram send failed", wc, -1, false});
      return built;
    }
    ++built;
  }
  return built;
}

void datagram_rx_lc(Endpoint& ep, Qp& qp, const wire::ParsedFrame& f) noexcept {
  QpCounters& c = lc(qp).counters;
  const QpState st = lc(qp).state;
  // Datagrams are received from RTR on (IBTA §10.3.1); INIT, RESET and ERR drop them.
  if (st != QpState::kRtr && st != QpState::kRts && st != QpState::kSqd) {
    ++c.dropped_bad_state;
    return;
  }
  ++c.rx_packets;
  c.rx_bytes += f.l.frame_len();
  const BrokenRules& broken = qp.config().broken;
  // C10-15: a datagram whose Q_Key is not the QP's is silently dropped.
  if (f.deth().qkey.get() != lc(qp).attr.qkey && !broken.ud_qkey) [[unlikely]] {
    ++c.qkey_violations;
    return;
  }
  // A UD message is one packet of at most the PMTU: a longer one is malformed (§9.6), dropped
  // before it takes a receive (which it would complete with a length error).
  if (f.l.payload_len > qp.config().ud_mtu && !broken.ud_pmtu) [[unlikely]] {
    ++c.datagrams_too_long;
    return;
  }
  if ((broken.ud_imm && (f.mask & wire::op::kImmDt)) || (broken.ud_empty && f.l.payload_len == 0))
      [[unlikely]]
    return;
  RecvWqe wqe;
  Srq* srq = qp.config().srq;
  if (!(srq != nullptr ? srq->pop_lc(&wqe) : lc(qp).rq.pop(wqe))) {
    ++c.datagrams_no_receive;  // §9.8.3.1: no receive posted, the datagram is lost
    return;
  }
  // The 40 bytes before the payload: the GRH, which RoCEv2 replaces with the IP header (an IPv4
  // header sits in the last 20 bytes, after 20 zero bytes).
  uint8_t grh[kGrhLength] = {};
  if (f.l.ipv6) {
    static_assert(sizeof(wire::Ipv6Hdr) == kGrhLength);
    std::memcpy(grh, &f.ipv6(), kGrhLength);
  } else {
    static_assert(sizeof(wire::Ipv4Hdr) == kGrhLength / 2);
    std::memcpy(grh + kGrhLength / 2, &f.ipv4(), sizeof(wire::Ipv4Hdr));
  }
  const uint32_t plen = f.l.payload_len;
  const uint32_t pd = qp.config().pd;
  WcStatus wc = WcStatus::kSuccess;
  if (uint64_t{kGrhLength} + plen > wqe.length) {
    wc = WcStatus::kLocLenErr;  // the receive is too small for the datagram (§9.8.3.1)
  } else {
    wc = scatter_lc(ep.mrs(), pd, wqe.sge, wqe.num_sge, 0, grh, kGrhLength, access::kLocalWrite);
    if (wc == WcStatus::kSuccess)
      wc = scatter_lc(ep.mrs(), pd, wqe.sge, wqe.num_sge, kGrhLength, f.payload().data(), plen,
                      access::kLocalWrite);
  }
  uint32_t flags = kResultDatagram | (wire::Bth::Se::get(f.bth()) ? kResultSolicited : 0u);
  uint32_t imm = 0;
  if (f.mask & wire::op::kImmDt) {
    imm = f.imm().imm.get();
    flags |= kResultHasImmediate;
  }
  const uint32_t bytes = wc == WcStatus::kSuccess ? kGrhLength + plen : 0;
  qp_complete_recv_lc(qp, wqe, wc, bytes, OperationType::kReceive, imm, flags, 0,
                      wire::Deth::SrcQp::get(f.deth()));
}

}  // namespace urnic::dp
