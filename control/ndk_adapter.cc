// The adapter of the public API: opening and closing, QueryAdapterInfo, CQ and PD creation,
// logical address mappings, and the lifetime machinery every object shares (close with
// antecedents, the control-thread poller that runs engine operations and callbacks). See
// control/ndk_internal.h for the design.
#include <rte_ethdev.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <new>
#include <thread>

#include "control/ndk_internal.h"
#include "control/ndk_remote.h"
#include "urnic/config.h"

namespace urnic {
namespace detail {

AdapterInfo make_adapter_info() noexcept {
  AdapterInfo i;
  i.version = kNdkVersion;
  // No IEEE OUI of its own: a software RNIC reports 0xFFFFFF, as Linux rxe does, so that programs
  // that check the vendor is set (UCX, perftest) see one (docs/verbs.md).
  i.vendor_id = 0xFFFFFF;
  i.device_id = 0x7572;  // "ur"
  i.max_registration_size = kMaxRegistrationSize;
  i.max_window_size = kMaxWindowSize;
  i.frmr_page_count = dp::MrTable::kMaxFrmrPages;
  i.max_initiator_request_sge = dp::kMaxSge;
  i.max_receive_request_sge = dp::kMaxSge;
  i.max_read_request_sge = dp::kMaxSge;
  i.max_transfer_length = kMaxTransferLength;
  i.max_inline_data_size = dp::kMaxInline;
  i.max_inbound_read_limit = kMaxReadLimit;
  i.max_outbound_read_limit = kMaxReadLimit;
  i.max_receive_queue_depth = kMaxQueueDepth;
  i.max_initiator_queue_depth = kMaxQueueDepth;
  i.max_srq_depth = kMaxQueueDepth;
  i.max_cq_depth = kMaxCqDepth;
  i.large_request_threshold = kLargeRequestThreshold;
  i.max_caller_data = kMaxCallerData;
  i.max_callee_data = kMaxCalleeData;
  // In-order placement: every copy into registered memory writes its last bytes last
  // (dp::MrTable), and packets are placed in PSN order. RDMA_READ_SINK is not required: any
  // locally writable region may be a read target. Moderation is done by the control thread.
  i.adapter_flags = adapter_flag::kInOrderDmaSupported | adapter_flag::kRdmaReadSinkNotRequired |
                    adapter_flag::kCqInterruptModerationSupported |
                    adapter_flag::kCqResizeSupported |
                    adapter_flag::kRdmaReadLocalInvalidateSupported;
  i.rdma_technology = RdmaTechnology::kRocev2;
  return i;
}

// ---- SyncWait ---------------------------------------------------------------------------------

void SyncWait::on_create(void* ctx, Status s, Object* o) noexcept {
  auto* w = static_cast<SyncWait*>(ctx);
  w->status = s;
  w->object = o;
  w->done.store(true, std::memory_order_release);  // pairs with AdapterImpl::wait()
}

void SyncWait::on_request(void* ctx, Status s) noexcept {
  auto* w = static_cast<SyncWait*>(ctx);
  w->status = s;
  w->done.store(true, std::memory_order_release);  // pairs with AdapterImpl::wait()
}

void AdapterImpl::enqueue_op_locked(std::unique_ptr<EngineOp> op) {
  ops.push_back(std::move(op));
  // The control thread submits it: now, not after its nap (up to 1 ms a request, which made
  // connecting 4 096 QPs take 30 s).
  if (ctl) ctl->control().wake();
}

bool AdapterImpl::step_engines(bool* manual) {
  bool did = false;
  *manual = false;
  for (dp::Engine* e : engs) {
    if (e->running()) continue;
    *manual = true;
    did |= e->run_once();
  }
  return did;
}

int AdapterImpl::place_locked(uint64_t affinity) const noexcept {
  int best = -1;
  for (size_t i = 0; i < engs.size(); ++i) {
    if (affinity != 0 && (affinity >> i & 1) == 0) continue;
    if (best < 0 || placed[i] < placed[static_cast<size_t>(best)]) best = static_cast<int>(i);
  }
  return best;
}

void AdapterImpl::wait(const std::atomic<bool>& done) {
  // Acquire pairs with the completion's release store.
  while (!done.load(std::memory_order_acquire)) {
    // Manual mode: this thread drives the engines no lcore runs. A step that did work may have
    // applied the request: the control thread, which completes it, looks now rather than after
    // its nap.
    bool manual = false;
    if (step_engines(&manual)) {
      if (ctl) ctl->control().wake();
    } else {
      // Launched engines, or other threads stepping them (each engine of an adapter over
      // several may have its own): nothing for this thread to do but let them run.
      std::this_thread::yield();
    }
  }
}

// ---- Lifetime ---------------------------------------------------------------------------------

AdapterImpl::~AdapterImpl() = default;

void AdapterImpl::adopt_locked(ObjectImpl* o, std::initializer_list<ObjectImpl*> antecedents) {
  objects.push_back(o);
  for (ObjectImpl* a : antecedents) {
    if (a == nullptr) continue;
    ++a->successors;
    o->antecedents.push_back(a);
  }
}

Status AdapterImpl::close(ObjectImpl* o, CloseCompletion cb, void* ctx) noexcept {
  std::unique_lock lk(mu);
  if (o->life == Life::kDefunct) {
    // Torn down by the adapter's close: freed now, and with the last one the adapter's core
    // (release()). No callback: the close is done.
    std::erase(defunct, o);
    const bool last = released && defunct.empty();
    lk.unlock();
    delete o;
    if (last) delete this;
    return Status::kSuccess;
  }
  if (o->life != Life::kLive) {
    // A second close is ignored. A close racing the adapter's (which closes what the consumer
    // left open) gives the object up: it is freed once torn down, not kept as a defunct shell.
    o->keep_shell = false;
    return Status::kSuccess;
  }
  o->life = Life::kClosing;
  // From here on the object refuses new work (kInvalidDeviceState), also while its close
  // pends. Release pairs with is_closing()'s acquire on a posting / polling thread.
  o->closing.store(true, std::memory_order_release);
  o->close_cb = cb;
  o->close_ctx = ctx;
  o->stop_events();
  if (o->successors == 0 && o->closes_inline()) {
    if (guarded([&] { return o->teardown_locked(); }) == Status::kSuccess) {
      std::erase(objects, o);
      for (ObjectImpl* a : o->antecedents) --a->successors;
      // Attach mode: an antecedent whose close waited for this object (a PD closed before its
      // QPs) is finished by the event thread, which runs its callback.
      const bool wake = remote && !closing.empty();
      lk.unlock();
      o->release_unlocked();
      delete o;
      if (wake) wake_remote();
      return Status::kSuccess;
    }
  }
  // Antecedent of live objects, engine work to do, or event callbacks that may be running:
  // the control thread finishes the close (pump_closes_locked) and calls back.
  o->close_pending = true;
  closing.push_back(o);
  if (remote) {
    lk.unlock();
    wake_remote();
  }
  return Status::kPending;
}

void AdapterImpl::finish_close_locked(ObjectImpl* o) {
  std::erase(objects, o);
  for (ObjectImpl* a : o->antecedents) --a->successors;
  // A defunct object may outlive its antecedents: it must not reach them.
  o->antecedents.clear();
  // The close callback is the object's last (anything deferred before it runs first: FIFO);
  // the memory goes with it, unless the adapter's close closed it under the consumer's feet.
  defer_locked([this, o] {
    if (o->close_pending && o->close_cb != nullptr) o->close_cb(o->close_ctx);
    o->release_unlocked();
    {
      std::lock_guard lk(mu);
      if (o->keep_shell) {
        o->life = Life::kDefunct;
        defunct.push_back(o);
        return;
      }
    }
    delete o;
  });
}

bool AdapterImpl::pump_closes_locked() {
  bool any = false;
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t i = 0; i < closing.size();) {
      ObjectImpl* o = closing[i];
      if (o->successors == 0 && guarded([&] { return o->teardown_locked(); }) == Status::kSuccess) {
        closing.erase(closing.begin() + static_cast<std::ptrdiff_t>(i));
        finish_close_locked(o);  // may leave an antecedent with no successors: loop again
        progress = any = true;
        continue;
      }
      ++i;
    }
  }
  return any;
}

bool AdapterImpl::pump_ops_locked() {
  bool any = false;
  // Submit in queue order; an op that is not ready (or a full mailbox) holds back the ones
  // behind it, so that the operations of one QP apply in the order they were asked for.
  for (auto& op : ops) {
    if (op->submitted) continue;
    if (op->prepare) {
      const Status p = op->prepare(op->msg);
      if (p == Status::kPending) break;
      op->prepare = nullptr;
      if (p != Status::kSuccess) {
        op->submitted = true;  // failed before reaching the engine
        op->msg.result = p;
        op->msg.done.store(true, std::memory_order_relaxed);
        continue;
      }
    }
    if (!engs[op->engine]->submit(op->msg)) break;
    op->submitted = true;
    any = true;
  }
  // The engine applies the mailbox in order, so completions arrive in order too.
  // Acquire pairs with the engine's release store of `done` (Engine::apply).
  while (!ops.empty() && ops.front()->submitted &&
         ops.front()->msg.done.load(std::memory_order_acquire)) {
    std::unique_ptr<EngineOp> op = std::move(ops.front());
    ops.pop_front();
    if (op->then) op->then(op->msg.result);
    any = true;
  }
  return any;
}

void AdapterImpl::deliver_locked(CqImpl* c, Status s, bool woken) {
  if (!c->events_.load(std::memory_order_acquire)) return;
  if (const int fd = c->event_fd.load(std::memory_order_acquire); fd >= 0 && !woken) {
    const uint64_t one = 1;
    (void)!::write(fd, &one, sizeof(one));  // EAGAIN only at 2^64 - 1 unread: still readable
  }
  if (c->notify_cb == nullptr) return;
  defer_locked([c, s] {
    if (c->events_.load(std::memory_order_acquire)) c->notify_cb(c->notify_ctx, s);
  });
}

void AdapterImpl::report_overrun_locked(CqImpl* c, bool woken) {
  // ndkpi.md §3.3: the CQ and every QP completing into it are dead. The QPs are moved to the
  // error state so that nothing else waits on them.
  c->overrun_reported = true;
  for (ObjectImpl* o : objects) {
    auto* q = o->type == ObjectType::kQp ? static_cast<QpImpl*>(o) : nullptr;
    if (q == nullptr || (q->rcq != c && q->scq != c) || o->life != Life::kLive) continue;
    enqueue_op_locked(make_op(q, dp::MailboxMsg::Kind::kFlushQp));
  }
  // It stands for the arms that fired with it: if one of them made the fd readable, that was
  // this notification's wake-up.
  deliver_locked(c, Status::kBufferOverflow, woken);
}

bool AdapterImpl::collect_cq_locked(CqImpl* c, bool rang, Clock::time_point now) {
  bool any = false;
  uint32_t fire = 0, woken = 0;  // kSuccess notifications to deliver; how many woke already
  if (rang) {
    const dp::Cq::Firings f = c->cq.take_firings();
    if (c->cq.overrun() && !c->overrun_reported) {
      report_overrun_locked(c, f.woken > 0);
      any = true;
    } else if (f.fired > 0 && !c->overrun_reported) {
      if (c->moderated()) {
        // One notification when the moderation lets go, for every arm that fired until then.
        c->mod_woken = (c->mod_waiting && c->mod_woken) || f.woken > 0;
        c->mod_waiting = true;
        c->mod_base = c->cq.produced();
        c->mod_deadline = c->mod_interval_us == UINT32_MAX
                              ? Clock::time_point::max()
                              : now + std::chrono::microseconds(c->mod_interval_us);
      } else {
        // One callback per fired arm, also when the consumer, woken by the fd, re-armed and
        // fired again before this thread took the first firing.
        fire = f.fired;
        woken = f.woken;
      }
    }
    if (c->cancelled_.exchange(false, std::memory_order_acq_rel)) {
      deliver_locked(c, Status::kCancelled);
      any = true;
    }
  }
  if (c->mod_waiting) {
    const bool count_met =
        c->mod_count != UINT32_MAX && c->cq.produced() - c->mod_base + 1 >= c->mod_count;
    if (now >= c->mod_deadline || count_met) {
      c->mod_waiting = false;
      fire += 1;
      woken += c->mod_woken ? 1 : 0;
    }
  }
  for (uint32_t i = 0; i < fire; ++i) deliver_locked(c, Status::kSuccess, i < woken);
  return any || fire > 0;
}

bool AdapterImpl::collect_notifications_locked(Clock::time_point now) {
  bool any = false;
  // Acquire pairs with the release store of the engine (dp::Cq / dp::Srq ring_doorbell).
  const bool rang = doorbell.exchange(0, std::memory_order_acquire) != 0;
  for (CqImpl* c : cqs) any |= collect_cq_locked(c, rang, now);
  if (rang) {
    for (SrqImpl* s : srqs) {
      if (s->srq.take_notification() && s->notify_cb != nullptr) {
        defer_locked([s] {
          if (s->events_.load(std::memory_order_acquire))
            s->notify_cb(s->notify_ctx, Status::kSuccess);
        });
        any = true;
      }
    }
  }
  return any;
}

bool AdapterImpl::follow_next_hops_locked(Clock::time_point now) {
  if (!ctl || !ctl->control().kernel_routes() || now < next_hop_check) return false;
  next_hop_check = now + std::chrono::milliseconds(100);
  std::map<ctl::Gid, std::optional<wire::MacAddr>> hops;  // one kernel query per peer
  bool any = false;
  for (ObjectImpl* o : objects) {
    if (o->type != ObjectType::kQp || o->life != Life::kLive) continue;
    auto* q = static_cast<QpImpl*>(o);
    const QpState st = q->qp.public_state();
    if (!q->has_peer || q->hop_pending ||
        (st != QpState::kRtr && st != QpState::kRts && st != QpState::kSqd))
      continue;
    auto it = hops.find(q->peer);
    if (it == hops.end()) {
      std::optional<wire::MacAddr> mac = ctl->control().lookup(q->peer);
      if (!mac) ctl->control().request(q->peer);  // the kernel resolves; seen next time
      it = hops.emplace(q->peer, mac).first;
    }
    if (!it->second || *it->second == q->peer_mac) continue;
    const wire::MacAddr mac = *it->second;
    dp::log_line(dp::LogType::kCtl, RTE_LOG_INFO,
                 "QP %u: the kernel's next hop to its peer changed: frames now go to "
                 "%02x:%02x:%02x:%02x:%02x:%02x",
                 q->qp.qpn(), mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
    auto op = make_op(q, dp::MailboxMsg::Kind::kSetNextHop);
    op->msg.attr.av.dst_mac = mac;
    op->then = [q, mac](Status) {
      q->hop_pending = false;
      q->peer_mac = mac;
    };
    q->hop_pending = true;
    enqueue_op_locked(std::move(op));
    any = true;
  }
  return any;
}

bool AdapterImpl::poll() {
  if (!on_control_thread()) control_id.store(std::this_thread::get_id(), std::memory_order_relaxed);
  std::unique_lock lk(mu);
  bool any = pump_ops_locked();
  any |= pump_closes_locked();
  any |= collect_notifications_locked(Clock::now());
  any |= follow_next_hops_locked(Clock::now());
  for (SrqImpl* s : srqs) s->srq.reclaim();
  // User callbacks, one at a time, never with mu held: they may call back into the API.
  while (!deferred.empty()) {
    std::function<void()> fn = std::move(deferred.front());
    deferred.pop_front();
    lk.unlock();
    fn();
    lk.lock();
    any = true;
  }
  return any;
}

void AdapterImpl::shutdown() {
  if (!ctl && !remote) return;
  if (ctl) telemetry_remove(this);  // before anything its handlers read goes away
  {
    std::lock_guard lk(mu);
    shutting_down = true;
  }
  // NDK adapter close blocks until every object is closed and every callback returned. Objects
  // the consumer left open are closed here (no completions).
  for (;;) {
    {
      std::lock_guard lk(mu);
      for (ObjectImpl* o : objects) {
        if (o->life != Life::kLive) continue;
        o->life = Life::kClosing;
        o->closing.store(true, std::memory_order_release);  // as in close()
        o->stop_events();
        // The consumer still holds it: once torn down it stays, inert, until the consumer
        // closes it (finish_close_locked).
        o->keep_shell = true;
        closing.push_back(o);
      }
      if (objects.empty() && ops.empty() && deferred.empty()) break;
    }
    // Attach mode: the event thread finishes the closes (each teardown one request to the
    // daemon); it has no engine to step.
    if (remote) wake_remote();
    bool manual = false;
    (void)step_engines(&manual);
    if (!manual) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (remote) {
    remote_events.reset();  // joins the event thread: a callback still running returns first
    return;
  }
  detail::drop_cm_agent(this);  // its MAD handler and poller go while the thread still runs
  // Joins the control thread: a callback still running (a close completion) returns first.
  ctl->control().stop();
  for (size_t i = 0; i < engs.size(); ++i) {
    dp::MailboxMsg m;
    m.kind = dp::MailboxMsg::Kind::kRemoveEndpoint;
    m.ep = &ctl->endpoint(static_cast<uint32_t>(i));
    (void)engs[i]->call(m);
  }
  ctl.reset();
  // Nothing below the core may be used from here on: the engines may go, and so may the port.
  engs.clear();
}

void AdapterImpl::release(AdapterImpl* a) noexcept {
  {
    std::lock_guard lk(a->mu);
    a->released = true;
    if (!a->defunct.empty()) return;  // the last defunct object's close frees the core
  }
  delete a;
}

void add_successor(ObjectImpl* o) noexcept {
  std::lock_guard lk(o->adapter->mu);
  ++o->successors;
}

void release_successor(ObjectImpl* o) noexcept {
  std::lock_guard lk(o->adapter->mu);
  --o->successors;  // a pending close of `o` completes on the control thread
}

// ---- CQ and PD construction (the rest of them is in ndk_cq.cc / ndk_pd.cc) -------------------

CqImpl::CqImpl(AdapterImpl* a, uint32_t d, CqNotificationCallback cb, void* ctx)
    : ImplOf(ObjectType::kCq, a), ext_(this), cq(d), depth(d), notify_cb(cb), notify_ctx(ctx) {
  cq.set_doorbell(&a->doorbell);
}

void CqImpl::publish_wake_fd_locked() noexcept {
  const int fd = event_fd.load(std::memory_order_acquire);
  cq.set_wake_fd(events_.load(std::memory_order_acquire) && !moderated() ? fd : -1);
}

CqImpl::~CqImpl() {
  if (const int fd = event_fd.load(std::memory_order_relaxed); fd >= 0) ::close(fd);
}

PdImpl::PdImpl(AdapterImpl* a) : ImplOf(ObjectType::kPd, a) { pd = a->ctl->alloc_pd(); }

}  // namespace detail

// ---- Object -------------------------------------------------------------------------------------

ObjectType Object::object_type() const noexcept { return impl_->type; }

Status Object::close(CloseCompletion completion, void* request_context) noexcept {
  return impl_->adapter->close(impl_, completion, request_context);
}

Status Object::query_extension(const ExtensionId& id, Version version, void** iface) noexcept {
  if (iface == nullptr) return Status::kInvalidParameter;
  void* p = impl_->extension(id, version);
  if (p == nullptr) return Status::kNotSupported;
  *iface = p;
  return Status::kSuccess;
}

// ---- Engine -------------------------------------------------------------------------------------

Engine::Engine(const EngineConfig& config) : impl_(std::make_unique<Impl>(config)) {}
Engine::~Engine() { impl_->dp.stop(); }
bool Engine::run_once() noexcept { return impl_->dp.run_once(); }
bool Engine::nap(uint32_t max_us, int wake_fd) noexcept { return impl_->dp.nap(max_us, wake_fd); }
bool Engine::launch(unsigned lcore) noexcept { return impl_->dp.launch(lcore); }
void Engine::stop() noexcept { impl_->dp.stop(); }
bool Engine::running() const noexcept { return impl_->dp.running(); }

// ---- Adapter ------------------------------------------------------------------------------------

namespace {

// The rate QPs run at unpaced (DcqcnConfig::max_rate_mbps 0): the port's link speed, or 100
// Gb/s when the driver reports none (net_ring reports 10 Gb/s whatever it carries, so a paced
// rate is honoured but the maximum is not a measured capacity).
CongestionConfig resolve_congestion(CongestionConfig c, uint16_t port_id) noexcept {
  if (c.dcqcn.max_rate_mbps != 0) return c;
  rte_eth_link link{};
  const bool known = rte_eth_link_get_nowait(port_id, &link) == 0 &&
                     link.link_speed != RTE_ETH_SPEED_NUM_NONE &&
                     link.link_speed != RTE_ETH_SPEED_NUM_UNKNOWN;
  c.dcqcn.max_rate_mbps = known ? link.link_speed : 100'000;
  c.dcqcn.min_rate_mbps = std::min(c.dcqcn.min_rate_mbps, c.dcqcn.max_rate_mbps);
  return c;
}

}  // namespace

namespace detail {

// AdapterConfig::congestion's ranges (adapter.h).
bool valid_congestion(const CongestionConfig& c) noexcept {
  constexpr uint32_t kMaxUs = 10'000'000, kMaxMbps = 10'000'000;
  const DcqcnConfig& d = c.dcqcn;
  const uint32_t top = d.max_rate_mbps != 0 ? d.max_rate_mbps : kMaxMbps;
  return c.dscp >= -1 && c.dscp <= 63 && c.cnp_dscp <= 63 && c.cnp_interval_us <= kMaxUs &&
         d.max_rate_mbps <= kMaxMbps && d.min_rate_mbps >= 1 && d.min_rate_mbps <= top &&
         d.ai_rate_mbps <= kMaxMbps && d.hai_rate_mbps <= kMaxMbps &&
         d.first_cnp_rate_mbps <= top && d.time_reset_us >= 1 && d.time_reset_us <= kMaxUs &&
         d.alpha_period_us >= 1 && d.alpha_period_us <= kMaxUs && d.reduce_period_us <= kMaxUs &&
         d.threshold <= 65535 && d.gd >= 1 && d.gd <= 30 && d.min_dec_fac >= 1 &&
         d.min_dec_fac <= 100 && d.g <= 1024 && d.initial_alpha <= 1024;
}

}  // namespace detail

Status Adapter::open(const AdapterConfig& config, Engine& engine,
                     std::unique_ptr<Adapter>* out) noexcept {
  Engine* const one[] = {&engine};
  return open(config, one, out);
}

Status Adapter::open(const AdapterConfig& config, std::span<Engine* const> engines,
                     std::unique_ptr<Adapter>* out) noexcept {
  if (out == nullptr || engines.empty() || engines.size() > kMaxEngines)
    return Status::kInvalidParameter;
  for (Engine* e : engines)
    if (e == nullptr) return Status::kInvalidParameter;
  const uint32_t mtu = config.cm.path_mtu;
  if ((mtu != 0 && (mtu < 256 || mtu > 4096 || (mtu & (mtu - 1)) != 0)) ||
      config.cm.response_timeout > 31 || config.cm.timewait_ms == 0 ||
      config.cm.timewait_ms > 600000)
    return Status::kInvalidParameter;
  if (!detail::valid_congestion(config.congestion)) return Status::kInvalidParameter;
  if (!kTesting && (!config.cm.drop_tx.empty() || config.broken_rules.any()))
    return Status::kNotSupported;
  return detail::guarded([&] {
    auto impl = std::make_unique<detail::AdapterImpl>();
    ctl::AdapterConfig c;
    c.port_id = config.port_id;
    c.port.mbufs = config.mbufs;
    c.ipv4 = config.ipv4;
    if (config.ipv6) c.ipv6 = *config.ipv6;
    c.ipv4_len = config.ipv4_prefix_len;
    c.ipv6_len = config.ipv6_prefix_len;
    c.routes = config.routes;
    if (config.mac) c.mac = *config.mac;
    c.max_qps = config.max_qps;
    c.max_mrs = config.max_mrs;
    c.key_seed = config.key_seed;
    c.tx_faults = config.tx_faults;
    c.rx_faults = config.rx_faults;
    c.start_control = false;  // the poller goes in first
    std::vector<dp::Engine*> dps;
    for (Engine* e : engines) dps.push_back(&e->impl().dp);
    if (Status s = ctl::Adapter::open(c, dps, &impl->ctl); s != Status::kSuccess) return s;
    impl->engs = dps;
    impl->placed.assign(dps.size(), 0);
    impl->info = detail::make_adapter_info();
    impl->cm_settings = config.cm;
    impl->adaptive_retransmit = config.adaptive_retransmit;
    impl->broken_rules = config.broken_rules;
    impl->congestion = resolve_congestion(config.congestion, config.port_id);
    std::unique_ptr<Adapter> a(new Adapter(impl.get()));
    detail::AdapterImpl* p = impl.release();  // owned by `a` from here on
    p->pub = a.get();
    // The control thread starts last: from here on it may run p->poll() at any time.
    p->ctl->control().add_poller([p] { return p->poll(); });
    p->ctl->control().start();
    detail::hold_cm_agent(p);                    // QP1 answered from the open on (ndk_internal.h)
    p->telemetry_id = detail::telemetry_add(p);  // its counters on the telemetry socket
    *out = std::move(a);
    return Status::kSuccess;
  });
}

Adapter::~Adapter() {
  impl_->shutdown();
  detail::AdapterImpl::release(impl_);
}

Status Adapter::query_adapter_info(AdapterInfo* info, uint32_t* buffer_size) const noexcept {
  if (buffer_size == nullptr) return Status::kInvalidParameter;
  if (info == nullptr || *buffer_size < sizeof(AdapterInfo)) {
    *buffer_size = sizeof(AdapterInfo);
    return Status::kBufferTooSmall;
  }
  *info = impl_->info;
  *buffer_size = sizeof(AdapterInfo);
  return Status::kSuccess;
}

AdapterInfo Adapter::adapter_info() const noexcept { return impl_->info; }

Status Adapter::query_counters(AdapterCounters* out) const noexcept {
  if (out == nullptr) return Status::kInvalidParameter;
  if (impl_->remote) return detail::remote_query_counters(impl_, ipc::kAllEngines, out);
  return detail::guarded([&] {
    AdapterCounters c;
    {
      std::lock_guard lk(impl_->mu);
      for (const detail::ObjectImpl* o : impl_->objects)
        if (o->type == ObjectType::kQp)
          c.qps.add(static_cast<const detail::QpImpl*>(o)->qp.counters());
    }
    c.port = impl_->ctl->endpoint_counters();
    c.engines = impl_->ctl->engines();
    c.tx_faults = impl_->ctl->tx_fault_counters();
    c.rx_faults = impl_->ctl->rx_fault_counters();
    c.cm = detail::cm_counters(impl_);
    *out = c;
    return Status::kSuccess;
  });
}

uint32_t Adapter::engines() const noexcept { return static_cast<uint32_t>(impl_->placed.size()); }

Status Adapter::query_engine_counters(uint32_t engine, PortCounters* out) const noexcept {
  if (out == nullptr || engine >= engines()) return Status::kInvalidParameter;
  if (impl_->remote) {
    AdapterCounters c;
    const Status s = detail::remote_query_counters(impl_, engine, &c);
    if (s == Status::kSuccess) *out = c.port;
    return s;
  }
  std::lock_guard lk(impl_->mu);
  if (impl_->shutting_down) return Status::kInvalidDeviceState;
  *out = impl_->ctl->endpoint_counters(engine);
  return Status::kSuccess;
}

Status Adapter::create_cq(uint32_t depth, CqNotificationCallback notification,
                          void* notification_context, CreateCompletion completion,
                          void* request_context, Handle<Cq>* out) noexcept {
  return create_cq(depth, notification, notification_context, 0, completion, request_context, out);
}

Status Adapter::create_cq(uint32_t depth, CqNotificationCallback notification,
                          void* notification_context, uint64_t affinity, CreateCompletion, void*,
                          Handle<Cq>* out) noexcept {
  if (impl_->remote)
    return detail::remote_create_cq(impl_, depth, notification, notification_context, out);
  if (out == nullptr || depth == 0 || depth > impl_->info.max_cq_depth)
    return Status::kInvalidParameter;
  return detail::log_create("CQ creation", detail::guarded([&] {
                              std::lock_guard lk(impl_->mu);
                              if (impl_->shutting_down) return Status::kInvalidDeviceState;
                              const int e = impl_->place_locked(affinity);
                              if (e < 0) return Status::kInvalidParameter;
                              auto* c = new detail::CqImpl(impl_, depth, notification,
                                                           notification_context);
                              c->engine = static_cast<uint8_t>(e);
                              ++impl_->placed[c->engine];
                              impl_->adopt_locked(c, {});
                              impl_->cqs.push_back(c);
                              *out = Handle<Cq>(&c->pub_);
                              return Status::kSuccess;
                            }));
}

Status Adapter::create_pd(CreateCompletion, void*, Handle<Pd>* out) noexcept {
  if (impl_->remote) return detail::remote_create_pd(impl_, out);
  if (out == nullptr) return Status::kInvalidParameter;
  return detail::log_create("PD creation", detail::guarded([&] {
                              std::lock_guard lk(impl_->mu);
                              if (impl_->shutting_down) return Status::kInvalidDeviceState;
                              auto* p = new detail::PdImpl(impl_);
                              impl_->adopt_locked(p, {});
                              *out = Handle<Pd>(&p->pub_);
                              return Status::kSuccess;
                            }));
}

Status Adapter::build_lam(const void* address, size_t length, std::span<uint64_t> pages,
                          uint32_t* page_count, uint32_t* fbo) const noexcept {
  // A null page array with a non-zero size would be written through (NdkBuildLAM's buffer is
  // the consumer's): refused like the other malformed arguments.
  if (address == nullptr || length == 0 || page_count == nullptr || fbo == nullptr ||
      (pages.data() == nullptr && !pages.empty()))
    return Status::kInvalidParameter;
  const auto a = reinterpret_cast<uint64_t>(address);
  if (length - 1 > UINT64_MAX - a) return Status::kInvalidParameter;
  constexpr uint64_t kMask = kPageSize - 1;
  const uint64_t first = a & ~kMask;
  const uint64_t n = (((a + length - 1) & ~kMask) - first) / kPageSize + 1;
  if (n > UINT32_MAX) return Status::kInvalidParameter;
  *page_count = static_cast<uint32_t>(n);
  *fbo = static_cast<uint32_t>(a & kMask);
  if (pages.size() < n) return Status::kBufferTooSmall;
  for (uint64_t i = 0; i < n; ++i) pages[i] = first + i * kPageSize;
  return Status::kSuccess;
}

void Adapter::release_lam(std::span<const uint64_t>) const noexcept {}

Status Adapter::query_extension(const ExtensionId& id, Version version, void** iface) noexcept {
  if (iface == nullptr) return Status::kInvalidParameter;
  if (id == AdapterExtension::kId && detail::version_ok(version, AdapterExtension::kVersion)) {
    *iface = &impl_->ext;
    return Status::kSuccess;
  }
  return Status::kNotSupported;
}

uint64_t AdapterExtension::telemetry_id() const noexcept { return a_->telemetry_id; }

LocalAddress AdapterExtension::local_address() const noexcept {
  if (a_->remote) return a_->remote_address;
  LocalAddress l;
  l.mac = a_->ctl->mac();
  l.ipv4 = a_->ctl->ipv4();
  if (a_->ctl->ipv6()) {
    l.has_ipv6 = true;
    l.ipv6 = *a_->ctl->ipv6();
  }
  return l;
}

uint32_t AdapterExtension::gid_count() const noexcept {
  if (a_->remote) return static_cast<uint32_t>(a_->remote_gids.size());
  return static_cast<uint32_t>(a_->ctl->control().gids().size());
}

Status AdapterExtension::query_gid(uint32_t index, std::array<uint8_t, 16>* gid) const noexcept {
  if (gid == nullptr) return Status::kInvalidParameter;
  if (a_->remote) {
    if (index >= a_->remote_gids.size()) return Status::kInvalidParameter;
    *gid = a_->remote_gids[index];
    return Status::kSuccess;
  }
  return detail::guarded([&] {
    const auto all = a_->ctl->control().gids();
    if (index >= all.size()) return Status::kInvalidParameter;
    *gid = all[index];
    return Status::kSuccess;
  });
}

Status AdapterExtension::set_faults(const FaultConfig& tx, const FaultConfig& rx) noexcept {
  if (a_->remote)
    return detail::remote_unsupported(
        "AdapterExtension::set_faults",
        "the port is shared: faults injected there would hit every client");
  return detail::guarded([&] { return a_->ctl->set_faults(tx, rx); });
}

}  // namespace urnic
