// The bridge between clients' shared rings and the daemon's QPs and CQs (bridge.h).
#include "daemon/bridge.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <span>
#include <thread>

#include "urnic/extensions.h"

namespace urnic::daemon {
namespace {

// A slot is copied here before it is read: the client may rewrite the shared slot at any time.
constexpr size_t kMaxSlot = 512;
constexpr uint32_t kBurst = 32;
// The flags a client may put on a send slot (the public API checks each operation's own).
constexpr uint32_t kClientFlags =
    op_flag::kSilentSuccess | op_flag::kReadFence | op_flag::kSendAndSolicitEvent |
    op_flag::kInline | op_flag::kDefer | op_flag::kRdmaReadLocalInvalidate |
    op_flag::kAllowLocalWrite | op_flag::kAllowRemoteRead | op_flag::kAllowRemoteWrite |
    op_flag::kAllowRemoteAtomic | op_flag::kRdmaReadSink;

void nothing(void*, Status) noexcept {}

}  // namespace

Bridge::Bridge() {
  qps_.reserve(64);
  cqs_.reserve(64);
}

Bridge::~Bridge() {
  if (door_ != nullptr) ::munmap(door_, 4096);
  if (page_fd_ >= 0) ::close(page_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

bool Bridge::make_doorbell() {
  page_fd_ = ::memfd_create("urnic-doorbell", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (page_fd_ < 0 || wake_fd_ < 0 || ::ftruncate(page_fd_, 4096) != 0 ||
      ::fcntl(page_fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return false;
  void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, page_fd_, 0);
  if (p == MAP_FAILED) return false;
  door_ = new (p) shm::EngineDoorbell{};
  return true;
}

int Bridge::doorbell_fd(uint32_t what) const noexcept {
  const int fd = what == 0 ? page_fd_ : wake_fd_;
  return fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
}

bool Bridge::pending() const noexcept {
  for (const LiveQp& q : qps_) {
    if (q.failed) continue;
    if (q.r.sq.head->prod.load(std::memory_order_acquire) != q.sq_cons ||
        q.r.rq.head->prod.load(std::memory_order_acquire) != q.rq_cons)
      return true;
  }
  for (const LiveSrq& q : srqs_)
    if (!q.failed && q.r.ring.head->prod.load(std::memory_order_acquire) != q.cons) return true;
  return false;
}

void Bridge::nap(Engine& engine, uint32_t max_us) noexcept {
  if (held_ != 0) {
    // A held notification's deadline bounds the nap.
    const auto now = std::chrono::steady_clock::now();
    for (const LiveCq& c : cqs_) {
      if (!c.held || c.deadline == std::chrono::steady_clock::time_point::max()) continue;
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(c.deadline - now);
      max_us = static_cast<uint32_t>(std::clamp<int64_t>(left.count(), 0, max_us));
    }
  }
  if (door_ == nullptr) {
    (void)engine.nap(max_us);
    return;
  }
  // Dekker with the clients: we store the flag then read their producer indices, they store a
  // producer index then read the flag, each with a full fence between; so either we see their
  // work (and do not nap) or they see the flag (and ring).
  door_->sleeping.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!pending()) {
    sleeps_.fetch_add(1, std::memory_order_relaxed);
    if (engine.nap(max_us, wake_fd_)) wakeups_.fetch_add(1, std::memory_order_relaxed);
  }
  door_->sleeping.store(0, std::memory_order_relaxed);
}

bool Bridge::submit(const Cmd& c, std::chrono::milliseconds patience) {
  std::lock_guard lock(submit_mu_);
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (!cmds_.push(c)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  const uint64_t want = ++submitted_;
  // The lcore applies commands at its next step (it naps at most idle_sleep_us).
  while (applied_.load(std::memory_order_acquire) < want) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

bool Bridge::add_qp(const QpRings& q, std::chrono::milliseconds patience) {
  return submit(Cmd{Cmd::Kind::kAddQp, q, {}}, patience);
}
bool Bridge::remove_qp(Qp* qp, std::chrono::milliseconds patience) {
  QpRings q;
  q.qp = qp;
  return submit(Cmd{Cmd::Kind::kRemoveQp, q, {}}, patience);
}
bool Bridge::add_srq(const SrqRing& s, std::chrono::milliseconds patience) {
  Cmd c{Cmd::Kind::kAddSrq, {}, {}};
  c.srq = s;
  return submit(c, patience);
}
bool Bridge::remove_srq(Srq* srq, std::chrono::milliseconds patience) {
  Cmd c{Cmd::Kind::kRemoveSrq, {}, {}};
  c.srq.srq = srq;
  return submit(c, patience);
}
bool Bridge::add_cq(const CqRing& c, std::chrono::milliseconds patience) {
  return submit(Cmd{Cmd::Kind::kAddCq, {}, c}, patience);
}
bool Bridge::remove_cq(Cq* cq, std::chrono::milliseconds patience) {
  CqRing c;
  c.cq = cq;
  return submit(Cmd{Cmd::Kind::kRemoveCq, {}, c}, patience);
}

bool Bridge::quiesce(std::chrono::milliseconds patience) {
  return submit(Cmd{Cmd::Kind::kNop, {}, {}}, patience);
}

bool Bridge::moderate_cq(Cq* cq, uint32_t interval_us, uint32_t count,
                         std::chrono::milliseconds patience) {
  Cmd c{Cmd::Kind::kModerateCq, {}, {}};
  c.cq.cq = cq;
  c.mod_interval_us = interval_us;
  c.mod_count = count;
  return submit(c, patience);
}

bool Bridge::move_cq(Cq* cq, const shm::RingView& ring, std::chrono::milliseconds patience) {
  Cmd c{Cmd::Kind::kMoveCq, {}, {}};
  c.cq.cq = cq;
  c.cq.ring = ring;
  return submit(c, patience);
}

BridgeCounters Bridge::counters() const noexcept {
  BridgeCounters c;
  c.sends = sends_.load(std::memory_order_relaxed);
  c.receives = receives_.load(std::memory_order_relaxed);
  c.completions = completions_.load(std::memory_order_relaxed);
  c.cq_events = cq_events_.load(std::memory_order_relaxed);
  c.client_errors = client_errors_.load(std::memory_order_relaxed);
  c.sleeps = sleeps_.load(std::memory_order_relaxed);
  c.wakeups = wakeups_.load(std::memory_order_relaxed);
  return c;
}

void Bridge::apply(const Cmd& c) {
  switch (c.kind) {
    case Cmd::Kind::kAddQp:
      qps_.push_back(LiveQp{c.qp});
      break;
    case Cmd::Kind::kRemoveQp:
      std::erase_if(qps_, [&](const LiveQp& q) { return q.r.qp == c.qp.qp; });
      break;
    case Cmd::Kind::kAddCq:
      cqs_.push_back(LiveCq{c.cq});
      break;
    case Cmd::Kind::kRemoveCq:
      std::erase_if(cqs_, [&](const LiveCq& q) {
        if (q.r.cq != c.cq.cq) return false;
        held_ -= q.held ? 1 : 0;
        return true;
      });
      break;
    case Cmd::Kind::kMoveCq:
      for (LiveCq& q : cqs_) {
        if (q.r.cq != c.cq.cq) continue;
        // The old ring's last completions are published already (fill_cq publishes as it goes).
        c.cq.ring.head->arm.store(q.r.ring.head->arm.exchange(shm::kArmNone),
                                  std::memory_order_relaxed);
        q.r.ring.head->moved.store(1, std::memory_order_release);
        q.r.ring = c.cq.ring;
        q.prod = 0;
        q.held_base = 0;  // a held notification counts from the new ring's start
      }
      break;
    case Cmd::Kind::kModerateCq:
      for (LiveCq& q : cqs_) {
        if (q.r.cq != c.cq.cq) continue;
        q.mod_interval_us = c.mod_interval_us;
        q.mod_count = c.mod_count;
        if (q.held && !q.moderated()) release_if_due(q, true);  // moderation off: let it go
      }
      break;
    case Cmd::Kind::kAddSrq:
      srqs_.push_back(LiveSrq{c.srq});
      break;
    case Cmd::Kind::kRemoveSrq:
      std::erase_if(srqs_, [&](const LiveSrq& q) { return q.r.srq == c.srq.srq; });
      break;
    case Cmd::Kind::kNop:
      break;
  }
}

bool Bridge::poll() noexcept {
  bool busy = false;
  Cmd c;
  while (cmds_.pop(c)) {
    apply(c);  // control traffic, not the data path: a vector may grow here
    applied_.fetch_add(1, std::memory_order_release);
    busy = true;
  }
  for (LiveQp& q : qps_) {
    if (q.failed) continue;
    busy |= drain_rq(q);  // receives first: a send of ours may be answered at once
    busy |= drain_sq(q);
  }
  for (LiveSrq& q : srqs_)
    if (!q.failed) busy |= drain_srq(q);
  for (LiveCq& cq : cqs_)
    if (!cq.failed) busy |= fill_cq(cq);
  if (held_ != 0)
    for (LiveCq& cq : cqs_)
      if (cq.held) release_if_due(cq);
  return busy;
}

void Bridge::fail(LiveQp& q) noexcept {
  q.failed = true;
  client_errors_.fetch_add(1, std::memory_order_relaxed);
  q.r.sq.head->failed.store(1, std::memory_order_release);  // a waiting client stops
  auto* ext = q.r.qp->query_extension<QpConnectExtension>();
  if (ext == nullptr) return;
  QpAttributes a;
  a.state = QpState::kErr;
  // Asynchronous: this thread drives the engine, so it must not wait for it.
  (void)ext->modify(a, qp_attr_mask::kState, nothing, nullptr);
}

bool Bridge::drain_sq(LiveQp& q) noexcept {
  const shm::RingView& r = q.r.sq;
  const uint32_t prod = r.head->prod.load(std::memory_order_acquire);  // pairs with the client
  const uint32_t n = prod - q.sq_cons;
  if (n == 0) return false;
  if (n > r.capacity) {
    fail(q);
    return true;
  }
  alignas(16) uint8_t buf[kMaxSlot];
  auto* w = reinterpret_cast<shm::SendSlot*>(buf);
  uint32_t done = 0;
  constexpr size_t kFixed = offsetof(shm::SendSlot, sge);
  for (; done < std::min(n, kBurst); ++done) {
    // Our copy, checked, is what we post (the client may write the slot meanwhile): the fixed
    // part first, then only the SGEs or inline bytes it names, not the whole stride.
    const uint8_t* slot = r.slot(q.sq_cons + done);
    std::memcpy(buf, slot, kFixed);
    const bool inl = (w->flags & op_flag::kInline) != 0;
    if (w->reserved != 0 || w->reserved2 != 0 || (w->flags & ~kClientFlags) != 0 ||
        (inl ? w->length > q.r.max_inline || kFixed + w->length > r.stride
             : w->num_sge > q.r.max_send_sge)) {
      fail(q);
      return true;
    }
    // Within the stride: max_send_sge SGEs or max_inline bytes fit it (shm::send_stride).
    if (inl)
      std::memcpy(buf + kFixed, slot + kFixed, w->length);
    else
      shm::copy_sges(buf + kFixed, slot + kFixed, w->num_sge);
    std::span<const Sge> sgl(w->sge, w->num_sge);
    Sge inline_sge;
    if (inl) {
      // Inline bytes are in our copy of the slot: one SGE over them (the post copies them out).
      inline_sge = Sge{reinterpret_cast<uint64_t>(&w->sge[0]), w->length, 0};
      sgl = std::span<const Sge>(&inline_sge, w->length ? 1 : 0);
    }
    // Every post but the burst's last is deferred: one doorbell for the burst.
    const bool last = done + 1 == std::min(n, kBurst);
    const uint32_t flags = last ? w->flags & ~op_flag::kDefer : w->flags | op_flag::kDefer;
    void* ctx = reinterpret_cast<void*>(w->request_context);
    Status s = Status::kInvalidParameter;
    bool sync = false;
    uint32_t token = 0;  // a synchronous slot's new token
    switch (static_cast<shm::SendOp>(w->op)) {
      case shm::SendOp::kSend:
        s = q.r.qp->send(ctx, sgl, flags);
        break;
      case shm::SendOp::kWrite:
        s = q.r.qp->write(ctx, sgl, w->remote_addr, w->rkey, flags);
        break;
      case shm::SendOp::kRead:
        s = q.r.qp->read(ctx, sgl, w->remote_addr, w->rkey, flags);
        break;
      case shm::SendOp::kSendInvalidate:
        s = q.r.qp->send_and_invalidate(ctx, sgl, flags, w->rkey);
        break;
      case shm::SendOp::kSendImm:
        s = q.r.ext->send_with_immediate(ctx, sgl, flags, w->imm);
        break;
      case shm::SendOp::kWriteImm:
        s = q.r.ext->write_with_immediate(ctx, sgl, w->remote_addr, w->rkey, flags, w->imm);
        break;
      case shm::SendOp::kCompareSwap:
      case shm::SendOp::kFetchAdd:
        // One result SGE, never inline (the public API checks its length and alignment).
        if (inl || w->num_sge != 1) break;
        s = static_cast<shm::SendOp>(w->op) == shm::SendOp::kCompareSwap
                ? q.r.ext->compare_swap(ctx, w->sge[0], w->remote_addr, w->rkey, w->compare_add,
                                        w->swap, flags)
                : q.r.ext->fetch_add(ctx, w->sge[0], w->remote_addr, w->rkey, w->compare_add,
                                     flags);
        break;
      case shm::SendOp::kDatagram:
      case shm::SendOp::kDatagramImm: {
        // The address handle by its 1-based index; a handle the client never made fails its QP.
        const auto ah = static_cast<uint32_t>(w->remote_addr);
        if (q.r.ahs == nullptr || ah == 0 || ah > q.r.ahs->count.load(std::memory_order_acquire))
          break;
        const uint32_t imm = w->imm;
        const bool with_imm = static_cast<shm::SendOp>(w->op) == shm::SendOp::kDatagramImm;
        s = q.r.ext->send_datagram(ctx, sgl, flags, q.r.ahs->ah[ah - 1], w->rkey,
                                   static_cast<uint32_t>(w->remote_addr >> 32),
                                   with_imm ? &imm : nullptr);
        break;
      }
      case shm::SendOp::kBind:
      case shm::SendOp::kInvalidate:
      case shm::SendOp::kFastRegister:
        s = post_memory(q, *w, flags, &sync, &token);
        break;
    }
    if (s == Status::kNoMoreEntries) break;  // the QP's queue is full: the rest waits
    if (sync) {
      // The client waits for this result (read after it sees the consumer index pass the slot):
      // a failed bind or FastRegister fails only itself, as the embedded call returns it.
      auto* shared = reinterpret_cast<shm::SendSlot*>(r.slot(q.sq_cons + done));
      shared->swap = shm::sync_result(s, token);
      continue;
    }
    if (s != Status::kSuccess) {
      fail(q);
      return true;
    }
  }
  q.sq_cons += done;
  r.head->cons.store(q.sq_cons, std::memory_order_release);  // the client may reuse the slots
  sends_.fetch_add(done, std::memory_order_relaxed);
  return done != 0;
}

template <class Post>
Bridge::Drained Bridge::drain_receives(const shm::RingView& r, uint32_t* cons, uint32_t max_sge,
                                       Post post) noexcept {
  const uint32_t prod = r.head->prod.load(std::memory_order_acquire);  // pairs with the client
  const uint32_t n = prod - *cons;
  if (n == 0) return Drained::kIdle;
  if (n > r.capacity) return Drained::kFault;
  alignas(16) uint8_t buf[kMaxSlot];
  auto* w = reinterpret_cast<shm::RecvSlot*>(buf);
  uint32_t done = 0;
  constexpr size_t kFixed = offsetof(shm::RecvSlot, sge);
  for (; done < std::min(n, kBurst); ++done) {
    // Our copy, as for sends: the fixed part, then only the SGEs it names (within the stride:
    // recv_stride holds max_sge of them).
    const uint8_t* slot = r.slot(*cons + done);
    std::memcpy(buf, slot, kFixed);
    if (w->reserved != 0 || w->num_sge > max_sge) return Drained::kFault;
    shm::copy_sges(buf + kFixed, slot + kFixed, w->num_sge);
    const Status s =
        post(reinterpret_cast<void*>(w->request_context), std::span<const Sge>(w->sge, w->num_sge));
    if (s == Status::kNoMoreEntries) break;
    if (s != Status::kSuccess) return Drained::kFault;
  }
  *cons += done;
  r.head->cons.store(*cons, std::memory_order_release);
  receives_.fetch_add(done, std::memory_order_relaxed);
  return done != 0 ? Drained::kBusy : Drained::kIdle;
}

bool Bridge::drain_rq(LiveQp& q) noexcept {
  const Drained d = drain_receives(
      q.r.rq, &q.rq_cons, q.r.max_recv_sge,
      [&](void* ctx, std::span<const Sge> sgl) { return q.r.qp->receive(ctx, sgl); });
  if (d == Drained::kFault) fail(q);
  return d != Drained::kIdle;
}

bool Bridge::drain_srq(LiveSrq& q) noexcept {
  const Drained d = drain_receives(
      q.r.ring, &q.cons, q.r.max_sge,
      [&](void* ctx, std::span<const Sge> sgl) { return q.r.srq->receive(ctx, sgl); });
  if (d == Drained::kFault) {
    // Its client's fault: the SRQ takes no more receives (its QPs run dry: RNR at their peers).
    q.failed = true;
    client_errors_.fetch_add(1, std::memory_order_relaxed);
  }
  return d != Drained::kIdle;
}

bool Bridge::fill_cq(LiveCq& c) noexcept {
  const shm::RingView& r = c.r.ring;
  const uint32_t cons = r.head->cons.load(std::memory_order_acquire);  // pairs with the client
  const uint32_t used = c.prod - cons;
  if (used > r.capacity) {
    // The client says it took completions that were never written: its CQ is dead. Its QPs
    // stall (their completions stay in the daemon's CQ until it overruns them into ERR).
    c.failed = true;
    client_errors_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  // Straight into the ring's free slots, up to its end: the client reads a slot only once the
  // producer index passes it (a client writing them meanwhile spoils only its own completions).
  const uint32_t at = c.prod & (r.capacity - 1);
  const uint32_t room = std::min({r.capacity - used, r.capacity - at, kBurst});
  if (room == 0) return false;
  auto* slots = reinterpret_cast<ResultEx*>(r.slot(c.prod));  // the stride is sizeof(ResultEx)
  const size_t got = c.r.cq->get_results_ex(std::span<ResultEx>(slots, room));
  if (got == 0) return false;
  c.prod += static_cast<uint32_t>(got);
  r.head->prod.store(c.prod, std::memory_order_release);  // the slots are the client's to read
  completions_.fetch_add(got, std::memory_order_relaxed);
  if (c.r.event_fd >= 0) notify(c, std::span<const ResultEx>(slots, got));
  if (c.held) release_if_due(c);
  return true;
}

void Bridge::notify(LiveCq& c, std::span<const ResultEx> fresh) noexcept {
  // Dekker with the client's arm() (shm::RingHeader::arm): prod stored above, then the arm read.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::atomic<uint32_t>& arm = c.r.ring.head->arm;
  uint32_t level = arm.load(std::memory_order_relaxed);
  while (level != shm::kArmNone) {
    const bool met = std::any_of(fresh.begin(), fresh.end(),
                                 [&](const ResultEx& r) { return shm::satisfies(r, level); });
    if (!met) return;
    if (arm.compare_exchange_weak(level, shm::kArmNone, std::memory_order_acq_rel,
                                  std::memory_order_relaxed)) {
      if (!c.moderated()) {
        signal(c);
        return;
      }
      // Moderated: one notification when the moderation lets go, for every arm satisfied until
      // then (as the embedded adapter's control thread holds them).
      if (!c.held) {
        c.held = true;
        ++held_;
        c.held_base = c.prod - static_cast<uint32_t>(fresh.size());
        c.deadline =
            c.mod_interval_us == UINT32_MAX
                ? std::chrono::steady_clock::time_point::max()
                : std::chrono::steady_clock::now() + std::chrono::microseconds(c.mod_interval_us);
      }
      return;
    }
  }
}

void Bridge::signal(LiveCq& c) noexcept {
  // One syscall per notification, never per completion; the eventfd is non-blocking.
  const uint64_t one = 1;
  (void)!::write(c.r.event_fd, &one, sizeof one);
  cq_events_.fetch_add(1, std::memory_order_relaxed);
}

void Bridge::release_if_due(LiveCq& c, bool force) noexcept {
  const bool count_met = c.mod_count != UINT32_MAX && c.prod - c.held_base >= c.mod_count;
  if (!force && !count_met && std::chrono::steady_clock::now() < c.deadline) return;
  c.held = false;
  --held_;
  signal(c);
}

}  // namespace urnic::daemon
