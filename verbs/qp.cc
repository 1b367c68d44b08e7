// Queue pairs (create, create_ex, modify, query, destroy), shared receive queues, and address
// handles. RC QPs map onto urnic QPs, UD QPs onto urnic's datagram QPs (urnic/datagram.h);
// modify_qp onto the manual-connect extension (QpConnectExtension), whose transition tables are
// IBTA §10.3.1's.
#include <algorithm>
#include <array>
#include <cstring>

#include "verbs/internal.h"

using namespace urnic;
using namespace urnic::verbs;

namespace {

constexpr unsigned kSupportedSendOps =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV;

// The part of ibv_qp_init_attr and ibv_qp_init_attr_ex that both share (same layout).
ibv_qp* create(ibv_pd* pd, ibv_qp_init_attr* a) {
  if (pd == nullptr || a == nullptr || a->send_cq == nullptr ||
      (a->recv_cq == nullptr && a->srq == nullptr))
    return fail_null<ibv_qp>(EINVAL);
  // UC, XRC and raw packet QPs are not offered by urnic's public API (RC and UD only).
  if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UD) return fail_null<ibv_qp>(EOPNOTSUPP);
  const bool ud = a->qp_type == IBV_QPT_UD;
  ibv_context* ctx = pd->context;
  VCq* scq = cq_of(a->send_cq);
  VCq* rcq = cq_of(a->recv_cq ? a->recv_cq : a->send_cq);
  if (a->send_cq->context != ctx || (a->recv_cq && a->recv_cq->context != ctx))
    return fail_null<ibv_qp>(EINVAL);
  auto q = std::make_unique<VQp>();
  ibv_qp_cap& cap = a->cap;
  Status s;
  if (ud) {
    // The Q_Key comes with ibv_modify_qp's RESET -> INIT (IBV_QP_QKEY), as ibverbs requires.
    s = create_datagram_qp(*pd_of(pd)->h, *rcq->h, *scq->h,
                           a->srq ? srq_of(a->srq)->h.get() : nullptr, q.get(),
                           std::max(1u, cap.max_recv_wr), std::max(1u, cap.max_send_wr),
                           cap.max_recv_sge, cap.max_send_sge, cap.max_inline_data, 0, &q->h);
  } else if (a->srq != nullptr) {
    s = pd_of(pd)->h->create_qp_with_srq(*rcq->h, *scq->h, *srq_of(a->srq)->h, q.get(),
                                         std::max(1u, cap.max_send_wr), cap.max_send_sge,
                                         cap.max_inline_data, nullptr, nullptr, &q->h);
  } else {
    s = pd_of(pd)->h->create_qp(*rcq->h, *scq->h, q.get(), std::max(1u, cap.max_recv_wr),
                                std::max(1u, cap.max_send_wr), cap.max_recv_sge, cap.max_send_sge,
                                cap.max_inline_data, nullptr, nullptr, &q->h);
  }
  if (s != Status::kSuccess)
    return fail_null<ibv_qp>(s == Status::kInvalidParameter ? EINVAL : ENOMEM);
  q->ext = q->h->query_extension<QpExtension>();
  q->conn = q->h->query_extension<QpConnectExtension>();
  q->scq = scq;
  q->rcq = rcq;
  q->srq = a->srq ? srq_of(a->srq) : nullptr;
  q->pd = pd_of(pd);
  q->sq_sig_all = a->sq_sig_all != 0;
  q->ud = ud;
  q->cap = cap;
  ibv_qp& qp = q->qpx.qp_base;
  qp.context = ctx;
  qp.qp_context = a->qp_context;
  qp.pd = pd;
  qp.send_cq = a->send_cq;
  qp.recv_cq = a->recv_cq;
  qp.srq = a->srq;
  qp.qp_num = q->conn->qpn();
  qp.handle = qp.qp_num;
  qp.state = IBV_QPS_RESET;
  qp.qp_type = a->qp_type;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
  ++scq->users;
  ++rcq->users;
  ++q->pd->users;
  if (q->srq) ++q->srq->users;
  init_wr_ops(*q);
  return &q.release()->qpx.qp_base;
}

ibv_qp* create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* a) {
  if (ctx == nullptr || a == nullptr || !(a->comp_mask & IBV_QP_INIT_ATTR_PD) || a->pd == nullptr ||
      a->pd->context != ctx)
    return fail_null<ibv_qp>(EINVAL);
  if (a->comp_mask &
      ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS))
    return fail_null<ibv_qp>(EOPNOTSUPP);  // XRC, RSS, TSO, ...
  // Create flags named but none set is the plain QP (UCX and libfabric pass it that way); no flag
  // (scatter FCS, CVLAN stripping, source QPN, ...) is offered.
  if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags != 0)
    return fail_null<ibv_qp>(EOPNOTSUPP);
  const unsigned ops = a->qp_type == IBV_QPT_UD ? IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM
                                                : kSupportedSendOps;
  if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & ~ops))
    return fail_null<ibv_qp>(EOPNOTSUPP);
  return create(a->pd, reinterpret_cast<ibv_qp_init_attr*>(a));
}

// IBTA RoCEv2 GID -> the address vector: an IPv4-mapped GID (::ffff:a.b.c.d) is IPv4.
int to_av(const ibv_ah_attr& ah, AddressVector* av) {
  if (!ah.is_global) return EINVAL;  // RoCE needs the GRH (IBTA A17.4.5.1)
  if (ah.port_num != 0 && ah.port_num != 1) return EINVAL;
  const uint8_t* g = ah.grh.dgid.raw;
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  av->ipv6 = std::memcmp(g, kMapped, 12) != 0;
  if (av->ipv6) {
    std::memcpy(av->dst_ipv6.data(), g, 16);
  } else {
    av->dst_ipv4 =
        (uint32_t{g[12]} << 24) | (uint32_t{g[13]} << 16) | (uint32_t{g[14]} << 8) | g[15];
  }
  av->traffic_class = ah.grh.traffic_class;
  av->hop_limit = ah.grh.hop_limit;
  av->flow_label = ah.grh.flow_label & 0xFFFFFu;  // 20 bits (IBTA GRH); providers ignore the rest
  av->sgid_index = ah.grh.sgid_index;
  return 0;
}

// An address vector as ibv_ah_attr (RoCE: always with a GRH; an IPv4 destination as an
// IPv4-mapped GID).
void fill_ah_attr(const AddressVector& av, ibv_ah_attr* out) {
  ibv_ah_attr& ah = *out;
  ah.is_global = 1;
  ah.port_num = 1;
  if (av.ipv6) {
    std::memcpy(ah.grh.dgid.raw, av.dst_ipv6.data(), 16);
  } else {
    ah.grh.dgid.raw[10] = ah.grh.dgid.raw[11] = 0xFF;
    for (int i = 0; i < 4; ++i)
      ah.grh.dgid.raw[12 + i] = static_cast<uint8_t>(av.dst_ipv4 >> (24 - 8 * i));
  }
  ah.grh.sgid_index = static_cast<uint8_t>(av.sgid_index < 0 ? 0 : av.sgid_index);
  ah.grh.hop_limit = av.hop_limit;
  ah.grh.traffic_class = av.traffic_class;
  ah.grh.flow_label = av.flow_label;
}

uint32_t to_qp_access(unsigned a) {
  return ((a & IBV_ACCESS_REMOTE_READ) ? qp_access::kRemoteRead : 0) |
         ((a & IBV_ACCESS_REMOTE_WRITE) ? qp_access::kRemoteWrite : 0) |
         ((a & IBV_ACCESS_REMOTE_ATOMIC) ? qp_access::kRemoteAtomic : 0);
}

unsigned from_qp_access(uint32_t a) {
  unsigned r = 0;
  if (a & qp_access::kRemoteRead) r |= IBV_ACCESS_REMOTE_READ;
  if (a & qp_access::kRemoteWrite) r |= IBV_ACCESS_REMOTE_WRITE;
  if (a & qp_access::kRemoteAtomic) r |= IBV_ACCESS_REMOTE_ATOMIC;
  return r;
}

// ibv_qp_attr + mask -> QpAttributes + qp_attr_mask; an errno for what RC over RoCE refuses.
int to_attributes(const ibv_qp_attr& v, int m, QpAttributes* a, uint32_t* mask) {
  constexpr int kKnown = IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
                         IBV_QP_PORT | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT |
                         IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_DEST_QPN | IBV_QP_QKEY;
  if (m & ~kKnown) return EINVAL;  // alternate paths, SQD notification, rate limit
  if ((m & IBV_QP_PKEY_INDEX) && v.pkey_index != 0) return EINVAL;  // one P_Key, index 0
  if ((m & IBV_QP_PORT) && v.port_num != 1) return EINVAL;
  uint32_t k = 0;
  a->state = static_cast<QpState>(v.qp_state);
  if (m & IBV_QP_STATE) k |= qp_attr_mask::kState;
  if (m & IBV_QP_ACCESS_FLAGS) {
    a->access = to_qp_access(v.qp_access_flags);
    k |= qp_attr_mask::kAccessFlags;
  }
  if (m & IBV_QP_AV) {
    if (const int e = to_av(v.ah_attr, &a->av); e != 0) return e;
    k |= qp_attr_mask::kAv;
  }
  if (m & IBV_QP_PATH_MTU) {
    if (v.path_mtu < IBV_MTU_256 || v.path_mtu > IBV_MTU_4096) return EINVAL;
    a->path_mtu = 128u << v.path_mtu;
    k |= qp_attr_mask::kPathMtu;
  }
  auto take = [&](int ibv, uint32_t mine, auto& dst, auto val) {
    if (m & ibv) {
      dst = static_cast<std::remove_reference_t<decltype(dst)>>(val);
      k |= mine;
    }
  };
  take(IBV_QP_DEST_QPN, qp_attr_mask::kDestQpn, a->dest_qpn, v.dest_qp_num);
  take(IBV_QP_QKEY, qp_attr_mask::kQkey, a->qkey, v.qkey);
  take(IBV_QP_RQ_PSN, qp_attr_mask::kRqPsn, a->rq_psn, v.rq_psn);
  take(IBV_QP_SQ_PSN, qp_attr_mask::kSqPsn, a->sq_psn, v.sq_psn);
  take(IBV_QP_MAX_DEST_RD_ATOMIC, qp_attr_mask::kMaxDestRdAtomic, a->max_dest_rd_atomic,
       v.max_dest_rd_atomic);
  take(IBV_QP_MAX_QP_RD_ATOMIC, qp_attr_mask::kMaxRdAtomic, a->max_rd_atomic, v.max_rd_atomic);
  take(IBV_QP_TIMEOUT, qp_attr_mask::kTimeout, a->timeout, v.timeout);
  take(IBV_QP_RETRY_CNT, qp_attr_mask::kRetryCnt, a->retry_cnt, v.retry_cnt);
  take(IBV_QP_RNR_RETRY, qp_attr_mask::kRnrRetry, a->rnr_retry, v.rnr_retry);
  take(IBV_QP_MIN_RNR_TIMER, qp_attr_mask::kMinRnrTimer, a->min_rnr_timer, v.min_rnr_timer);
  *mask = k;
  return 0;
}

}  // namespace

namespace urnic::verbs {

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);  // post.cc

void fill_qp_ops(Context& c) noexcept {
  c.vctx.create_qp_ex = create_qp_ex;
  c.vctx.context.ops.post_srq_recv = post_srq_recv;
}

}  // namespace urnic::verbs

extern "C" {

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) { return create(pd, attr); }

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) { return qp ? &qp_of(qp)->qpx : nullptr; }

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  if (qp == nullptr || attr == nullptr) return EINVAL;
  VQp* q = qp_of(qp);
  if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != qp->state) return EINVAL;
  QpAttributes a;
  uint32_t m = 0;
  if (const int e = to_attributes(*attr, mask, &a, &m); e != 0) return e;
  const bool to_state = (mask & IBV_QP_STATE) != 0;
  if (q->fresh) {
    // The urnic QP is in INIT already: RESET -> INIT is INIT -> INIT, RESET -> RESET nothing,
    // anything else from RESET but ERR is illegal.
    const ibv_qp_state next = to_state ? attr->qp_state : IBV_QPS_RESET;
    if (next == IBV_QPS_RESET) return (m & ~qp_attr_mask::kState) == 0 ? 0 : EINVAL;
    // IBTA §10.3.1: RESET -> INIT sets the remote rights of an RC QP, the Q_Key of a UD one.
    if (next == IBV_QPS_INIT && !(mask & (q->ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)))
      return EINVAL;
    if (next != IBV_QPS_INIT && next != IBV_QPS_ERR) return EINVAL;
  } else if (!to_state) {
    a.state = static_cast<QpState>(qp->state);
  }
  const Status s = q->conn->modify(a, m, nullptr, nullptr);
  if (s != Status::kSuccess) return status_errno(s);
  if (to_state) {
    q->fresh = false;
    qp->state = attr->qp_state;
  }
  return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
  if (qp == nullptr || attr == nullptr || init == nullptr) return EINVAL;
  VQp* q = qp_of(qp);
  QpAttributes a;
  if (const Status s = q->conn->query(&a); s != Status::kSuccess) return status_errno(s);
  std::memset(attr, 0, sizeof *attr);
  attr->qp_state = q->fresh ? IBV_QPS_RESET : static_cast<ibv_qp_state>(a.state);
  attr->cur_qp_state = attr->qp_state;
  int mtu = IBV_MTU_256;
  while (mtu < IBV_MTU_4096 && (128u << mtu) < a.path_mtu) ++mtu;
  attr->path_mtu = static_cast<ibv_mtu>(mtu);
  attr->qp_access_flags = from_qp_access(a.access);
  attr->dest_qp_num = a.dest_qpn;
  attr->rq_psn = a.rq_psn;
  attr->sq_psn = a.sq_psn;
  attr->max_rd_atomic = a.max_rd_atomic;
  attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
  attr->min_rnr_timer = a.min_rnr_timer;
  attr->timeout = a.timeout;
  attr->retry_cnt = a.retry_cnt;
  attr->rnr_retry = a.rnr_retry;
  attr->port_num = 1;
  attr->cap = q->cap;
  attr->qkey = a.qkey;
  if (q->ud) {
    // UD has no path and no address vector: the port's MTU bounds each datagram.
    mtu = IBV_MTU_256;
    while (mtu < IBV_MTU_4096 && (128u << mtu) < q->ext->max_datagram_size()) ++mtu;
    attr->path_mtu = static_cast<ibv_mtu>(mtu);
  } else {
    fill_ah_attr(a.av, &attr->ah_attr);
  }
  std::memset(init, 0, sizeof *init);
  init->qp_context = qp->qp_context;
  init->send_cq = qp->send_cq;
  init->recv_cq = qp->recv_cq;
  init->srq = qp->srq;
  init->cap = q->cap;
  init->qp_type = qp->qp_type;
  init->sq_sig_all = q->sq_sig_all;
  return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
  if (qp == nullptr) return EINVAL;
  VQp* q = qp_of(qp);
  if (q->release_hook) q->release_hook(q->release_ctx);
  close_sync(q->h);  // flushes what is outstanding into the CQs first (NDK close)
  --q->scq->users;
  --q->rcq->users;
  --q->pd->users;
  if (q->srq) --q->srq->users;
  pthread_mutex_destroy(&qp->mutex);
  pthread_cond_destroy(&qp->cond);
  delete q;
  return 0;
}

// ---- SRQ ---------------------------------------------------------------------------------------

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* a) {
  if (pd == nullptr || a == nullptr || a->attr.max_wr == 0) return fail_null<ibv_srq>(EINVAL);
  auto s = std::make_unique<VSrq>();
  s->ctx = ctx_of(pd->context);
  auto on_limit = [](void* context, Status) {
    VSrq* me = static_cast<VSrq*>(context);
    ibv_async_event e{};
    e.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
    e.element.srq = &me->srq;
    me->limit = 0;  // ibverbs: the limit disarms when it fires
    me->ctx->push_event(e);
  };
  const Status st =
      pd_of(pd)->h->create_srq(a->attr.max_wr, std::max(1u, a->attr.max_sge), a->attr.srq_limit,
                               on_limit, s.get(), nullptr, nullptr, &s->h);
  if (st != Status::kSuccess)
    return fail_null<ibv_srq>(st == Status::kInvalidParameter ? EINVAL : ENOMEM);
  s->max_wr = a->attr.max_wr;
  s->max_sge = std::max(1u, a->attr.max_sge);
  s->limit = a->attr.srq_limit;
  s->srq.context = pd->context;
  s->srq.srq_context = a->srq_context;
  s->srq.pd = pd;
  pthread_mutex_init(&s->srq.mutex, nullptr);
  pthread_cond_init(&s->srq.cond, nullptr);
  ++pd_of(pd)->users;
  return &s.release()->srq;
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  if (srq == nullptr || attr == nullptr || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
    return EINVAL;
  VSrq* s = srq_of(srq);
  const uint32_t depth = (mask & IBV_SRQ_MAX_WR) ? attr->max_wr : 0;
  const uint32_t limit = (mask & IBV_SRQ_LIMIT) ? attr->srq_limit : 0;
  if ((mask & IBV_SRQ_MAX_WR) && depth == 0) return EINVAL;
  if ((mask & IBV_SRQ_LIMIT) && limit > (depth ? depth : s->max_wr)) return EINVAL;
  const Status st = s->h->modify(depth, limit, nullptr, nullptr);
  if (st != Status::kSuccess) return status_errno(st);
  if (depth) s->max_wr = depth;
  if (mask & IBV_SRQ_LIMIT) s->limit = limit;
  return 0;
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  if (srq == nullptr || attr == nullptr) return EINVAL;
  VSrq* s = srq_of(srq);
  attr->max_wr = s->max_wr;
  attr->max_sge = s->max_sge;
  attr->srq_limit = s->limit;
  return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
  if (srq == nullptr) return EINVAL;
  VSrq* s = srq_of(srq);
  if (s->users.load() != 0) return EBUSY;
  --pd_of(srq->pd)->users;
  close_sync(s->h);
  pthread_mutex_destroy(&srq->mutex);
  pthread_cond_destroy(&srq->cond);
  delete s;
  return 0;
}

// ---- Address handles ---------------------------------------------------------------------------

// Address handles for UD QPs: the destination's MAC is resolved when the handle is made (ARP or
// neighbour discovery, up to 2 s), as rdma-core's RoCE providers do in ibv_create_ah.
ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (pd == nullptr || attr == nullptr) return fail_null<ibv_ah>(EINVAL);
  AddressVector av;
  if (const int e = to_av(*attr, &av); e != 0) return fail_null<ibv_ah>(e);
  auto a = std::make_unique<VAh>();
  const Status s = create_address_handle(*ctx_of(pd->context)->dev->adapter, av, &a->h);
  if (s != Status::kSuccess)
    return fail_null<ibv_ah>(s == Status::kHostUnreachable ? EHOSTUNREACH : status_errno(s));
  a->ah.context = pd->context;
  a->ah.pd = pd;
  ++pd_of(pd)->users;
  return &a.release()->ah;
}

// The address handle that answers a received datagram: its GRH (RoCEv2: the IPv4 header in the
// last 20 bytes, or the IPv6 header) names the sender's GID, which becomes the destination, and
// our GID it was sent to, which becomes the source GID index.
int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                        ibv_ah_attr* ah_attr) {
  if (context == nullptr || wc == nullptr || grh == nullptr || ah_attr == nullptr) return EINVAL;
  if (!(wc->wc_flags & IBV_WC_GRH)) return EINVAL;  // RoCE addresses by GID only
  std::memset(ah_attr, 0, sizeof *ah_attr);
  ah_attr->port_num = port_num;
  ah_attr->is_global = 1;
  const auto* g = reinterpret_cast<const uint8_t*>(grh);
  std::array<uint8_t, 16> ours{};
  if (g[20] >> 4 == 4 && std::all_of(g, g + 20, [](uint8_t b) { return b == 0; })) {
    ah_attr->grh.dgid.raw[10] = ah_attr->grh.dgid.raw[11] = 0xFF;
    std::memcpy(ah_attr->grh.dgid.raw + 12, g + 32, 4);  // IPv4 source address
    ours[10] = ours[11] = 0xFF;
    std::memcpy(ours.data() + 12, g + 36, 4);  // destination address
    ah_attr->grh.traffic_class = g[21];
    ah_attr->grh.hop_limit = 64;
  } else if (g[0] >> 4 == 6) {
    std::memcpy(ah_attr->grh.dgid.raw, g + 8, 16);
    std::memcpy(ours.data(), g + 24, 16);
    ah_attr->grh.traffic_class = static_cast<uint8_t>(((g[0] & 0xF) << 4) | (g[1] >> 4));
    ah_attr->grh.flow_label = ((g[1] & 0xFu) << 16) | (g[2] << 8) | g[3];
    ah_attr->grh.hop_limit = 64;
  } else {
    return EINVAL;
  }
  AdapterExtension* ext = ctx_of(context)->dev->ext;
  for (uint32_t i = 0; i < ext->gid_count(); ++i) {
    std::array<uint8_t, 16> gid{};
    if (ext->query_gid(i, &gid) == Status::kSuccess && gid == ours) {
      ah_attr->grh.sgid_index = static_cast<uint8_t>(i);
      return 0;
    }
  }
  return EINVAL;  // not sent to one of our GIDs
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  if (pd == nullptr) return fail_null<ibv_ah>(EINVAL);
  ibv_ah_attr attr;
  if (const int e = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr); e != 0)
    return fail_null<ibv_ah>(e);
  return ibv_create_ah(pd, &attr);
}

int ibv_destroy_ah(ibv_ah* ah) {
  if (ah == nullptr) return EINVAL;
  --pd_of(ah->pd)->users;
  delete ah_of(ah);
  return 0;
}

}  // extern "C"
