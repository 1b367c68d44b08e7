// rdma_cm's UDP port space (RDMA_PS_UDP): ids whose QP is a UD QP (urnic's datagram QP) and whose
// "connection" is a SIDR exchange over urnic's IB CM (IBTA §12.11, Connector::resolve_datagram /
// accept_datagram): the active side learns the passive side's QPN and Q_Key, and gets the
// address handle attributes in RDMA_CM_EVENT_ESTABLISHED; the passive side answers the request
// and is done (no RTU, no ESTABLISHED event, as with Linux's rdma_cm).
#include <array>
#include <cstring>

#include "rdmacm/internal.h"

using namespace urnic;

namespace urnic::rdmacm {
namespace {

// rdma_cm's Q_Key for the UDP port space (RDMA_UDP_QKEY in the kernel's rdma_cm).
constexpr uint32_t kUdpQkey = 0x01234567;

// The index of `gid` in the device's GID table (0 when it is not there: the link-local GID).
uint8_t gid_index(ibv_context* c, const ibv_gid& gid) {
  AdapterExtension* ext = verbs::ctx_of(c)->dev->ext;
  for (uint32_t i = 0; i < ext->gid_count(); ++i) {
    std::array<uint8_t, 16> g{};
    if (ext->query_gid(i, &g) == Status::kSuccess && std::memcmp(g.data(), gid.raw, 16) == 0)
      return static_cast<uint8_t>(i);
  }
  return 0;
}

// The active side: the SIDR reply came (or did not).
void on_resolved(void* ctx, Status s) {
  Id* i = static_cast<Id*>(ctx);
  if (s == Status::kCancelled) return;
  uint8_t data[256];
  uint32_t len = sizeof data, ird = 0, ord = 0;
  if (i->conn->get_connection_data(&ird, &ord, data, &len) != Status::kSuccess) len = 0;
  if (s != Status::kSuccess) {
    i->state = IdState::kRouteResolved;
    // rdma_cm reports a refused or unanswered SIDR request as UNREACHABLE (the SIDR_REP status,
    // or -ETIMEDOUT).
    if (s == Status::kConnectionRefused) {
      uint16_t status = 2;  // SIDR_REP "rejected" unless the reply said otherwise
      (void)i->conn->get_reject_reason(&status);
      post_event(i, RDMA_CM_EVENT_UNREACHABLE, status, data, len);
    } else {
      post_event(i, RDMA_CM_EVENT_UNREACHABLE,
                 s == Status::kHostUnreachable ? -EHOSTUNREACH : -ETIMEDOUT);
    }
    return;
  }
  uint32_t qpn = 0, qkey = 0;
  (void)i->conn->get_datagram_peer(&qpn, &qkey);
  Event* e = make_event(i, RDMA_CM_EVENT_ESTABLISHED, 0, data, len);
  if (e == nullptr) return;
  const rdma_addr& a = i->id.route.addr;
  rdma_ud_param& ud = e->ev.param.ud;
  ud.ah_attr = {};
  ud.ah_attr.is_global = 1;
  ud.ah_attr.port_num = 1;
  ud.ah_attr.grh.dgid = a.addr.ibaddr.dgid;
  ud.ah_attr.grh.sgid_index = gid_index(i->id.verbs, a.addr.ibaddr.sgid);
  ud.ah_attr.grh.hop_limit = 64;
  ud.ah_attr.grh.traffic_class = i->tos;
  ud.qp_num = qpn;
  ud.qkey = qkey;
  i->state = IdState::kConnected;
  push_event(i, e);
}

}  // namespace

int init_ud_qp(ibv_qp* qp) {
  // As librdmacm does for a UD QP of an id: RESET -> INIT with rdma_cm's Q_Key, RTR, RTS.
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = kUdpQkey;
  if (const int e =
          ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
      e != 0)
    return e;
  a.qp_state = IBV_QPS_RTR;
  if (const int e = ibv_modify_qp(qp, &a, IBV_QP_STATE); e != 0) return e;
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

int connect_datagram(Id* i, const rdma_conn_param* param) {
  rdma_cm_id* id = &i->id;
  Status s = i->conn ? Status::kSuccess
                     : create_connector(verbs::adapter_of(id->verbs), nullptr, nullptr, &i->conn);
  if (s != Status::kSuccess) return fail(verbs::status_errno(s));
  i->state = IdState::kConnecting;
  s = i->conn->resolve_datagram(&id->route.addr.src_addr, addr_len(&id->route.addr.src_addr),
                                &id->route.addr.dst_addr, addr_len(&id->route.addr.dst_addr),
                                param ? param->private_data : nullptr,
                                param ? param->private_data_len : 0, on_resolved, i);
  if (s != Status::kPending) {
    i->state = IdState::kRouteResolved;
    return fail(s == Status::kInvalidBufferSize ? EINVAL : verbs::status_errno(s));
  }
  return complete(i, RDMA_CM_EVENT_ESTABLISHED);
}

int accept_datagram(Id* i, const rdma_conn_param* param) {
  // The QP the requester is to send to: the id's, or (no QP on the id) the one the caller names.
  const uint32_t qpn = i->id.qp != nullptr ? i->id.qp->qp_num : param ? param->qp_num : 0;
  uint32_t qkey = kUdpQkey;
  if (i->id.qp != nullptr) {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    if (ibv_query_qp(i->id.qp, &a, IBV_QP_QKEY, &ia) == 0) qkey = a.qkey;
  }
  const Status s = i->conn->accept_datagram(qpn, qkey, param ? param->private_data : nullptr,
                                            param ? param->private_data_len : 0);
  if (s != Status::kSuccess)
    return fail(s == Status::kInvalidBufferSize ? EINVAL : verbs::status_errno(s));
  i->state = IdState::kConnected;
  return 0;
}

}  // namespace urnic::rdmacm
