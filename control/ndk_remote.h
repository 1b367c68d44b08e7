// Attach mode's side of the public API (docs/daemon.md "The public API in attach mode"): an
// Adapter opened by name from urnicd (Adapter::open(name, out)) creates these objects instead of
// the embedded ones of ndk_internal.h. Each public call tests ObjectImpl::remote first and comes
// here; posting and polling stay memory operations on the rings shared with the daemon
// (control/attach.h), every other call is one request to it.
//
// Lifetime is the embedded one (AdapterImpl::close, antecedents and successors). PDs, MRs and
// QPs close inline (the teardown is one synchronous request); a CQ's close, and any close that
// pends behind its successors (a PD closed before its QPs), is finished by the adapter's event
// thread (RemoteEvents), which also runs every callback, one at a time, as an embedded adapter's
// control thread does.
//
// CQ notifications: each CQ has an eventfd of this process, passed to the daemon at creation.
// arm() sets the level in the ring header (shm::RingHeader::arm); the daemon's bridge, after it
// publishes a completion that satisfies it, takes the arm and writes the eventfd (or arm() does,
// when a satisfying completion already waits in the ring). The event thread reads it and
// delivers: the notification callback, and the consumer's own eventfd
// (CqExtension::notification_fd) if one was asked for.
//
// Connectors and listeners (control/ndk_remote_cm.cc): each is the client side of one of the
// daemon's, whose connection manager speaks for this process. What happens later (a request
// completing, a connection request, a peer's disconnect) the daemon queues on the adapter's CM
// channel and signals on its eventfd; the event thread takes the events (kCmEvents) and runs the
// callbacks, as an embedded adapter's control thread does.
//
// Memory windows and fast-register MRs (control/ndk_remote_memory.cc): each is the client side
// of the daemon's own; Qp::bind and Qp::fast_register wait until the daemon's bridge posted them
// (remote::RemoteQp::post_sync), so that the new token is known when they return, as NDK wants.
//
// What attach mode does not offer answers kNotSupported: the privileged token (a token over all
// memory would reach the daemon's and other clients') and fault injection (the port is shared).
#pragma once

#include <atomic>
#include <initializer_list>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "control/attach.h"
#include "control/last_error.h"
#include "control/ndk_internal.h"
#include "urnic/connector.h"
#include "urnic/listener.h"
#include "urnic/mw.h"

namespace urnic::detail {

// kNotSupported, with last_error() naming `what` and why attach mode does not offer it.
inline Status remote_unsupported(const char* what, const char* why) noexcept {
  return fail_with(Status::kNotSupported, std::string(what) + ": not offered in attach mode: " +
                                              why + " (docs/daemon.md)");
}

struct RemotePdImpl final : ImplOf<RemotePdImpl, Pd> {
  explicit RemotePdImpl(AdapterImpl* a) : ImplOf(ObjectType::kPd, a, true) {}
  Status teardown_locked() override;
  bool closes_inline() const noexcept override { return true; }
  uint32_t handle = 0;  // the daemon's
};

struct RemoteSrqImpl final : ImplOf<RemoteSrqImpl, Srq> {
  RemoteSrqImpl(AdapterImpl* a, SrqNotificationCallback cb, void* ctx)
      : ImplOf(ObjectType::kSrq, a, true), notify_cb(cb), notify_ctx(ctx) {}
  Status teardown_locked() override;  // ndk_remote_cm.cc
  // Its limit event is delivered by the event thread (mu held there): none once closing.
  void stop_events() noexcept override { events_.store(false, std::memory_order_release); }
  bool closes_inline() const noexcept override { return true; }
  remote::RemoteSrq srq;
  const SrqNotificationCallback notify_cb;
  void* const notify_ctx;
  std::atomic<bool> events_{true};
  bool on_channel = false;  // registered in RemoteEvents::cm_objects (mu)
};

struct RemoteCqImpl final : ImplOf<RemoteCqImpl, Cq> {
  RemoteCqImpl(AdapterImpl* a, CqNotificationCallback cb, void* ctx)
      : ImplOf(ObjectType::kCq, a, true), ext_(this), notify_cb(cb), notify_ctx(ctx) {}
  ~RemoteCqImpl() override;
  void* extension(const ExtensionId& id, Version v) noexcept override;
  Status teardown_locked() override;
  // Not inline: the event thread may be delivering its notification (it finishes the close).
  void stop_events() noexcept override;

  CqExtension ext_;
  remote::RemoteCq cq;
  int event_fd = -1;  // ours, the daemon's copy written by its bridge; written by arm() too
  std::atomic<int> user_fd{-1};  // CqExtension::notification_fd, once asked for
  const CqNotificationCallback notify_cb;
  void* const notify_ctx;
  std::atomic<bool> events_{true};
  std::atomic<bool> cancelled_{false};  // an arm was cancelled: deliver kCancelled
  uint32_t depth = 0;  // as created or resized (moderation's "count above the depth")
};

// An attached adapter's event thread: waits (epoll) on its CQs' eventfds and a wake eventfd,
// delivers CQ notifications, and runs AdapterImpl::poll() (pending closes, callbacks).
class RemoteEvents {
 public:
  explicit RemoteEvents(AdapterImpl* a);  // throws std::system_error if it cannot start
  ~RemoteEvents();                        // stops and joins it; not from the thread itself
  RemoteEvents(const RemoteEvents&) = delete;
  RemoteEvents& operator=(const RemoteEvents&) = delete;
  bool add(RemoteCqImpl* c) noexcept;
  void remove(RemoteCqImpl* c) noexcept;
  // The thread has work (a close to finish, a cancelled arm): it looks now. Any thread.
  void wake() noexcept;
  // The adapter's CM channel in the daemon, made on the first call (with its eventfd, which this
  // thread watches). kSuccess with *handle set, or why not.
  Status cm_channel(uint32_t* handle) noexcept;
  // The adapter's connectors and listeners by their daemon handles (guarded by the adapter's mu):
  // whom an event is for.
  std::unordered_map<uint32_t, ObjectImpl*> cm_objects;

 private:
  void run();
  AdapterImpl* const a_;
  int ep_ = -1, wake_ = -1;
  std::mutex cm_mu_;  // making the channel
  int cm_fd_ = -1;
  std::atomic<uint32_t> cm_channel_{0};
  std::atomic<bool> stop_{false};
  std::thread t_;
};

struct RemoteMrImpl final : ImplOf<RemoteMrImpl, Mr> {
  RemoteMrImpl(AdapterImpl* a, RemotePdImpl* p) : ImplOf(ObjectType::kMr, a, true), pd(p) {}
  Status teardown_locked() override;
  bool closes_inline() const noexcept override { return true; }
  RemotePdImpl* const pd;
  // The daemon's MR while registered or initialised (0: none); the tokens are read by any thread.
  uint32_t handle = 0;
  std::atomic<uint32_t> lkey{0}, rkey{0};
  bool fast = false;                   // made for FastRegister (create_mr(true))
  std::atomic<uint32_t> max_pages{0};  // a fast-register MR's, once initialised
  std::atomic<bool> remote_ok{false};
};

struct RemoteMwImpl final : ImplOf<RemoteMwImpl, Mw> {
  RemoteMwImpl(AdapterImpl* a, RemotePdImpl* p) : ImplOf(ObjectType::kMw, a, true), pd(p) {}
  Status teardown_locked() override;
  bool closes_inline() const noexcept override { return true; }
  RemotePdImpl* const pd;
  uint32_t handle = 0;             // the daemon's window
  std::atomic<uint32_t> token{0};  // the latest bind's (or the unbound window's)
};

struct RemoteQpImpl final : ImplOf<RemoteQpImpl, Qp> {
  explicit RemoteQpImpl(AdapterImpl* a)
      : ImplOf(ObjectType::kQp, a, true), ext_(this), conn_(this) {}
  void* extension(const ExtensionId& id, Version v) noexcept override;
  Status teardown_locked() override { return qp.destroy(); }
  bool closes_inline() const noexcept override { return true; }
  QpExtension ext_;  // immediates and atomics (RC only: no datagrams in attach mode)
  QpConnectExtension conn_;
  remote::RemoteQp qp;
  // What the modifies applied (query), and the state they left: the daemon's engine applies
  // them synchronously, so these are the engine's until the QP fails on its own (then its
  // completions say so).
  QpAttributes attrs;
  std::atomic<QpState> state{QpState::kInit};
  bool has_srq = false;   // its receives come from an SRQ
  bool datagram = false;  // a UD QP (send_datagram)
  RemotePdImpl* pd = nullptr;
};

// Takes the events waiting on CM channel `channel` and delivers them (the event thread, no lock
// held): request completions and disconnects to their connectors, requests to their listeners.
void remote_cm_events(AdapterImpl* a, uint32_t channel) noexcept;

// Whether `a` is open and each of `objs` (null ones skipped) is live: what a new object may
// depend on (mu held).
bool usable_locked(const AdapterImpl* a, std::initializer_list<ObjectImpl*> objs);
// A PD's child (MR, MW, SRQ, QP): registered with its antecedents (the PD first; null ones
// skipped) if they are still usable (mu held).
Status adopt_remote_locked(ObjectImpl* o, std::initializer_list<ObjectImpl*> antecedents);

// ---- Routing from the public calls (control/ndk_remote.cc, ndk_remote_cm.cc) ---------------
Status remote_create_cq(AdapterImpl* a, uint32_t depth, CqNotificationCallback notification,
                        void* notification_context, Handle<Cq>* out) noexcept;
Status remote_create_pd(AdapterImpl* a, Handle<Pd>* out) noexcept;
// Cq::control_interrupt_moderation: the embedded checks, then ModerateCq (the daemon's bridge
// holds the notifications).
Status remote_moderate_cq(ObjectImpl* cq, uint32_t interval_us, uint32_t count) noexcept;
// Cq::resize: ResizeCq (the embedded statuses); with a completion, kPending and the completion
// from the event thread.
Status remote_resize_cq(ObjectImpl* cq, uint32_t depth, RequestCompletion completion,
                        void* context) noexcept;
Status remote_create_mr(ObjectImpl* pd, bool fast_register, Handle<Mr>* out) noexcept;
// `srq` (null: none): the QP's receives come from it (rq_depth and max_rsge are then 1).
// `qkey` (null: RC): a datagram QP with that Q_Key (on `srq` too, since protocol 1.7).
Status remote_create_qp(ObjectImpl* pd, ObjectImpl* receive_cq, ObjectImpl* initiator_cq,
                        void* qp_context, uint32_t rq_depth, uint32_t sq_depth, uint32_t max_rsge,
                        uint32_t max_ssge, uint32_t inline_size, Handle<Qp>* out,
                        ObjectImpl* srq = nullptr, const uint32_t* qkey = nullptr) noexcept;
// Datagrams (urnic/datagram.h): the daemon resolves the address and keeps the handle.
Status remote_create_address_handle(AdapterImpl* a, const AddressVector& av,
                                    AddressHandle* out) noexcept;
Status remote_send_datagram(ObjectImpl* qp, void* ctx, std::span<const Sge> sgl, uint32_t flags,
                            const AddressHandle& destination, uint32_t remote_qpn,
                            uint32_t remote_qkey, const uint32_t* immediate) noexcept;
uint32_t remote_max_datagram(const ObjectImpl* qp) noexcept;
// Counters (QueryCounters): the port's (`engine`: ipc::kAllEngines or one) and the sum over this
// process's QPs on the adapter; or one QP's (zeros if the daemon cannot be asked).
Status remote_query_counters(const AdapterImpl* a, uint32_t engine, AdapterCounters* out) noexcept;
QpCounters remote_qp_counters(const ObjectImpl* qp) noexcept;
// On the engine `affinity` names first (0: engine 0); no limit (threshold) in attach mode.
Status remote_create_srq(ObjectImpl* pd, uint32_t depth, uint32_t max_sge,
                         uint32_t notify_threshold, SrqNotificationCallback notification,
                         void* notification_context, uint64_t affinity, Handle<Srq>* out) noexcept;
// Srq::modify: ModifySrq, its limit event on the adapter's CM channel (ndk_remote_cm.cc).
Status remote_srq_modify(ObjectImpl* srq, uint32_t depth, uint32_t notify_threshold) noexcept;
Status remote_srq_receive(ObjectImpl* srq, void* ctx, std::span<const Sge> sgl) noexcept;
Status remote_register_mr(ObjectImpl* mr, const void* address, size_t length,
                          uint32_t flags) noexcept;
Status remote_deregister_mr(ObjectImpl* mr) noexcept;
uint32_t remote_token(const ObjectImpl* mr) noexcept;
// Windows and fast-register MRs (ndk_remote_memory.cc), with the embedded calls' statuses.
Status remote_create_mw(ObjectImpl* pd, Handle<Mw>* out) noexcept;
uint32_t remote_mw_token(const ObjectImpl* mw) noexcept;
Status remote_init_frmr(ObjectImpl* mr, uint32_t pages, bool remote_access) noexcept;
Status remote_fast_register(ObjectImpl* qp, void* ctx, ObjectImpl* mr,
                            std::span<const uint64_t> pages, uint32_t fbo, size_t length,
                            uint64_t base_va, uint32_t flags) noexcept;
Status remote_invalidate(ObjectImpl* qp, void* ctx, ObjectImpl* mr_or_mw, uint32_t flags) noexcept;
Status remote_bind(ObjectImpl* qp, void* ctx, ObjectImpl* mr, ObjectImpl* mw, const void* address,
                   size_t length, uint32_t flags) noexcept;

void remote_arm(ObjectImpl* cq, CqNotify type) noexcept;
int remote_notification_fd(ObjectImpl* cq) noexcept;
bool remote_cancel_notification(ObjectImpl* cq) noexcept;
size_t remote_poll(ObjectImpl* cq, std::span<Result> out) noexcept;
size_t remote_poll(ObjectImpl* cq, std::span<ResultEx> out) noexcept;

// Flags outside `allowed` (the operation's, as embedded posts check them) are refused here, not
// by the daemon's bridge (which would fail the QP).
Status remote_post(ObjectImpl* qp, shm::SendOp op, uint32_t allowed, void* ctx,
                   std::span<const Sge> sgl, uint64_t remote_address, uint32_t remote_token,
                   uint32_t flags, uint32_t imm = 0) noexcept;
// QpExtension's atomics: embedded's checks (one 8-byte result SGE, an 8-byte aligned remote
// address, local flags only), then the ring.
Status remote_atomic(ObjectImpl* qp, shm::SendOp op, void* ctx, const Sge& result,
                     uint64_t remote_address, uint32_t remote_token, uint64_t compare_add,
                     uint64_t swap, uint32_t flags) noexcept;
Status remote_receive(ObjectImpl* qp, void* ctx, std::span<const Sge> sgl) noexcept;
void remote_flush(ObjectImpl* qp) noexcept;

uint32_t remote_qpn(const ObjectImpl* qp) noexcept;
QpState remote_qp_state(const ObjectImpl* qp) noexcept;
Status remote_modify(ObjectImpl* qp, const QpAttributes& at, uint32_t mask) noexcept;
Status remote_query(const ObjectImpl* qp, QpAttributes* out) noexcept;

// Connector and Listener (urnic/connector.h, listener.h): the daemon's own checks and results.
// `qp` is the QP's base impl (another adapter's, or an embedded one: kInvalidParameter).
Status remote_create_connector(AdapterImpl* a, Handle<Connector>* out) noexcept;
Status remote_create_listener(AdapterImpl* a, ConnectEventCallback cb, void* ctx,
                              Handle<Listener>* out) noexcept;
Status remote_connect(ObjectImpl* c, ObjectImpl* qp, const sockaddr* src, uint32_t src_length,
                      const sockaddr* dst, uint32_t dst_length, uint32_t inbound, uint32_t outbound,
                      const void* data, uint32_t data_length, RequestCompletion completion,
                      void* context) noexcept;
Status remote_complete_connect(ObjectImpl* c, DisconnectEventCallback cb, void* ctx) noexcept;
Status remote_accept(ObjectImpl* c, ObjectImpl* qp, uint32_t inbound, uint32_t outbound,
                     const void* data, uint32_t data_length, DisconnectEventCallback disc,
                     void* disc_ctx, RequestCompletion completion, void* context) noexcept;
Status remote_reject(ObjectImpl* c, const void* data, uint32_t data_length) noexcept;
Status remote_resolve_datagram(ObjectImpl* c, const sockaddr* src, uint32_t src_length,
                               const sockaddr* dst, uint32_t dst_length, const void* data,
                               uint32_t data_length, RequestCompletion completion,
                               void* context) noexcept;
Status remote_datagram_peer(ObjectImpl* c, uint32_t* qpn, uint32_t* qkey) noexcept;
bool remote_is_datagram(ObjectImpl* c) noexcept;
Status remote_reject_reason(ObjectImpl* c, uint16_t* reason) noexcept;
Status remote_accept_datagram(ObjectImpl* c, uint32_t qpn, uint32_t qkey, const void* data,
                              uint32_t data_length) noexcept;
Status remote_connection_data(ObjectImpl* c, uint32_t* inbound, uint32_t* outbound, void* data,
                              uint32_t* data_length) noexcept;
// The connector's local (peer false) or peer address.
Status remote_connector_address(ObjectImpl* c, bool peer, sockaddr* address,
                                uint32_t* length) noexcept;
Status remote_disconnect(ObjectImpl* c, RequestCompletion completion, void* context) noexcept;
Status remote_listen(ObjectImpl* l, const sockaddr* address, uint32_t length,
                     bool datagram) noexcept;
Status remote_listener_address(ObjectImpl* l, sockaddr* address, uint32_t* length) noexcept;
void remote_pause(ObjectImpl* l, bool pause) noexcept;

}  // namespace urnic::detail
