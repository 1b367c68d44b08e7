// Internals of the NDK-style public API (include/urnic/): the provider side of every object,
// the object lifetime rules (ndkpi.md §1.3-§1.4), and the control-thread machinery that runs
// engine operations asynchronously and delivers every callback.
//
// Shape. Each public object (Cq, Pd, Qp, ...) is a member of its implementation struct (CqImpl,
// PdImpl, QpImpl, ...), which derives from ObjectImpl; one allocation per object, freed by the
// provider once the object's close has completed. The hot paths (post, poll, arm) go from the
// public object straight to the dataplane object (dp::Qp::post_send, dp::Cq::poll, ...): no
// lock, no allocation, no exception, no system call.
//
// Everything else is control side and serialised by AdapterImpl::mu: the object list, the
// antecedent/successor counts, closes, the engine operations queue (mailbox messages submitted
// without blocking and polled for completion), and the list of user callbacks to run. The
// adapter's control thread (ctl::ControlPlane, which calls AdapterImpl::poll on every iteration)
// is the only thread that runs user callbacks, one at a time and never with mu held, so a
// callback may call back into the API (close included).
//
// Lifetime past the adapter (include/urnic/adapter.h). ~Adapter closes what the consumer left
// open (AdapterImpl::shutdown marks it keep_shell) and tears it down as any close does, but an
// object the consumer still holds is then kept as kDefunct (AdapterImpl::defunct) rather than
// freed. Its `closing` flag is set, so the post / poll / arm paths refuse it with the load they
// already make (no new atomic, no lock); every control call checks is_closing() (or `life` /
// `shutting_down` under mu) before it touches ctl, eng or the CM, which are gone. The
// AdapterImpl itself (its mu and the defunct list) outlives the Adapter: AdapterImpl::release()
// frees it at once if nothing is defunct, else the close of the last defunct object does.
//
// For the Connector / Listener implementation (IB CM, control/cm/): qp_modify() moves a QP
// through the RC states with the engine, and add_successor() / release_successor() make a QP
// an antecedent of a connector (its close then pends until the connector is closed).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "control/adapter.h"
#include "dataplane/cq.h"
#include "dataplane/engine.h"
#include "dataplane/log.h"
#include "dataplane/qp.h"
#include "dataplane/srq.h"
#include "urnic/adapter.h"
#include "urnic/cq.h"
#include "urnic/datagram.h"
#include "urnic/engine.h"
#include "urnic/extensions.h"
#include "urnic/mr.h"
#include "urnic/mw.h"
#include "urnic/object.h"
#include "urnic/pd.h"
#include "urnic/qp.h"
#include "urnic/srq.h"

namespace urnic {

struct Engine::Impl {
  explicit Impl(const EngineConfig& c) : dp(c) {}
  dp::Engine dp;
};

namespace detail {

using Clock = std::chrono::steady_clock;

// The adapter's limits (NDK_ADAPTER_INFO; docs/api.md says where each is enforced).
AdapterInfo make_adapter_info() noexcept;
inline constexpr Version kNdkVersion{1, 2};
inline constexpr size_t kMaxRegistrationSize = size_t{1} << 40;  // 1 TiB
inline constexpr size_t kMaxWindowSize = kMaxRegistrationSize;
using dp::kMaxCqDepth;
using dp::kMaxQueueDepth;
inline constexpr uint32_t kMaxTransferLength = dp::kMaxMessageLength;
inline constexpr uint32_t kMaxReadLimit = dp::kMaxRdAtomicLimit;
// A hint only: below it send/receive, above it read/write (the copies dominate either way).
inline constexpr uint32_t kLargeRequestThreshold = 64 * 1024;
// IB CM private data an application may use (rdma_cm: REQ 92 - 36-byte IP CM header; REJ 148,
// less than REP's 196). Enforced by the Connector.
inline constexpr uint32_t kMaxCallerData = 56;
inline constexpr uint32_t kMaxCalleeData = 148;

struct AdapterImpl;
struct PdImpl;
class RemoteEvents;

// The connection manager's counters of `a`, its agents gone included (control/cm/
// ndk_connector.cc).
CmCounters cm_counters(AdapterImpl* a);
// The adapter's own hold on its CM agent, from its open to its close: a REQ for a service
// nobody listens on gets its REJ (invalid service ID), a DREQ for no connection its DREP, as a
// host's CM answers (IBTA §12.6.7, §12.9.7), also when the program made no connector.
void hold_cm_agent(AdapterImpl* a);
void drop_cm_agent(AdapterImpl* a);

// QueryExtension's version rule: same major, a minor up to the implemented one.
inline bool version_ok(Version asked, Version have) noexcept {
  return asked.major == have.major && asked.minor <= have.minor;
}

// An object creation (`what`: "QP creation", ...) that failed, logged on urnic.ctl: a resource or
// device failure at NOTICE, a refused argument or state at DEBUG (dp::log_failure). Returns `s`.
inline Status log_create(const char* what, Status s) noexcept {
  return dp::log_failure(dp::LogType::kCtl, s, what);
}

// Lifecycle (guarded by AdapterImpl::mu).
enum class Life : uint8_t {
  kCreating,  // a pending create: not yet handed to the consumer
  kLive,
  kClosing,  // close requested; waits for successors, then tears down
  kDefunct,  // torn down by the adapter's close while the consumer held it: kept, inert, until
             // the consumer's close frees it (AdapterImpl::defunct)
};

struct ObjectImpl {
  ObjectImpl(ObjectType t, AdapterImpl* a, bool r = false) noexcept
      : type(t), remote(r), adapter(a) {}
  virtual ~ObjectImpl() = default;
  ObjectImpl(const ObjectImpl&) = delete;
  ObjectImpl& operator=(const ObjectImpl&) = delete;

  virtual Object& pub() noexcept = 0;
  virtual void* extension(const ExtensionId&, Version) noexcept { return nullptr; }
  // Releases what the object holds, with mu held, on the caller's thread or the control
  // thread. kSuccess when done; kPending to be called again by the control thread later (work
  // in flight on the engine, or a resource still busy). Never calls user code.
  virtual Status teardown_locked() = 0;
  // Whether a close with no successors may complete in the caller's thread (no engine work,
  // no event callbacks that could still be running).
  virtual bool closes_inline() const noexcept { return false; }
  // Stops event callbacks (CQ / SRQ notifications) once a close is requested.
  virtual void stop_events() noexcept {}
  // Once the close has completed, without mu (on the control thread, or the caller's for an
  // inline close): releases what must not be released under mu (the CM objects of connectors
  // and listeners). The object is then freed, or kept as a defunct shell. Never calls user code.
  virtual void release_unlocked() noexcept {}

  const ObjectType type;
  // An object of an attached adapter (control/ndk_remote.h): its calls go to the daemon and
  // its rings are shared with it. The public calls test this before they take their Impl.
  const bool remote;
  AdapterImpl* const adapter;
  // Set (release) once close() was requested, before the object may still wait for its
  // successors or its engine work; read (acquire) without the mutex by the post / poll / arm
  // paths, so that an object whose close is pending refuses new work with kInvalidDeviceState
  // (ndkpi.md §1.4: the provider may fail calls on a closed antecedent; docs/api.md "Bad
  // input"). Never cleared: the object is freed when its close completes, or stays set on a
  // defunct object (Life::kDefunct) until the consumer's close frees it.
  std::atomic<bool> closing{false};
  // ---- guarded by adapter->mu
  Life life = Life::kLive;
  uint32_t successors = 0;
  std::vector<ObjectImpl*> antecedents;  // each holds one successor count for us
  CloseCompletion close_cb = nullptr;
  void* close_ctx = nullptr;
  bool close_pending = false;  // close() returned kPending: the callback is owed
  // Closed by the adapter's close, not by the consumer, who still holds it: once torn down it
  // becomes kDefunct instead of being freed. A close by the consumer meanwhile clears it.
  bool keep_shell = false;
};

// The provider side of the concrete object type `Pub` (Cq, Pd, Mr, Mw, Srq, Qp; object.h): owns
// the public object, made with this, and finds itself from one.
template <class Self, class Pub>
struct ImplOf : ObjectImpl {
  ImplOf(ObjectType t, AdapterImpl* a, bool remote = false) noexcept
      : ObjectImpl(t, a, remote), pub_(this) {}
  Object& pub() noexcept final { return pub_; }
  static Self* of(Pub& o) noexcept { return o.impl(); }
  static ObjectImpl* base_of(const Pub& o) noexcept { return o.base_impl(); }
  Pub pub_;
};

// A mailbox message for the engine, submitted by the control thread in queue order.
struct EngineOp {
  dp::MailboxMsg msg;
  uint8_t engine = 0;  // which of the adapter's engines applies it (msg.ep is its endpoint)
  bool submitted = false;
  // Optional, before submitting: kSuccess when the message is ready, kPending to be asked again
  // on the next iteration, anything else to fail the op without submitting it.
  std::function<Status(dp::MailboxMsg&)> prepare;
  // With the engine's result (or prepare's failure), mu held, on the control thread.
  std::function<void(Status)> then;
};

struct CqImpl final : ImplOf<CqImpl, Cq> {
  CqImpl(AdapterImpl* a, uint32_t depth, CqNotificationCallback cb, void* ctx);
  ~CqImpl() override;
  void* extension(const ExtensionId& id, Version v) noexcept override;
  Status teardown_locked() override;
  void stop_events() noexcept override {
    events_.store(false, std::memory_order_release);
    cq.set_wake_fd(-1);  // a closing CQ's firings wake nobody (deliver_locked drops them)
  }
  bool moderated() const noexcept { return mod_interval_us != 0 && mod_count > 1; }
  // Hands the eventfd to whoever fires an arm (dp::Cq::set_wake_fd) when the consumer asked for
  // one, the CQ is not closing and notifications are not moderated (then the control thread
  // writes it when the moderation releases the notification). Must hold adapter->mu.
  void publish_wake_fd_locked() noexcept;

  CqExtension ext_;
  dp::Cq cq;
  std::atomic<uint32_t> depth;  // as created, then as the last resize made it
  const CqNotificationCallback notify_cb;
  void* const notify_ctx;
  std::atomic<bool> events_{true};
  std::atomic<bool> cancelled_{false};  // an arm was cancelled: deliver kCancelled
  std::atomic<int> event_fd{-1};        // CqExtension::notification_fd, once asked for
  // Interrupt moderation (set under mu; used by the control thread).
  uint32_t mod_interval_us = 0;
  uint32_t mod_count = 0;
  bool mod_waiting = false;
  bool mod_woken = false;  // the notification mod_waiting holds back made the fd readable already
  Clock::time_point mod_deadline{};
  uint64_t mod_base = 0;
  bool overrun_reported = false;
  uint8_t engine = 0;  // the adapter's engine its QPs run on (set at creation, under mu)
};

struct PdImpl final : ImplOf<PdImpl, Pd> {
  explicit PdImpl(AdapterImpl* a);
  Status teardown_locked() override;
  bool closes_inline() const noexcept override { return true; }

  uint32_t pd = 0;          // the dataplane PD number
  uint32_t priv_token = 0;  // the privileged token's key, once asked for (under mu)
};

struct MrImpl final : ImplOf<MrImpl, Mr> {
  MrImpl(AdapterImpl* a, PdImpl* pd, bool fast);
  Status teardown_locked() override;
  bool closes_inline() const noexcept override { return true; }

  enum class State : uint8_t { kEmpty, kRegistered, kFrmr };
  PdImpl* const pd;
  const bool fast;
  // Written by the MR's calls (serialised by the consumer) and, for the key, by FastRegister
  // posts; read by posts on any QP. Atomics so that concurrent readers never race.
  std::atomic<State> state{State::kEmpty};
  std::atomic<uint32_t> key{0};
  std::atomic<uint64_t> base{0};
  std::atomic<uint64_t> length{0};
  std::atomic<uint32_t> access{0};  // dp::access bits of a registration
  std::atomic<uint32_t> max_pages{0};
  std::atomic<bool> remote_ok{false};
};

struct MwImpl final : ImplOf<MwImpl, Mw> {
  MwImpl(AdapterImpl* a, PdImpl* pd);
  Status teardown_locked() override;
  bool closes_inline() const noexcept override { return true; }

  PdImpl* const pd;
  std::atomic<uint32_t> key{0};  // the latest bind's key (or the unbound window's)
};

struct SrqImpl final : ImplOf<SrqImpl, Srq> {
  SrqImpl(AdapterImpl* a, PdImpl* pd, uint32_t depth, uint32_t max_sge, SrqNotificationCallback cb,
          void* ctx);
  Status teardown_locked() override;
  void stop_events() noexcept override { events_.store(false, std::memory_order_release); }

  PdImpl* const pd;
  dp::Srq srq;
  uint8_t engine = 0;  // the adapter's engine that takes its receives (set at creation, under mu)
  const SrqNotificationCallback notify_cb;
  void* const notify_ctx;
  std::atomic<bool> events_{true};
};

struct QpImpl final : ImplOf<QpImpl, Qp> {
  QpImpl(AdapterImpl* a, PdImpl* pd, CqImpl* rcq, CqImpl* scq, SrqImpl* srq,
         const dp::QpConfig& cfg);
  void* extension(const ExtensionId& id, Version v) noexcept override;
  Status teardown_locked() override;

  QpExtension ext_;
  QpConnectExtension conn_;
  PdImpl* const pd;
  CqImpl* const rcq;
  CqImpl* const scq;
  SrqImpl* const srq;
  dp::Qp qp;
  const uint32_t pd_num;  // copies for the post path
  const uint32_t max_send_sge;
  const uint32_t max_read_sge;
  const uint32_t max_recv_sge;
  const uint32_t max_inline;
  // Teardown progress (control thread, under mu): 0 start, 1 flushing, 2 flushed,
  // 3 destroying, 4 destroyed.
  int teardown_step = 0;
  // The peer its address vector names and the MAC its frames go to (set by a modify with an
  // AV; under mu), for following the kernel's route changes (AdapterImpl::follow_next_hops).
  bool has_peer = false;
  bool hop_pending = false;  // a kSetNextHop is queued
  std::array<uint8_t, 16> peer{};
  wire::MacAddr peer_mac{};
};

struct AdapterImpl {
  AdapterImpl() noexcept : ext(this) {}
  ~AdapterImpl();

  // ---- Lifetime (any thread) -----------------------------------------------------------------
  // Registers a new object (mu held) with its antecedents; each gains a successor.
  void adopt_locked(ObjectImpl* o, std::initializer_list<ObjectImpl*> antecedents);
  Status close(ObjectImpl* o, CloseCompletion cb, void* ctx) noexcept;
  // Blocks until every object is closed (the ones the consumer still holds become kDefunct);
  // then stops the control thread and detaches from the engine. Not from the control thread.
  void shutdown();
  // The Adapter's last act, after shutdown(): frees `a` now, or (objects are still defunct) lets
  // the close of the last one free it.
  static void release(AdapterImpl* a) noexcept;

  // ---- Engine operations and callbacks (mu held) ---------------------------------------------
  // Queues `op` for the control thread and wakes it (ndk_adapter.cc).
  void enqueue_op_locked(std::unique_ptr<EngineOp> op);
  // Attach mode: the event thread has work (control/ndk_remote.h). Any thread.
  void wake_remote() noexcept;
  void defer_locked(std::function<void()> fn) { deferred.push_back(std::move(fn)); }
  // The control thread's work (a ControlPlane poller). Returns whether it did anything.
  bool poll();
  bool on_control_thread() const noexcept {
    return control_id.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }
  // Waits for `done` (a synchronous request), running engine steps when the engine is not
  // launched. Callers refuse synchronous requests on the control thread first (it would wait
  // for itself).
  void wait(const std::atomic<bool>& done);
  // One step of each of the adapter's engines that no lcore runs (they are driven by whoever
  // waits); returns whether one did work, and sets *manual when there was one.
  bool step_engines(bool* manual);
  // The engine for a new CQ or SRQ asked for with `affinity` (bit i: engine i; 0: any): of the
  // engines allowed, the one with the fewest CQs and SRQs placed, so that QPs spread evenly.
  // -1 when the mask names none of the adapter's engines. mu held.
  int place_locked(uint64_t affinity) const noexcept;

  Adapter* pub = nullptr;
  // Attach mode (Adapter::open by name, control/ndk_remote.cc): the daemon's adapter `remote_index`
  // serves this one; there is no ctl, engine or control thread, and every object is remote.
  bool remote = false;
  uint32_t remote_index = 0;
  LocalAddress remote_address;
  std::vector<std::array<uint8_t, 16>> remote_gids;
  struct StopEvents {
    void operator()(RemoteEvents* e) const noexcept;  // ndk_remote.cc: stops and joins it
  };
  std::unique_ptr<RemoteEvents, StopEvents> remote_events;  // its event thread (ndk_remote.h)
  std::vector<dp::Engine*> engs;  // engine i serves the adapter's port queue i
  std::vector<uint32_t> placed;   // live CQs and SRQs per engine (under mu)
  std::unique_ptr<ctl::Adapter> ctl;
  AdapterConfig::Cm cm_settings;    // for the CM agent (control/cm/ndk_connector.cc)
  bool adaptive_retransmit = true;  // AdapterConfig::adaptive_retransmit, for new QPs

  BrokenRules broken_rules;     // AdapterConfig::broken_rules (testing builds), for new QPs
  CongestionConfig congestion;  // AdapterConfig::congestion, maximum rate resolved, for new QPs
  std::atomic<uint64_t> cm_mads_dropped{0};  // AdapterConfig::Cm::drop_tx (testing builds)
  CmCounters cm_retired;  // agents already gone (under the adapter's entry lock, ndk_connector.cc)
  AdapterExtension ext;
  AdapterInfo info{};
  uint64_t telemetry_id = 0;  // its id under /urnic/ on the telemetry socket (telemetry.cc)
  // Rung by the engine (dp::Cq / dp::Srq) when a notification is due.
  std::atomic<uint32_t> doorbell{0};
  std::atomic<std::thread::id> control_id{};

  std::mutex mu;  // control side only; never on the post/poll path
  // ---- guarded by mu
  std::vector<ObjectImpl*> objects;  // every object not yet freed
  std::vector<ObjectImpl*> closing;  // close requested, not yet finished
  std::vector<CqImpl*> cqs;          // live CQs (notification sources)
  std::vector<SrqImpl*> srqs;        // live SRQs
  std::deque<std::unique_ptr<EngineOp>> ops;
  std::deque<std::function<void()>> deferred;  // user callbacks to run, in order
  bool shutting_down = false;                  // set by shutdown(), never cleared
  // After shutdown: the objects the consumer held when the adapter closed, torn down and inert
  // (every call fails with kInvalidDeviceState or does nothing), each freed by its close. This
  // struct outlives the Adapter until the last of them is gone (release()). ctl, engine and eng
  // are gone by then: nothing reached from a defunct object may use them.
  std::vector<ObjectImpl*> defunct;
  bool released = false;  // the Adapter is gone (release() ran)

 private:
  bool pump_ops_locked();
  bool pump_closes_locked();
  bool collect_notifications_locked(Clock::time_point now);
  // On an interface shared with the kernel: every 100 ms, each connected QP's next hop from the
  // kernel's route and neighbour tables; a changed one is handed to the engine (kSetNextHop).
  bool follow_next_hops_locked(Clock::time_point now);
  Clock::time_point next_hop_check{};
  // One CQ's part of it: `rang` says whether the doorbell rang since the last call.
  bool collect_cq_locked(CqImpl* c, bool rang, Clock::time_point now);
  // The overrun of `c` (ndkpi.md §3.3): its QPs to the error state, kBufferOverflow delivered.
  void report_overrun_locked(CqImpl* c, bool woken);
  // Delivers a CQ notification: its eventfd at once unless `woken` (whoever fired the arm wrote
  // it already, dp::Cq "Wake-up"), its callback deferred (mu held).
  void deliver_locked(CqImpl* c, Status s, bool woken = false);
  void finish_close_locked(ObjectImpl* o);
};

// Synchronous requests (a null completion): the waiter and the completion that wakes it.
struct SyncWait {
  std::atomic<bool> done{false};
  Status status = Status::kPending;
  Object* object = nullptr;
  static void on_create(void* ctx, Status s, Object* o) noexcept;
  static void on_request(void* ctx, Status s) noexcept;
};

// CqExtension::notification_fd's eventfd in `slot`, made on the first call (non-blocking,
// close-on-exec): two first calls at once keep one, the other is closed. -1 if none can be made;
// *made tells whether this call made it.
int lazy_eventfd(std::atomic<int>* slot, bool* made) noexcept;

// Whether close() was requested for `o` (lock-free; see ObjectImpl::closing).
inline bool is_closing(const ObjectImpl* o) noexcept {
  return o->closing.load(std::memory_order_acquire);
}

// An SGE whose end, addr + length, does not fit in 64 bits names no memory of any region (a
// region never reaches 2^64: MrTable::register_region), so the post is malformed and refused
// now rather than failing when it executes (docs/api.md "Bad input").
constexpr bool wraps(const Sge& s) noexcept { return s.length > UINT64_MAX - s.addr; }

// A null SGE array with a non-zero count (NDK's pSgl NULL with nSge > 0) cannot be read.
constexpr bool null_list(std::span<const Sge> sgl) noexcept {
  return sgl.data() == nullptr && !sgl.empty();
}

// Copies an SGE list into a work request (dp::SendWqe or dp::RecvWqe: sends, READs and WRITEs
// that are not INLINE, receives on a QP or an SRQ): kInvalidParameter for a null list with a
// non-zero count or an SGE whose address + length passes 2^64; kDataOverrun above `max_sge`;
// kBufferOverflow above max_transfer_length (ndkpi.md §2.4). The total is summed in 64 bits, so
// lengths whose 32-bit sum wraps are caught too. Post path: no lock, no allocation.
template <class Wqe>
Status fill_sgl(Wqe& w, std::span<const Sge> sgl, uint32_t max_sge) noexcept {
  if (null_list(sgl)) return Status::kInvalidParameter;
  if (sgl.size() > max_sge) return Status::kDataOverrun;
  uint64_t total = 0;
  for (size_t i = 0; i < sgl.size(); ++i) {
    if (wraps(sgl[i])) return Status::kInvalidParameter;
    w.sge[i] = sgl[i];
    total += sgl[i].length;
  }
  if (total > kMaxTransferLength) return Status::kBufferOverflow;
  w.num_sge = static_cast<decltype(w.num_sge)>(sgl.size());
  w.length = static_cast<uint32_t>(total);
  return Status::kSuccess;
}

// Converts an exception escaping a control-side call into a status (exceptions never cross the
// public API, house style rule 21).
template <class F>
Status guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Status::kInsufficientResources;
  } catch (...) {
    return Status::kInternalError;
  }
}

// ---- For the Connector / Listener (control/cm/) and the QP extension ---------------------------

// Queues a modify of `qp` on the engine (validated there against the QP's current state).
// Calls `done` on the control thread with mu not held. `attr.av.dst_mac` all zero asks for
// neighbour resolution first (kHostUnreachable after 2 s).
Status qp_modify(QpImpl* qp, const dp::QpAttr& attr, uint32_t mask, RequestCompletion done,
                 void* ctx) noexcept;
// Makes `o` an antecedent of something outside this layer (a connector): its close pends until
// release_successor(). Any thread.
void add_successor(ObjectImpl* o) noexcept;
void release_successor(ObjectImpl* o) noexcept;
// The dataplane QP behind a public one.
dp::Qp& dp_qp(Qp& q) noexcept;

// AdapterConfig::congestion's ranges (adapter.h), also those of QpAttributes::congestion.
bool valid_congestion(const CongestionConfig& c) noexcept;

// ---- Telemetry (control/telemetry.cc) ---------------------------------------------------------

// Publishes an open adapter's counters under /urnic/ (the commands are registered with the
// first); returns its id there. telemetry_remove: before the adapter's shutdown goes on.
uint64_t telemetry_add(AdapterImpl* a);
void telemetry_remove(AdapterImpl* a) noexcept;

// ---- QPs (control/ndk_qp.cc) --------------------------------------------------------------------

// An engine operation of `kind` on QP `q`, addressed to the mailbox of the QP's own engine.
std::unique_ptr<EngineOp> make_op(QpImpl* q, dp::MailboxMsg::Kind kind);

// ---- Datagram QPs (control/ndk_datagram.cc, ndk_qp.cc) -----------------------------------------

// Pd::create_qp and friends: a datagram QP with Q_Key *ud_qkey when ud_qkey is not null.
Status create_qp(PdImpl* pd, CqImpl* r, CqImpl* s, SrqImpl* srq, void* qp_context,
                 uint32_t rq_depth, uint32_t sq_depth, uint32_t max_rsge, uint32_t max_ssge,
                 uint32_t inline_size, CreateCompletion cb, void* ctx, Handle<Qp>* out,
                 const uint32_t* ud_qkey) noexcept;
// The frame addresses for `av` from adapter `a`: its MAC and the source GID av names (or its
// address of av's IP version). False when it has none of that version (or sgid_index is bad).
bool make_net_headers(ctl::Adapter& a, const AddressVector& av, wire::NetHeaders* n);
// The largest IB path MTU whose frames fit the adapter's port (rdma_cm's rule: 1500 -> 1024,
// 9000 -> 4096), or the configured AdapterConfig::cm.path_mtu.
uint32_t largest_path_mtu(AdapterImpl* a) noexcept;

// One neighbour resolution (ARP / IPv6 ND) of `gid` by the adapter's control thread, with the
// 2 s a QP's address vector gets: a QP's modify (its prepare step) and an address handle's
// creation wait through it. poll(): kSuccess with *mac set, kPending (asked, no answer yet), or
// kHostUnreachable once the 2 s have passed.
class NeighbourWait {
 public:
  NeighbourWait(AdapterImpl* a, const ctl::Gid& gid)
      : a_(a), gid_(gid), deadline_(Clock::now() + std::chrono::seconds(2)) {}
  Status poll(wire::MacAddr* mac);

 private:
  AdapterImpl* a_;
  ctl::Gid gid_;
  Clock::time_point deadline_;
  bool asked_ = false;
};

// AddressHandle's private parts (datagram.h): the adapter and the frame headers.
struct AddressHandleAccess {
  static const AdapterImpl* adapter(const AddressHandle& h) noexcept {
    return static_cast<const AdapterImpl*>(h.adapter_);
  }
  static const wire::NetHeaders* net(const AddressHandle& h) noexcept {
    return reinterpret_cast<const wire::NetHeaders*>(h.net_);
  }
  static void set(AddressHandle* h, const AdapterImpl* a, const AddressVector& av,
                  const wire::NetHeaders& n) noexcept {
    static_assert(sizeof(wire::NetHeaders) <= sizeof(h->net_) &&
                  alignof(wire::NetHeaders) <= alignof(AddressHandle));
    std::memcpy(h->net_, &n, sizeof n);
    h->av_ = av;
    h->adapter_ = a;
  }
  // Attach mode: the daemon's address handle (CreateAh) in place of the headers.
  static void set_remote(AddressHandle* h, const AdapterImpl* a, const AddressVector& av,
                         uint32_t handle) noexcept {
    std::memset(h->net_, 0, sizeof h->net_);
    std::memcpy(h->net_, &handle, sizeof handle);
    h->av_ = av;
    h->adapter_ = a;
  }
  static uint32_t remote_handle(const AddressHandle& h) noexcept {
    uint32_t v = 0;
    std::memcpy(&v, h.net_, sizeof v);
    return v;
  }
};

}  // namespace detail
}  // namespace urnic
