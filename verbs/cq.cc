// Completion queues and completion channels. A channel's fd is an epoll set of its CQs'
// notification eventfds (CqExtension::notification_fd), so that it works with poll/epoll as
// rdma-core's does, and ibv_get_cq_event blocks in it.
#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>

#include "verbs/internal.h"

using namespace urnic;
using namespace urnic::verbs;

namespace {

// Control thread: an overrun kills the CQ (NDK) and is IBV_EVENT_CQ_ERR in ibverbs.
void on_cq_notification(void* context, Status s) {
  if (s != Status::kBufferOverflow) return;  // arms reach the consumer through the eventfd
  VCq* c = static_cast<VCq*>(context);
  ibv_async_event e{};
  e.event_type = IBV_EVENT_CQ_ERR;
  e.element.cq = &c->cq;
  c->ctx->push_event(e);
}

ibv_wc_opcode wc_opcode(const ResultEx& r) {
  switch (r.type) {
    case OperationType::kSend:
      return IBV_WC_SEND;
    case OperationType::kWrite:
      return IBV_WC_RDMA_WRITE;
    case OperationType::kRead:
      return IBV_WC_RDMA_READ;
    case OperationType::kCompareSwap:
      return IBV_WC_COMP_SWAP;
    case OperationType::kFetchAdd:
      return IBV_WC_FETCH_ADD;
    case OperationType::kBind:
      return IBV_WC_BIND_MW;
    case OperationType::kInvalidate:
      return IBV_WC_LOCAL_INV;
    case OperationType::kFastRegister:
      return IBV_WC_LOCAL_INV;  // no fast-register verb is posted through ibverbs here
    default:
      return (r.flags & kResultRdmaWrite) ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
  }
}

}  // namespace

void urnic::verbs::to_wc(const ResultEx& r, ibv_wc* wc) noexcept {
  std::memset(wc, 0, sizeof *wc);
  wc->wr_id = reinterpret_cast<uintptr_t>(r.request_context);
  // provider_error_code is the enum ibv_wc_status value (types.h WcStatus); a failure without
  // one (a flush) is IBV_WC_WR_FLUSH_ERR.
  wc->status = r.status == Status::kSuccess ? IBV_WC_SUCCESS
               : r.provider_error_code != 0 ? static_cast<ibv_wc_status>(r.provider_error_code)
                                            : IBV_WC_WR_FLUSH_ERR;
  wc->opcode = wc_opcode(r);
  wc->qp_num = r.qpn;
  if (r.status != Status::kSuccess) return;  // only wr_id, status, qp_num are valid (verbs)
  wc->byte_len = r.bytes_transferred;
  if (r.flags & kResultHasImmediate) {
    wc->wc_flags |= IBV_WC_WITH_IMM;
    wc->imm_data = htobe32(static_cast<uint32_t>(r.type_specific_completion_output));
  } else if (r.flags & kResultInvalidated) {
    wc->wc_flags |= IBV_WC_WITH_INV;
    wc->invalidated_rkey = static_cast<uint32_t>(r.type_specific_completion_output);
  }
  if (r.flags & kResultDatagram) {
    // UD: the buffer starts with the GRH (RoCE: the IP header in its place); the sender's QPN.
    // SLID, SL and the P_Key index are 0 on RoCE (one P_Key, no LIDs).
    wc->wc_flags |= IBV_WC_GRH;
    wc->src_qp = r.src_qpn;
  }
}

namespace {

int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  if (cq == nullptr || n < 0 || (wc == nullptr && n > 0)) return -1;
  VCq* c = cq_of(cq);
  ResultEx r[16];
  int got = 0;
  std::lock_guard lock(c->lock);
  for (bool drove = false;;) {
    const size_t want = std::min<size_t>(16, static_cast<size_t>(n - got));
    const size_t k = want ? c->h->get_results_ex(std::span(r, want)) : 0;
    for (size_t i = 0; i < k; ++i) to_wc(r[i], &wc[got + i]);
    got += static_cast<int>(k);
    if (k == want && got < n) continue;
    // Short of what was asked: this thread runs an engine step (the application's polling is
    // what drives the RNIC, as urnic-perf's loop does) and looks once more.
    if (got == n || drove) return got;
    Runtime::get().drive();
    drove = true;
  }
}

int req_notify_cq(ibv_cq* cq, int solicited_only) {
  if (cq == nullptr) return EINVAL;
  VCq* c = cq_of(cq);
  std::lock_guard lock(c->lock);
  c->h->arm(solicited_only ? CqNotify::kSolicited : CqNotify::kAny);
  return 0;
}

}  // namespace

namespace urnic::verbs {

void fill_cq_ops(Context& c) noexcept {
  c.vctx.context.ops.poll_cq = poll_cq;
  c.vctx.context.ops.req_notify_cq = req_notify_cq;
  c.vctx.create_cq_ex = create_cq_ex;
}

VCq* create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
               int comp_vector) noexcept {
  if (ctx == nullptr || cqe <= 0 || comp_vector != 0 ||
      (channel != nullptr && channel->context != ctx))
    return fail_null<VCq>(EINVAL);
  auto c = std::make_unique<VCq>();
  c->ctx = ctx_of(ctx);
  const Status s = adapter_of(ctx).create_cq(static_cast<uint32_t>(cqe), on_cq_notification,
                                             c.get(), nullptr, nullptr, &c->h);
  if (s != Status::kSuccess)
    return fail_null<VCq>(s == Status::kInvalidParameter ? EINVAL : ENOMEM);
  if (channel != nullptr) {
    c->efd = c->h->query_extension<CqExtension>()->notification_fd();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c.get();
    if (c->efd < 0 || ::epoll_ctl(channel->fd, EPOLL_CTL_ADD, c->efd, &ev) != 0) {
      const int err = errno;
      close_sync(c->h);
      return fail_null<VCq>(err);
    }
    ++channel->refcnt;
  }
  c->cq.context = ctx;
  c->cq.channel = channel;
  c->cq.cq_context = cq_context;
  c->cq.cqe = cqe;
  pthread_mutex_init(&c->cq.mutex, nullptr);
  pthread_cond_init(&c->cq.cond, nullptr);
  return c.release();
}

}  // namespace urnic::verbs

extern "C" {

ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  if (ctx == nullptr) return fail_null<ibv_comp_channel>(EINVAL);
  auto ch = std::make_unique<Channel>();
  ch->ch.context = ctx;
  ch->ch.fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (ch->ch.fd < 0) return nullptr;
  return &ch.release()->ch;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (channel == nullptr) return EINVAL;
  if (channel->refcnt != 0) return EBUSY;  // CQs still use it
  ::close(channel->fd);
  delete reinterpret_cast<Channel*>(channel);
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  VCq* c = create_cq(ctx, cqe, cq_context, channel, comp_vector);
  return c != nullptr ? &c->cq : nullptr;
}

int ibv_destroy_cq(ibv_cq* cq) {
  if (cq == nullptr) return EINVAL;
  VCq* c = cq_of(cq);
  if (c->users.load() != 0) return EBUSY;  // QPs still complete into it
  // ibverbs: destroy waits until every event handed out was acknowledged (ibv_ack_cq_events).
  pthread_mutex_lock(&cq->mutex);
  while (cq->comp_events_completed != c->events_delivered) pthread_cond_wait(&cq->cond, &cq->mutex);
  pthread_mutex_unlock(&cq->mutex);
  if (cq->channel != nullptr) {
    Channel* ch = reinterpret_cast<Channel*>(cq->channel);
    ::epoll_ctl(ch->ch.fd, EPOLL_CTL_DEL, c->efd, nullptr);
    std::lock_guard lock(ch->mu);
    std::erase(ch->pending, c);
    --ch->ch.refcnt;
  }
  close_sync(c->h);
  pthread_mutex_destroy(&cq->mutex);
  pthread_cond_destroy(&cq->cond);
  delete c;
  return 0;
}

int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (cq == nullptr || cqe <= 0) return EINVAL;
  VCq* c = cq_of(cq);
  std::lock_guard lock(c->lock);  // serialised with ibv_poll_cq (NdkResizeCq's rule)
  const Status s = c->h->resize(static_cast<uint32_t>(cqe), nullptr, nullptr);
  if (s != Status::kSuccess) return s == Status::kInvalidParameter ? EINVAL : status_errno(s);
  cq->cqe = cqe;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (channel == nullptr || cq == nullptr || cq_context == nullptr) {
    errno = EINVAL;
    return -1;
  }
  Channel* ch = reinterpret_cast<Channel*>(channel);
  VCq* got = nullptr;
  // A non-blocking channel fd (fcntl O_NONBLOCK, as with rdma-core's) polls once.
  const bool nonblock = (::fcntl(channel->fd, F_GETFL) & O_NONBLOCK) != 0;
  if (!nonblock) Runtime::get().app_blocks();
  while (got == nullptr) {
    {
      std::lock_guard lock(ch->mu);
      if (!ch->pending.empty()) {
        got = ch->pending.front();
        ch->pending.pop_front();
        break;
      }
    }
    epoll_event ev{};
    const int n = ::epoll_wait(channel->fd, &ev, 1, nonblock ? 0 : -1);
    if (n < 0) return -1;  // EINTR included, as a blocking read() of rdma-core's fd
    if (n == 0) {
      errno = EAGAIN;
      return -1;
    }
    VCq* c = static_cast<VCq*>(ev.data.ptr);
    uint64_t count = 0;
    if (::read(c->efd, &count, sizeof count) != sizeof count) continue;  // another thread won
    std::lock_guard lock(ch->mu);
    for (uint64_t i = 1; i < count; ++i) ch->pending.push_back(c);  // one event per notification
    got = c;
  }
  pthread_mutex_lock(&got->cq.mutex);
  ++got->events_delivered;
  pthread_mutex_unlock(&got->cq.mutex);
  *cq = &got->cq;
  *cq_context = got->cq.cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned nevents) {
  if (cq == nullptr) return;
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // extern "C"
