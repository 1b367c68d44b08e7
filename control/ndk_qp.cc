// Queue pairs of the public API: creation and teardown through the engine's mailbox, the
// posting calls (each builds one dp::SendWqe / dp::RecvWqe on the stack and hands it to
// dp::Qp::post_send / post_recv: no lock, no allocation, no system call), and the QP extensions
// (immediate data, atomics, manual connect).
#include <algorithm>
#include <bit>
#include <cstring>

#include "control/ndk_internal.h"
#include "control/ndk_qp_post.h"
#include "control/ndk_remote.h"

namespace urnic {
namespace detail {
namespace {

using dp::WrOpcode;

// The local half of a manual-connect address vector: the source GID `av` names (sgid_index),
// or the adapter's address of the destination's IP version. False when there is none, or the
// GID's version is not the destination's.
bool source_address(ctl::Adapter& a, const AddressVector& av, wire::NetHeaders* n) {
  if (av.sgid_index >= 0) {
    const auto gids = a.control().gids();
    if (static_cast<size_t>(av.sgid_index) >= gids.size()) return false;
    const ctl::Gid& g = gids[static_cast<size_t>(av.sgid_index)];
    if (ctl::gid_is_ipv4(g) == av.ipv6) return false;
    if (av.ipv6)
      n->src_ip6 = g;
    else
      n->src_ip4 = ctl::gid_to_ipv4(g);
    return true;
  }
  if (av.ipv6) {
    if (!a.ipv6()) return false;
    n->src_ip6 = *a.ipv6();
    return true;
  }
  if (a.ipv4() == 0) return false;
  n->src_ip4 = a.ipv4();
  return true;
}

}  // namespace

bool make_net_headers(ctl::Adapter& a, const AddressVector& av, wire::NetHeaders* n) {
  // The local half of the address vector is the adapter's own.
  n->src_mac = a.mac();
  n->dst_mac = av.dst_mac;
  n->ipv6 = av.ipv6;
  if (!source_address(a, av, n)) return false;
  n->dst_ip4 = av.dst_ipv4;
  n->dst_ip6 = av.dst_ipv6;
  n->traffic_class = av.traffic_class;
  n->hop_limit = av.hop_limit;
  n->flow_label = av.flow_label;
  return true;
}

namespace {

// The data part of an initiator request: the SGE list, or (INLINE) the bytes it names, copied
// now so that the caller may reuse them on return (their tokens are ignored). Checks, in order:
// a null list or a wrapping SGE (kInvalidParameter), too many SGEs (kDataOverrun), too many
// bytes (kBufferOverflow; INLINE: kInvalidBufferSize). Totals are summed in 64 bits, so SGE
// lengths whose 32-bit sum wraps are caught as well. Inlined into each post: with a second
// caller (send_datagram) the compiler made it a call, 25 instructions per 64 B WRITE (bench/cost).
[[gnu::always_inline]] inline Status fill_data(QpImpl* q, dp::SendWqe& w, std::span<const Sge> sgl,
                                               uint32_t max_sge) noexcept {
  if (w.flags & op_flag::kInline) {
    if (null_list(sgl)) return Status::kInvalidParameter;
    uint64_t total = 0;
    for (const Sge& s : sgl) {
      // Inline bytes are read now, through the address itself: a null or wrapping address
      // would fault in the memcpy below.
      if (s.length != 0 && (s.addr == 0 || wraps(s))) return Status::kInvalidParameter;
      total += s.length;
      // Inside the loop: the count of an INLINE list is not bounded, so stop before the sum
      // could wrap.
      if (total > q->max_inline) return Status::kInvalidBufferSize;
    }
    uint32_t off = 0;
    for (const Sge& s : sgl) {
      if (s.length != 0)
        std::memcpy(w.inline_data + off, reinterpret_cast<const void*>(s.addr), s.length);
      off += s.length;
    }
    w.num_sge = 0;
    w.length = static_cast<uint32_t>(total);
    return Status::kSuccess;
  }
  return fill_sgl(w, sgl, max_sge);
}

// Send, SendAndInvalidate, Write, Read and their immediate-data forms.
Status post_data(QpImpl* q, WrOpcode op, void* ctx, std::span<const Sge> sgl, uint32_t flags,
                 uint32_t allowed, uint32_t max_sge, uint64_t remote_address, uint32_t remote_token,
                 uint32_t imm_or_inv) noexcept {
  // A QP whose close was requested takes no new work (its close flushes what it has).
  if (is_closing(q)) return fail(q, Status::kInvalidDeviceState);
  if ((flags & ~allowed) != 0) return fail(q, Status::kInvalidParameter);
  StagedWqe staged(q);  // written in place, once (issue 42)
  dp::SendWqe& w = staged.w;
  w.opcode = op;
  w.request_context = ctx;
  w.flags = flags;
  w.remote_addr = remote_address;
  w.rkey = remote_token;
  w.imm_or_inv = imm_or_inv;
  if (Status s = fill_data(q, w, sgl, max_sge); s != Status::kSuccess) return fail(q, s);
  return staged.commit(q);
}

// Atomics: the remote address must be 8-byte aligned (IBTA §9.4.5) and the result SGE is 8
// bytes. The result SGE itself needs no alignment: the original value is scattered into it
// like READ data (dp::scatter_lc), so a misaligned local buffer is legal.
Status post_atomic(QpImpl* q, WrOpcode op, void* ctx, const Sge& result, uint64_t remote_address,
                   uint32_t remote_token, uint64_t compare_add, uint64_t swap,
                   uint32_t flags) noexcept {
  if (is_closing(q)) return fail(q, Status::kInvalidDeviceState);
  if ((flags & ~kLocalFlags) != 0 || result.length != sizeof(uint64_t) || wraps(result) ||
      (remote_address & (sizeof(uint64_t) - 1)) != 0)
    return fail(q, Status::kInvalidParameter);
  StagedWqe staged(q);
  dp::SendWqe& w = staged.w;
  w.opcode = op;
  w.request_context = ctx;
  w.flags = flags;
  w.num_sge = 1;
  w.sge[0] = result;
  w.length = sizeof(uint64_t);
  w.remote_addr = remote_address;
  w.rkey = remote_token;
  w.compare_add = compare_add;
  w.swap = swap;
  return staged.commit(q);
}

// A create that failed after the QP was registered (mu held): undo and report.
void fail_create_locked(QpImpl* q, Status st, CreateCompletion done, void* ctx) {
  (void)log_create("QP creation", st);  // the engine refused it: the status says why
  AdapterImpl* a = q->adapter;
  std::erase(a->objects, static_cast<ObjectImpl*>(q));
  for (ObjectImpl* o : q->antecedents) --o->successors;
  a->ctl->free_qpn(q->qp.qpn());
  a->defer_locked([q, st, done, ctx] {
    done(ctx, st, nullptr);
    delete q;
  });
}

}  // namespace

std::unique_ptr<EngineOp> make_op(QpImpl* q, dp::MailboxMsg::Kind kind) {
  auto op = std::make_unique<EngineOp>();
  op->msg.kind = kind;
  op->engine = q->qp.config().engine;
  op->msg.ep = &q->adapter->ctl->endpoint(op->engine);
  op->msg.qp = &q->qp;
  return op;
}

Status create_qp(PdImpl* pd, CqImpl* r, CqImpl* s, SrqImpl* srq, void* qp_context,
                 uint32_t rq_depth, uint32_t sq_depth, uint32_t max_rsge, uint32_t max_ssge,
                 uint32_t inline_size, CreateCompletion cb, void* ctx, Handle<Qp>* out,
                 const uint32_t* ud_qkey) noexcept {
  AdapterImpl* a = pd->adapter;
  const AdapterInfo& info = a->info;
  // The CQs must be this adapter's and the SRQ this PD's (which also keeps receives in one
  // protection domain).
  if (r->adapter != a || s->adapter != a || (srq != nullptr && srq->pd != pd))
    return Status::kInvalidParameter;
  // A CQ has one producer engine and an SRQ one consumer engine: the QP runs on its CQs'
  // engine (NdkCreateCq's affinity placed them), which its SRQ's must be too.
  if (r->engine != s->engine || (srq != nullptr && srq->engine != s->engine))
    return Status::kInvalidParameterMix;
  if (sq_depth == 0 || sq_depth > info.max_initiator_queue_depth ||
      max_ssge > info.max_initiator_request_sge || inline_size > info.max_inline_data_size)
    return Status::kInvalidParameter;
  if (srq == nullptr && (rq_depth == 0 || rq_depth > info.max_receive_queue_depth ||
                         max_rsge > info.max_receive_request_sge))
    return Status::kInvalidParameter;
  if (cb == nullptr && (out == nullptr || a->on_control_thread()))
    return out == nullptr ? Status::kInvalidParameter : Status::kInvalidDeviceState;
  // A closing PD creates nothing (checked again under mu below); one the adapter's close tore
  // down has no adapter behind it to allocate from.
  if (is_closing(pd)) return Status::kInvalidDeviceState;
  SyncWait sync;
  const CreateCompletion done = cb != nullptr ? cb : &SyncWait::on_create;
  void* const done_ctx = cb != nullptr ? ctx : &sync;
  const Status st = guarded([&] {
    ctl::QpInit init;
    init.pd = pd->pd;
    init.send_cq = &s->cq;
    init.recv_cq = &r->cq;
    init.srq = srq != nullptr ? &srq->srq : nullptr;
    init.context = qp_context;
    init.sq_depth = sq_depth;
    init.rq_depth = rq_depth;
    init.max_send_sge = max_ssge;
    init.max_recv_sge = max_rsge;
    init.max_inline = inline_size;
    init.limit_outstanding = true;  // NDK queue depths bound what is outstanding (ndkpi.md §2.4)
    init.adaptive_retransmit = a->adaptive_retransmit;
    init.broken_rules = a->broken_rules;
    init.congestion = a->congestion;
    dp::QpConfig c;
    if (Status st = ctl::make_qp_config(init, 0, &c); st != Status::kSuccess) return st;
    if (ud_qkey != nullptr) {
      c.ud = true;
      c.ud_mtu = largest_path_mtu(a);
    }
    const uint32_t qpn = a->ctl->alloc_qpn();
    if (qpn == 0) return Status::kInsufficientResources;
    c.qpn = qpn;
    c.engine = s->engine;
    a->ctl->place_qpn(qpn, c.engine);  // frames for it reach its engine (dataplane/steering.h)
    std::unique_ptr<QpImpl> q;
    try {
      q = std::make_unique<QpImpl>(a, pd, r, s, srq, c);
    } catch (...) {
      a->ctl->free_qpn(qpn);
      throw;
    }
    std::lock_guard lk(a->mu);
    const bool usable = !a->shutting_down && pd->life == Life::kLive && r->life == Life::kLive &&
                        s->life == Life::kLive && (srq == nullptr || srq->life == Life::kLive);
    if (!usable) {
      a->ctl->free_qpn(qpn);
      return Status::kInvalidDeviceState;
    }
    QpImpl* qp = q.release();
    qp->life = Life::kCreating;
    a->adopt_locked(qp, {pd, r, s, srq});
    // Install on the engine, then RESET -> INIT (every remote right: NDK controls access with
    // MRs and windows, not per QP), so that receives may be posted at once.
    auto add = make_op(qp, dp::MailboxMsg::Kind::kAddQp);
    const uint32_t qkey = ud_qkey != nullptr ? *ud_qkey : 0;
    add->then = [a, qp, done, done_ctx, qkey](Status r1) {
      if (r1 != Status::kSuccess) {
        fail_create_locked(qp, r1, done, done_ctx);
        return;
      }
      auto init = make_op(qp, dp::MailboxMsg::Kind::kModifyQp);
      init->msg.attr.state = dp::QpState::kInit;
      init->msg.attr.access = qp_access::kAll;
      init->msg.mask = dp::qp_attr::kState | dp::qp_attr::kAccessFlags;
      if (qp->qp.config().ud) {
        // A datagram QP has no remote rights; its Q_Key is what RESET -> INIT requires.
        init->msg.attr.qkey = qkey;
        init->msg.mask = dp::qp_attr::kState | dp::qp_attr::kQkey;
      }
      init->then = [a, qp, done, done_ctx](Status r2) {
        if (r2 != Status::kSuccess) {
          // Cannot happen from RESET with valid attributes; detach before failing.
          auto rm = make_op(qp, dp::MailboxMsg::Kind::kDestroyQp);
          rm->then = [qp, r2, done, done_ctx](Status) {
            fail_create_locked(qp, r2, done, done_ctx);
          };
          a->enqueue_op_locked(std::move(rm));
          return;
        }
        qp->life = Life::kLive;
        a->defer_locked([qp, done, done_ctx] { done(done_ctx, Status::kSuccess, &qp->pub_); });
      };
      a->enqueue_op_locked(std::move(init));
    };
    a->enqueue_op_locked(std::move(add));
    return Status::kPending;
  });
  if (st != Status::kPending || cb != nullptr) return log_create("QP creation", st);
  a->wait(sync.done);  // a failure was logged by fail_create_locked
  if (sync.status == Status::kSuccess) *out = Handle<Qp>(static_cast<Qp*>(sync.object));
  return sync.status;
}

QpImpl::QpImpl(AdapterImpl* a, PdImpl* p, CqImpl* r, CqImpl* s, SrqImpl* q, const dp::QpConfig& cfg)
    : ImplOf(ObjectType::kQp, a),
      ext_(this),
      conn_(this),
      pd(p),
      rcq(r),
      scq(s),
      srq(q),
      qp(cfg),
      pd_num(cfg.pd),
      max_send_sge(cfg.max_send_sge),
      max_read_sge(std::min(cfg.max_send_sge, a->info.max_read_request_sge)),
      max_recv_sge(cfg.max_recv_sge),
      max_inline(cfg.max_inline) {}

void* QpImpl::extension(const ExtensionId& id, Version v) noexcept {
  if (id == QpExtension::kId && version_ok(v, QpExtension::kVersion)) return &ext_;
  if (id == QpConnectExtension::kId && version_ok(v, QpConnectExtension::kVersion)) return &conn_;
  return nullptr;
}

Status QpImpl::teardown_locked() {
  // Close: flush (outstanding work completes with kCancelled, ndkpi.md §7.5), then detach from
  // the engine; the QP number is free again after that.
  // Sends `kind` to the engine (the step after `teardown_step`); its answer moves on to `next`.
  auto ask_engine = [this](dp::MailboxMsg::Kind kind, int next) {
    auto op = make_op(this, kind);
    op->then = [this, next](Status) { teardown_step = next; };
    adapter->enqueue_op_locked(std::move(op));
    teardown_step = next - 1;
    return Status::kPending;
  };
  switch (teardown_step) {
    case 0:
      return ask_engine(dp::MailboxMsg::Kind::kFlushQp, 2);
    case 2:
      return ask_engine(dp::MailboxMsg::Kind::kDestroyQp, 4);
    case 4:
      adapter->ctl->free_qpn(qp.qpn());
      return Status::kSuccess;
    default:
      return Status::kPending;  // waiting for the engine
  }
}

Status qp_modify(QpImpl* q, const dp::QpAttr& attr, uint32_t mask, RequestCompletion done,
                 void* ctx) noexcept {
  AdapterImpl* a = q->adapter;
  return guarded([&] {
    auto op = make_op(q, dp::MailboxMsg::Kind::kModifyQp);
    op->msg.attr = attr;
    op->msg.mask = mask;
    if ((mask & dp::qp_attr::kAv) != 0 && attr.av.dst_mac == wire::MacAddr{}) {
      // Resolve the peer's MAC first (ARP / neighbour discovery on the control thread).
      const ctl::Gid gid = attr.av.ipv6 ? attr.av.dst_ip6 : ctl::gid_from_ipv4(attr.av.dst_ip4);
      op->prepare = [w = NeighbourWait(a, gid)](dp::MailboxMsg& m) mutable {
        return w.poll(&m.attr.av.dst_mac);
      };
    }
    const dp::MailboxMsg* m = &op->msg;  // the op, and so its message, outlives `then`
    op->then = [a, q, m, done, ctx](Status st) {
      if (st == Status::kSuccess && (m->mask & dp::qp_attr::kAv) != 0) {
        q->has_peer = true;
        q->peer = m->attr.av.ipv6 ? m->attr.av.dst_ip6 : ctl::gid_from_ipv4(m->attr.av.dst_ip4);
        q->peer_mac = m->attr.av.dst_mac;
      }
      if (done != nullptr) a->defer_locked([done, ctx, st] { done(ctx, st); });
    };
    std::lock_guard lk(a->mu);
    if (q->life != Life::kLive) return Status::kInvalidDeviceState;
    a->enqueue_op_locked(std::move(op));
    return Status::kPending;
  });
}

dp::Qp& dp_qp(Qp& q) noexcept { return QpImpl::of(q)->qp; }

}  // namespace detail

using detail::QpImpl;
using dp::WrOpcode;

// ---- Pd: QP creation ----------------------------------------------------------------------------

Status Pd::create_qp(Cq& receive_cq, Cq& initiator_cq, void* qp_context,
                     uint32_t receive_queue_depth, uint32_t initiator_queue_depth,
                     uint32_t max_receive_request_sge, uint32_t max_initiator_request_sge,
                     uint32_t inline_data_size, CreateCompletion completion, void* request_context,
                     Handle<Qp>* out) noexcept {
  using C = detail::CqImpl;
  if (impl_->remote)
    return detail::remote_create_qp(impl_, C::base_of(receive_cq), C::base_of(initiator_cq),
                                    qp_context, receive_queue_depth, initiator_queue_depth,
                                    max_receive_request_sge, max_initiator_request_sge,
                                    inline_data_size, out);
  // An attached adapter's CQ is not this adapter's (create_qp would refuse it as another's).
  if (C::base_of(receive_cq)->remote || C::base_of(initiator_cq)->remote)
    return Status::kInvalidParameter;
  return detail::create_qp(impl(), detail::CqImpl::of(receive_cq), detail::CqImpl::of(initiator_cq),
                           nullptr, qp_context, receive_queue_depth, initiator_queue_depth,
                           max_receive_request_sge, max_initiator_request_sge, inline_data_size,
                           completion, request_context, out, nullptr);
}

Status Pd::create_qp_with_srq(Cq& receive_cq, Cq& initiator_cq, Srq& srq, void* qp_context,
                              uint32_t initiator_queue_depth, uint32_t max_initiator_request_sge,
                              uint32_t inline_data_size, CreateCompletion completion,
                              void* request_context, Handle<Qp>* out) noexcept {
  using C = detail::CqImpl;
  if (impl_->remote)
    return detail::remote_create_qp(impl_, C::base_of(receive_cq), C::base_of(initiator_cq),
                                    qp_context, 1, initiator_queue_depth, 1,
                                    max_initiator_request_sge, inline_data_size, out,
                                    detail::SrqImpl::base_of(srq));
  if (C::base_of(receive_cq)->remote || C::base_of(initiator_cq)->remote ||
      detail::SrqImpl::base_of(srq)->remote)
    return Status::kInvalidParameter;
  return detail::create_qp(impl(), detail::CqImpl::of(receive_cq), detail::CqImpl::of(initiator_cq),
                           detail::SrqImpl::of(srq), qp_context, 0, initiator_queue_depth, 0,
                           max_initiator_request_sge, inline_data_size, completion, request_context,
                           out, nullptr);
}

// ---- Qp: posting --------------------------------------------------------------------------------

// Attach mode (ndk_remote.h): the shared rings. The test costs embedded posts one load of a
// field beside `closing`, which they read anyway.
Status Qp::send(void* request_context, std::span<const Sge> sgl, uint32_t flags) noexcept {
  if (impl_->remote) [[unlikely]]
    return detail::remote_post(impl_, shm::SendOp::kSend, detail::kSendFlags, request_context, sgl,
                               0, 0, flags);
  return detail::post_data(impl(), WrOpcode::kSend, request_context, sgl, flags, detail::kSendFlags,
                           impl()->max_send_sge, 0, 0, 0);
}

Status Qp::send_and_invalidate(void* request_context, std::span<const Sge> sgl, uint32_t flags,
                               uint32_t remote_token) noexcept {
  if (impl_->remote) [[unlikely]]
    return detail::remote_post(impl_, shm::SendOp::kSendInvalidate, detail::kSendFlags,
                               request_context, sgl, 0, remote_token, flags);
  return detail::post_data(impl(), WrOpcode::kSendWithInv, request_context, sgl, flags,
                           detail::kSendFlags, impl()->max_send_sge, 0, 0, remote_token);
}

Status Qp::read(void* request_context, std::span<const Sge> sgl, uint64_t remote_address,
                uint32_t remote_token, uint32_t flags) noexcept {
  if (impl_->remote) [[unlikely]]
    return detail::remote_post(impl_, shm::SendOp::kRead, detail::kReadFlags, request_context, sgl,
                               remote_address, remote_token, flags);
  return detail::post_data(impl(), WrOpcode::kRead, request_context, sgl, flags, detail::kReadFlags,
                           impl()->max_read_sge, remote_address, remote_token, 0);
}

Status Qp::write(void* request_context, std::span<const Sge> sgl, uint64_t remote_address,
                 uint32_t remote_token, uint32_t flags) noexcept {
  if (impl_->remote) [[unlikely]]
    return detail::remote_post(impl_, shm::SendOp::kWrite, detail::kWriteFlags, request_context,
                               sgl, remote_address, remote_token, flags);
  return detail::post_data(impl(), WrOpcode::kWrite, request_context, sgl, flags,
                           detail::kWriteFlags, impl()->max_send_sge, remote_address, remote_token,
                           0);
}

Status Qp::receive(void* request_context, std::span<const Sge> sgl) noexcept {
  if (impl_->remote) [[unlikely]] {
    if (detail::is_closing(impl_)) return Status::kInvalidDeviceState;
    return detail::remote_receive(impl_, request_context, sgl);
  }
  if (detail::is_closing(impl())) return Status::kInvalidDeviceState;
  if (impl()->srq != nullptr) return Status::kInvalidDeviceRequest;
  dp::RecvWqe w;
  w.request_context = request_context;
  if (Status s = detail::fill_sgl(w, sgl, impl()->max_recv_sge); s != Status::kSuccess) return s;
  return impl()->qp.post_recv(w);
}

void Qp::flush() noexcept {
  if (detail::is_closing(impl_)) return;  // its close flushes it
  if (impl_->remote) return detail::remote_flush(impl_);
  detail::AdapterImpl* a = impl()->adapter;
  (void)detail::guarded([&] {
    auto op = detail::make_op(impl(), dp::MailboxMsg::Kind::kFlushQp);
    std::lock_guard lk(a->mu);
    if (impl()->life == detail::Life::kLive) a->enqueue_op_locked(std::move(op));
    return Status::kSuccess;
  });
}

// ---- Extensions ---------------------------------------------------------------------------------

// Attach mode's QPs (control/ndk_remote.cc) post these on their shared ring (the same checks
// first); qp_ is a QpImpl below that test.
Status QpExtension::send_with_immediate(void* request_context, std::span<const Sge> sgl,
                                        uint32_t flags, uint32_t immediate) noexcept {
  if (qp_->remote)
    return detail::remote_post(qp_, shm::SendOp::kSendImm, detail::kSendFlags, request_context, sgl,
                               0, 0, flags, immediate);
  auto* const q = static_cast<QpImpl*>(qp_);
  return detail::post_data(q, WrOpcode::kSendWithImm, request_context, sgl, flags,
                           detail::kSendFlags, q->max_send_sge, 0, 0, immediate);
}

Status QpExtension::write_with_immediate(void* request_context, std::span<const Sge> sgl,
                                         uint64_t remote_address, uint32_t remote_token,
                                         uint32_t flags, uint32_t immediate) noexcept {
  if (qp_->remote)
    return detail::remote_post(qp_, shm::SendOp::kWriteImm, detail::kWriteImmFlags, request_context,
                               sgl, remote_address, remote_token, flags, immediate);
  auto* const q = static_cast<QpImpl*>(qp_);
  return detail::post_data(q, WrOpcode::kWriteWithImm, request_context, sgl, flags,
                           detail::kWriteImmFlags, q->max_send_sge, remote_address, remote_token,
                           immediate);
}

Status QpExtension::compare_swap(void* request_context, const Sge& result, uint64_t remote_address,
                                 uint32_t remote_token, uint64_t compare, uint64_t swap,
                                 uint32_t flags) noexcept {
  if (qp_->remote)
    return detail::remote_atomic(qp_, shm::SendOp::kCompareSwap, request_context, result,
                                 remote_address, remote_token, compare, swap, flags);
  return detail::post_atomic(static_cast<QpImpl*>(qp_), WrOpcode::kCompareSwap, request_context,
                             result, remote_address, remote_token, compare, swap, flags);
}

Status QpExtension::fetch_add(void* request_context, const Sge& result, uint64_t remote_address,
                              uint32_t remote_token, uint64_t add, uint32_t flags) noexcept {
  if (qp_->remote)
    return detail::remote_atomic(qp_, shm::SendOp::kFetchAdd, request_context, result,
                                 remote_address, remote_token, add, 0, flags);
  return detail::post_atomic(static_cast<QpImpl*>(qp_), WrOpcode::kFetchAdd, request_context,
                             result, remote_address, remote_token, add, 0, flags);
}

Status QpExtension::send_datagram(void* request_context, std::span<const Sge> sgl, uint32_t flags,
                                  const AddressHandle& destination, uint32_t remote_qpn,
                                  uint32_t remote_qkey, const uint32_t* immediate) noexcept {
  if (qp_->remote)
    return detail::remote_send_datagram(qp_, request_context, sgl, flags, destination, remote_qpn,
                                        remote_qkey, immediate);
  auto* const q = static_cast<QpImpl*>(qp_);
  if (detail::is_closing(q)) return detail::fail(q, Status::kInvalidDeviceState);
  if (!q->qp.config().ud) return detail::fail(q, Status::kInvalidDeviceRequest);
  constexpr uint32_t kAllowed =
      op_flag::kSilentSuccess | op_flag::kSendAndSolicitEvent | op_flag::kInline | op_flag::kDefer;
  if ((flags & ~kAllowed) != 0 || remote_qpn > 0xFFFFFF ||
      detail::AddressHandleAccess::adapter(destination) != q->adapter)
    return detail::fail(q, Status::kInvalidParameter);
  detail::StagedWqe staged(q);
  dp::SendWqe& w = staged.w;
  w.opcode = immediate != nullptr ? WrOpcode::kSendWithImm : WrOpcode::kSend;
  w.request_context = request_context;
  w.flags = flags;
  w.imm_or_inv = immediate != nullptr ? *immediate : 0;
  dp::set_ud_destination(w, detail::AddressHandleAccess::net(destination), remote_qpn, remote_qkey);
  if (Status s = detail::fill_data(q, w, sgl, q->max_send_sge); s != Status::kSuccess)
    return detail::fail(q, s);
  // One datagram is one packet (IBTA §9.8.2).
  if (w.length > q->qp.config().ud_mtu) return detail::fail(q, Status::kBufferOverflow);
  return staged.commit(q);
}

uint32_t QpExtension::max_datagram_size() const noexcept {
  if (qp_->remote) return detail::remote_max_datagram(qp_);
  const auto* const q = static_cast<const QpImpl*>(qp_);
  return q->qp.config().ud ? q->qp.config().ud_mtu : 0;
}

// Attach mode: the daemon's engine counts, not this process: one request.
QpCounters QpExtension::counters() const noexcept {
  if (qp_->remote) return detail::remote_qp_counters(qp_);
  return static_cast<const QpImpl*>(qp_)->qp.counters();
}

// Attach mode's QPs (control/ndk_remote.cc) have their own; qp_ is a QpImpl below that test.
uint32_t QpConnectExtension::qpn() const noexcept {
  if (qp_->remote) return detail::remote_qpn(qp_);
  return static_cast<QpImpl*>(qp_)->qp.qpn();
}

QpState QpConnectExtension::state() const noexcept {
  if (qp_->remote) return detail::remote_qp_state(qp_);
  return static_cast<QpImpl*>(qp_)->qp.public_state();
}

Status QpConnectExtension::modify(const QpAttributes& at, uint32_t mask,
                                  RequestCompletion completion, void* request_context) noexcept {
  // A closing QP is not moved any more (its close flushes and destroys it); a defunct one has no
  // adapter behind it.
  if (detail::is_closing(qp_)) return Status::kInvalidDeviceState;
  if (qp_->remote) return detail::remote_modify(qp_, at, mask);
  QpImpl* const q = static_cast<QpImpl*>(qp_);
  detail::AdapterImpl* a = q->adapter;
  dp::QpAttr d;
  d.state = at.state;
  d.access = at.access;
  d.path_mtu = at.path_mtu;
  d.dest_qpn = at.dest_qpn;
  d.rq_psn = at.rq_psn;
  d.sq_psn = at.sq_psn;
  d.max_dest_rd_atomic = at.max_dest_rd_atomic;
  d.max_rd_atomic = at.max_rd_atomic;
  d.timeout = at.timeout;
  d.retry_cnt = at.retry_cnt;
  d.rnr_retry = at.rnr_retry;
  d.min_rnr_timer = at.min_rnr_timer;
  d.qkey = at.qkey;
  if ((mask & qp_attr_mask::kAv) && !detail::make_net_headers(*a->ctl, at.av, &d.av))
    return Status::kInvalidParameter;
  d.selective_repeat = at.selective_repeat;
  if ((mask & qp_attr_mask::kSelectiveRepeat) && at.selective_repeat &&
      !q->qp.prepare_selective_repeat())
    return Status::kInsufficientResources;
  if (mask & qp_attr_mask::kCongestion) {
    if (!detail::valid_congestion(at.congestion)) return Status::kInvalidParameter;
    d.cc = at.congestion;
    // A maximum left 0 is the adapter's (resolved from the link speed when it opened).
    if (d.cc.dcqcn.max_rate_mbps == 0) {
      d.cc.dcqcn.max_rate_mbps = a->congestion.dcqcn.max_rate_mbps;
      d.cc.dcqcn.min_rate_mbps = std::min(d.cc.dcqcn.min_rate_mbps, d.cc.dcqcn.max_rate_mbps);
    }
  }
  // Attribute errors are reported now; whether the transition is legal is decided by the
  // engine against the state the earlier modifies leave (they may still be queued).
  if (static_cast<size_t>(at.state) >= kQpStateCount ||
      dp::validate_modify(q->qp.public_state(), d, mask, q->qp.config().ud) ==
          Status::kInvalidParameter)
    return Status::kInvalidParameter;
  if (completion != nullptr) return detail::qp_modify(q, d, mask, completion, request_context);
  if (a->on_control_thread()) return Status::kInvalidDeviceState;
  detail::SyncWait sync;
  const Status s = detail::qp_modify(q, d, mask, &detail::SyncWait::on_request, &sync);
  if (s != Status::kPending) return s;
  a->wait(sync.done);
  return sync.status;
}

Status QpConnectExtension::query(QpAttributes* out) const noexcept {
  if (out == nullptr) return Status::kInvalidParameter;
  if (qp_->remote) return detail::remote_query(qp_, out);
  const QpImpl* const qi = static_cast<const QpImpl*>(qp_);
  // The engine writes attr only while it applies a modify; the consumer's modifies and the
  // connection's have completed (their completions synchronise with the engine) and none runs
  // now (the documented rule), so these reads race with nothing.
  const dp::QpAttr& a = qi->qp.attr();
  QpAttributes q;
  q.state = qi->qp.public_state();
  q.access = a.access;
  q.path_mtu = a.path_mtu;
  q.dest_qpn = a.dest_qpn;
  q.rq_psn = a.rq_psn;
  q.sq_psn = a.sq_psn;
  q.max_dest_rd_atomic = a.max_dest_rd_atomic;
  q.max_rd_atomic = a.max_rd_atomic;
  q.timeout = a.timeout;
  q.retry_cnt = a.retry_cnt;
  q.rnr_retry = a.rnr_retry;
  q.min_rnr_timer = a.min_rnr_timer;
  q.congestion = a.cc;
  q.selective_repeat = a.selective_repeat;
  q.qkey = a.qkey;
  q.av.ipv6 = a.av.ipv6;
  q.av.dst_ipv4 = a.av.dst_ip4;
  q.av.dst_ipv6 = a.av.dst_ip6;
  q.av.dst_mac = a.av.dst_mac;
  q.av.traffic_class = a.av.traffic_class;
  q.av.hop_limit = a.av.hop_limit;
  q.av.flow_label = a.av.flow_label;
  *out = q;
  return Status::kSuccess;
}

}  // namespace urnic
