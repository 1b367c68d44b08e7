// Posting: ibv_post_send / ibv_post_recv / ibv_post_srq_recv, memory-window binds, and the
// extended work-request API (ibv_wr_*). A chain of work requests becomes NDK posts with
// NDK_OP_FLAG_DEFER on all but the last, so the whole chain costs one doorbell (ndkpi.md §7.3).
#include <cstring>

#include "verbs/internal.h"

using namespace urnic;
using namespace urnic::verbs;

// ibv_sge and urnic's Sge (NDK_SGE) are the same 16 bytes: an address, a length, a key.
static_assert(sizeof(ibv_sge) == sizeof(Sge) && offsetof(ibv_sge, addr) == offsetof(Sge, addr) &&
              offsetof(ibv_sge, length) == offsetof(Sge, length) &&
              offsetof(ibv_sge, lkey) == offsetof(Sge, token));

namespace urnic::verbs {

uint32_t op_flags(const VQp& q, unsigned f) noexcept {
  uint32_t o = 0;
  if (!q.sq_sig_all && !(f & IBV_SEND_SIGNALED)) o |= op_flag::kSilentSuccess;
  if (f & IBV_SEND_FENCE) o |= op_flag::kReadFence;
  if (f & IBV_SEND_SOLICITED) o |= op_flag::kSendAndSolicitEvent;
  if (f & IBV_SEND_INLINE) o |= op_flag::kInline;
  return o;
}

}  // namespace urnic::verbs

namespace {

constexpr unsigned kSendFlags =
    IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE;

std::span<const Sge> sgl_of(const ibv_sge* s, int n) {
  return {reinterpret_cast<const Sge*>(s), static_cast<size_t>(n)};
}

// A work request of a datagram QP: SEND or SEND with immediate to wr.ud's address handle, QPN
// and Q_Key (ibverbs has no other operation for UD; the fence bit means nothing there).
Status post_datagram(VQp& q, const ibv_send_wr& wr, uint32_t flags) {
  if ((wr.opcode != IBV_WR_SEND && wr.opcode != IBV_WR_SEND_WITH_IMM) || wr.wr.ud.ah == nullptr)
    return Status::kInvalidParameter;
  const uint32_t imm = be32toh(wr.imm_data);
  return q.ext->send_datagram(reinterpret_cast<void*>(static_cast<uintptr_t>(wr.wr_id)),
                              sgl_of(wr.sg_list, wr.num_sge), flags & ~op_flag::kReadFence,
                              ah_of(wr.wr.ud.ah)->h, wr.wr.ud.remote_qpn, wr.wr.ud.remote_qkey,
                              wr.opcode == IBV_WR_SEND_WITH_IMM ? &imm : nullptr);
}

// One work request; `flags` already carries kDefer for all but the chain's last.
Status post_one(VQp& q, const ibv_send_wr& wr, uint32_t flags) {
  if (q.ud) return post_datagram(q, wr, flags);
  void* ctx = reinterpret_cast<void*>(static_cast<uintptr_t>(wr.wr_id));
  const auto sgl = sgl_of(wr.sg_list, wr.num_sge);
  const uint32_t imm = be32toh(wr.imm_data);
  urnic::Qp& h = *q.h;
  // Attach mode has no QpExtension yet (immediates, atomics): those are not offered there.
  const bool ext = q.ext != nullptr;
  switch (wr.opcode) {
    case IBV_WR_SEND:
      return h.send(ctx, sgl, flags);
    case IBV_WR_SEND_WITH_IMM:
      if (!ext) return Status::kNotSupported;
      return q.ext->send_with_immediate(ctx, sgl, flags, imm);
    case IBV_WR_SEND_WITH_INV:
      return h.send_and_invalidate(ctx, sgl, flags, wr.invalidate_rkey);
    case IBV_WR_RDMA_WRITE:
      return h.write(ctx, sgl, wr.wr.rdma.remote_addr, wr.wr.rdma.rkey, flags);
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      if (!ext) return Status::kNotSupported;
      return q.ext->write_with_immediate(ctx, sgl, wr.wr.rdma.remote_addr, wr.wr.rdma.rkey, flags,
                                         imm);
    case IBV_WR_RDMA_READ:
      return h.read(ctx, sgl, wr.wr.rdma.remote_addr, wr.wr.rdma.rkey, flags & ~op_flag::kInline);
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD: {
      if (!ext) return Status::kNotSupported;
      if (wr.num_sge != 1 || (flags & op_flag::kInline)) return Status::kInvalidParameter;
      const auto& a = wr.wr.atomic;
      return wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP
                 ? q.ext->compare_swap(ctx, sgl[0], a.remote_addr, a.rkey, a.compare_add, a.swap,
                                       flags)
                 : q.ext->fetch_add(ctx, sgl[0], a.remote_addr, a.rkey, a.compare_add, flags);
    }
    default:
      // LOCAL_INV, BIND_MW (type 2), TSO, atomic write, driver ops: not offered.
      return Status::kNotSupported;
  }
}

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  if (qp == nullptr || bad == nullptr) return EINVAL;
  VQp& q = *qp_of(qp);
  std::lock_guard lock(q.sq_lock);
  // ibverbs: sending needs RTS (IBTA §10.8.2: RTR and below refuse sends); in ERR the request
  // is accepted and completes flushed, which urnic's QP does itself.
  if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD && qp->state != IBV_QPS_ERR) {
    *bad = wr;
    return EINVAL;
  }
  for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
    Status s = Status::kInvalidParameter;
    if (!(w->send_flags & ~kSendFlags) && w->num_sge >= 0 && (w->sg_list || w->num_sge == 0)) {
      const uint32_t defer = w->next != nullptr ? op_flag::kDefer : 0;
      s = post_one(q, *w, op_flags(q, w->send_flags) | defer);
    }
    if (s != Status::kSuccess) {
      // A failing post hands every earlier deferred request to the engine (ndkpi.md §7.3).
      *bad = w;
      return s == Status::kDataOverrun || s == Status::kBufferOverflow ||
                     s == Status::kInvalidBufferSize
                 ? EINVAL
                 : status_errno(s);
    }
  }
  return 0;
}

template <class PostFn>
int post_receives(ibv_recv_wr* wr, ibv_recv_wr** bad, PostFn&& post) {
  for (ibv_recv_wr* w = wr; w != nullptr; w = w->next) {
    Status s = Status::kInvalidParameter;
    if (w->num_sge >= 0 && (w->sg_list || w->num_sge == 0))
      s = post(reinterpret_cast<void*>(static_cast<uintptr_t>(w->wr_id)),
               sgl_of(w->sg_list, w->num_sge));
    if (s != Status::kSuccess) {
      *bad = w;
      return s == Status::kNoMoreEntries ? ENOMEM : EINVAL;
    }
  }
  return 0;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  if (qp == nullptr || bad == nullptr) return EINVAL;
  VQp& q = *qp_of(qp);
  if (q.srq != nullptr || qp->state == IBV_QPS_RESET) {  // IBTA §10.8.2: no receives in RESET
    *bad = wr;
    return EINVAL;
  }
  std::lock_guard lock(q.rq_lock);
  return post_receives(wr, bad,
                       [&](void* ctx, std::span<const Sge> sgl) { return q.h->receive(ctx, sgl); });
}

}  // namespace

namespace urnic::verbs {

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  if (srq == nullptr || bad == nullptr) return EINVAL;
  VSrq& s = *srq_of(srq);
  std::lock_guard lock(s.lock);
  return post_receives(wr, bad,
                       [&](void* ctx, std::span<const Sge> sgl) { return s.h->receive(ctx, sgl); });
}

// ibv_bind_mw (type 1): the window's new rkey is known when the post returns.
int bind_type1(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* b) {
  // urnic's bind names an MR, a zero-length one too (which invalidates the window, IBTA
  // §10.6.7.2.1): a null MR is EINVAL.
  if (qp == nullptr || mw == nullptr || b == nullptr || b->bind_info.mr == nullptr) return EINVAL;
  auto* w = reinterpret_cast<VMw*>(mw);
  auto* m = reinterpret_cast<VMr*>(b->bind_info.mr);
  const bool unbind = b->bind_info.length == 0;
  VQp& q = *qp_of(qp);
  const unsigned acc = b->bind_info.mw_access_flags;
  uint32_t f = op_flags(q, b->send_flags & ~IBV_SEND_INLINE);
  if (acc & IBV_ACCESS_REMOTE_READ) f |= op_flag::kAllowRemoteRead;
  if (acc & IBV_ACCESS_REMOTE_WRITE) f |= op_flag::kAllowRemoteWrite;
  if (acc & IBV_ACCESS_REMOTE_ATOMIC) f |= op_flag::kAllowRemoteAtomic;
  const uintptr_t addr = unbind && b->bind_info.addr == 0
                             ? reinterpret_cast<uintptr_t>(m->mr.addr)
                             : static_cast<uintptr_t>(b->bind_info.addr);
  std::lock_guard lock(q.sq_lock);
  const Status s = q.h->bind(reinterpret_cast<void*>(static_cast<uintptr_t>(b->wr_id)), *m->h,
                             *w->h, reinterpret_cast<const void*>(addr), b->bind_info.length, f);
  if (s != Status::kSuccess) return status_errno(s);
  mw->rkey = w->h->get_remote_token();
  return 0;
}

void fill_post_ops(Context& c) noexcept {
  c.vctx.context.ops.post_send = post_send;
  c.vctx.context.ops.post_recv = post_recv;
}

}  // namespace urnic::verbs

// ---- ibv_wr_* ----------------------------------------------------------------------------------

namespace {

VQp& of(ibv_qp_ex* x) { return *reinterpret_cast<VQp*>(x); }

// Posts the held request (deferred, or rings the doorbell when `last`); records the first error.
void flush_held(VQp& q, bool last) {
  WrBuild& b = q.wr;
  if (!b.ready) return;
  b.ready = false;
  if (b.error != 0) return;
  ibv_send_wr wr{};
  wr.wr_id = b.wr_id;
  wr.send_flags = b.flags;
  wr.sg_list = reinterpret_cast<ibv_sge*>(b.sgl.data());
  wr.num_sge = static_cast<int>(b.sgl.size());
  wr.imm_data = htobe32(b.imm);
  using Op = WrBuild::Op;
  static constexpr ibv_wr_opcode kOps[] = {IBV_WR_SEND,
                                           IBV_WR_SEND,
                                           IBV_WR_SEND_WITH_IMM,
                                           IBV_WR_SEND_WITH_INV,
                                           IBV_WR_RDMA_WRITE,
                                           IBV_WR_RDMA_WRITE_WITH_IMM,
                                           IBV_WR_RDMA_READ,
                                           IBV_WR_ATOMIC_CMP_AND_SWP,
                                           IBV_WR_ATOMIC_FETCH_AND_ADD};
  wr.opcode = kOps[static_cast<int>(b.op)];
  if (b.op == Op::kSendInv) wr.invalidate_rkey = b.rkey;
  if (q.ud) {
    wr.wr.ud = {b.ah, b.remote_qpn, b.remote_qkey};
  } else if (b.op == Op::kCas || b.op == Op::kFaa) {
    wr.wr.atomic = {b.raddr, b.compare_add, b.swap, b.rkey};
  } else {
    wr.wr.rdma = {b.raddr, b.rkey};
  }
  uint32_t flags = op_flags(q, b.flags) | (last ? 0 : op_flag::kDefer);
  if (b.inl) flags |= op_flag::kInline;
  const Status s = b.op == Op::kNone ? Status::kInvalidParameter : post_one(q, wr, flags);
  if (s != Status::kSuccess) b.error = s == Status::kNoMoreEntries ? ENOMEM : status_errno(s);
}

// Starts a new operation: the previous one (complete by now) goes to the ring deferred.
void begin(ibv_qp_ex* x, WrBuild::Op op, uint32_t rkey = 0, uint64_t raddr = 0) {
  VQp& q = of(x);
  if (q.wr.op != WrBuild::Op::kNone && !q.wr.ready && q.wr.error == 0)
    q.wr.error = EINVAL;  // the previous operation never got its data (set_sge / set_inline)
  flush_held(q, false);
  WrBuild& b = q.wr;
  b.op = op;
  b.wr_id = x->wr_id;
  b.flags = x->wr_flags;
  b.rkey = rkey;
  b.raddr = raddr;
  b.inl = false;
  b.sgl.clear();
  b.ah = nullptr;
}

void set_sge_list(ibv_qp_ex* x, size_t n, const ibv_sge* s) {
  WrBuild& b = of(x).wr;
  b.sgl.assign(reinterpret_cast<const Sge*>(s), reinterpret_cast<const Sge*>(s) + n);
  b.ready = true;
}

void set_sge(ibv_qp_ex* x, uint32_t lkey, uint64_t addr, uint32_t len) {
  const ibv_sge s{addr, len, lkey};
  set_sge_list(x, 1, &s);
}

void set_inline_list(ibv_qp_ex* x, size_t n, const ibv_data_buf* bufs) {
  WrBuild& b = of(x).wr;
  // Gathered into the QP's own buffer: the caller may reuse its buffers once this returns, and
  // the request is posted (kInline copies it again into the ring) with the next operation or
  // wr_complete, which keeps the batch on one doorbell.
  b.inline_buf.clear();
  for (size_t i = 0; i < n; ++i) {
    const auto* p = static_cast<const uint8_t*>(bufs[i].addr);
    b.inline_buf.insert(b.inline_buf.end(), p, p + bufs[i].length);
  }
  b.sgl.assign(1, Sge{reinterpret_cast<uintptr_t>(b.inline_buf.data()),
                      static_cast<uint32_t>(b.inline_buf.size()), 0});
  b.inl = true;
  b.ready = true;
}

void set_inline(ibv_qp_ex* x, void* addr, size_t len) {
  const ibv_data_buf d{addr, len};
  set_inline_list(x, 1, &d);
}

void wr_start(ibv_qp_ex* x) {
  VQp& q = of(x);
  q.sq_lock.lock();  // held until wr_complete / wr_abort (rdma-core providers do the same)
  q.wr.error = (x->qp_base.state == IBV_QPS_RTS || x->qp_base.state == IBV_QPS_ERR) ? 0 : EINVAL;
  q.wr.ready = false;
  q.wr.op = WrBuild::Op::kNone;
}

int wr_complete(ibv_qp_ex* x) {
  VQp& q = of(x);
  flush_held(q, true);  // the last request rings the doorbell for the batch
  const int err = q.wr.error;
  q.wr.op = WrBuild::Op::kNone;
  q.sq_lock.unlock();
  return err;
}

void wr_abort(ibv_qp_ex* x) {
  VQp& q = of(x);
  q.wr.ready = false;
  q.wr.op = WrBuild::Op::kNone;
  q.sq_lock.unlock();
}

}  // namespace

namespace urnic::verbs {

void init_wr_ops(VQp& q) noexcept {
  using Op = WrBuild::Op;
  ibv_qp_ex& x = q.qpx;
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
  x.wr_send = [](ibv_qp_ex* p) { begin(p, Op::kSend); };
  x.wr_send_imm = [](ibv_qp_ex* p, __be32 imm) {
    begin(p, Op::kSendImm);
    of(p).wr.imm = be32toh(imm);
  };
  x.wr_send_inv = [](ibv_qp_ex* p, uint32_t rkey) { begin(p, Op::kSendInv, rkey); };
  x.wr_rdma_write = [](ibv_qp_ex* p, uint32_t rkey, uint64_t ra) {
    begin(p, Op::kWrite, rkey, ra);
  };
  x.wr_rdma_write_imm = [](ibv_qp_ex* p, uint32_t rkey, uint64_t ra, __be32 imm) {
    begin(p, Op::kWriteImm, rkey, ra);
    of(p).wr.imm = be32toh(imm);
  };
  x.wr_rdma_read = [](ibv_qp_ex* p, uint32_t rkey, uint64_t ra) { begin(p, Op::kRead, rkey, ra); };
  x.wr_atomic_cmp_swp = [](ibv_qp_ex* p, uint32_t rkey, uint64_t ra, uint64_t cmp, uint64_t swp) {
    begin(p, Op::kCas, rkey, ra);
    of(p).wr.compare_add = cmp;
    of(p).wr.swap = swp;
  };
  x.wr_atomic_fetch_add = [](ibv_qp_ex* p, uint32_t rkey, uint64_t ra, uint64_t add) {
    begin(p, Op::kFaa, rkey, ra);
    of(p).wr.compare_add = add;
  };
  x.wr_set_ud_addr = [](ibv_qp_ex* p, ibv_ah* ah, uint32_t qpn, uint32_t qkey) {
    WrBuild& b = of(p).wr;
    b.ah = ah;
    b.remote_qpn = qpn;
    b.remote_qkey = qkey;
  };
  x.wr_set_sge = set_sge;
  x.wr_set_sge_list = set_sge_list;
  x.wr_set_inline_data = set_inline;
  x.wr_set_inline_data_list = set_inline_list;
  q.wr.sgl.reserve(16);
  q.wr.inline_buf.reserve(std::max<size_t>(q.cap.max_inline_data, 64));
}

}  // namespace urnic::verbs
