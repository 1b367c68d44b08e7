// One client's objects in urnicd (docs/daemon.md "Objects and shared rings"): shared memory,
// PDs, CQs, QPs and MRs, each a daemon-side object of the public API on one of the daemon's
// adapters, named by a handle that indexes this client's table alone (a handle of another
// client's names nothing here). Quotas per client come from the configuration. Everything is
// destroyed when the client goes (destroy_all, from ~ClientObjects): QPs first (flushed to ERR,
// so their peers see the connection die), then MRs, CQs, PDs and the shared memory.
//
// Called on urnicd's main thread only (the server's epoll loop).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "daemon/bridge.h"
#include "daemon/protocol.h"
#include "urnic/adapter.h"
#include "urnic/connector.h"
#include "urnic/listener.h"
#include "urnic/mr.h"
#include "urnic/mw.h"
#include "urnic/pd.h"

namespace urnic::daemon {

struct Quotas {
  uint32_t pds = 64, cqs = 256, qps = 1024, mrs = 4096;
  uint64_t shared_bytes = uint64_t{4} << 30;  // shared memory a client may hold
};

struct ServedAdapter;

// A handle names slot `index` of its client's table in generation `gen`.
inline uint32_t index_of(uint32_t handle) { return (handle & 0xffff) - 1; }
inline uint32_t handle_of(uint16_t gen, uint32_t index) {
  return uint32_t{gen} << 16 | (index + 1);
}

// Whether `fd` is an eventfd; made non-blocking (neither an lcore nor the control thread may
// block on a client's descriptor).
bool usable_eventfd(int fd);

// A client's CM event channel (docs/daemon.md "Connections"): the daemon's connectors and
// listeners report here from the adapter's control thread; the client takes the events with
// kCmEvents (the main thread). A new connector of a request waits here, owned by the queue,
// until the client takes it (or the queue goes: then it is closed, which refuses the request).
class CmQueue {
 public:
  explicit CmQueue(int event_fd) : event_fd_(event_fd) {}
  ~CmQueue();
  CmQueue(const CmQueue&) = delete;
  CmQueue& operator=(const CmQueue&) = delete;
  struct Pending {
    ipc::CmEvent ev{};
    Handle<Connector> fresh;  // kRequest's new connector
  };
  // Any thread. Writes the client's eventfd. A request beyond kMaxPending is refused (its
  // connector closed): a client that never takes its events cannot make the daemon hold more.
  void push(ipc::CmEvent e, Connector* fresh = nullptr);
  // Up to `max` events, oldest first; *more says whether others wait.
  std::vector<Pending> take(size_t max, bool* more);
  static constexpr size_t kMaxPending = 4096;

 private:
  std::mutex mu_;
  std::deque<Pending> events_;
  const int event_fd_;
};

// What a connector's or listener's callbacks report to: made with its table entry, freed by the
// completion of its close (its last callback), which may come after the entry is gone.
struct CmCtx {
  std::shared_ptr<CmQueue> queue;
  uint32_t handle = 0;
};

// An SRQ's limit event: the channel it goes to, set by ModifySrq (main thread) and read by the
// notification (control thread). Freed by the completion of the SRQ's close, after which no
// notification runs.
struct SrqCtx {
  std::mutex mu;
  std::shared_ptr<CmQueue> queue;  // guarded by mu; null until a ModifySrq names a channel
  uint32_t handle = 0;
};

// Closes the object `h` holds, whose callbacks get `ctx`: the context is freed by the close's
// completion (after the last callback, possibly on the adapter's control thread), or now when the
// close completed at once.
template <class T, class Ctx>
void close_freeing(Handle<T>& h, std::unique_ptr<Ctx>& ctx) {
  Ctx* c = ctx.release();
  const CloseCompletion done = [](void* p) { delete static_cast<Ctx*>(p); };
  if (h.close(done, c) != Status::kPending) delete c;
}

struct ObjectCounts {
  uint32_t shared = 0, pds = 0, cqs = 0, qps = 0, mrs = 0, srqs = 0;
  uint32_t connectors = 0, listeners = 0;
  uint64_t shared_bytes = 0;
  uint32_t mws = 0;  // memory windows (fast-register MRs count as MRs)
};

class ClientObjects {
 public:
  // `bridges[i]` serves the daemon's engine i.
  ClientObjects(const std::vector<ServedAdapter>& adapters, const std::vector<Bridge*>& bridges,
                const Quotas& quotas)
      : adapters_(adapters), bridges_(bridges), quotas_(quotas) {}
  ~ClientObjects() { destroy_all(); }
  ClientObjects(const ClientObjects&) = delete;
  ClientObjects& operator=(const ClientObjects&) = delete;

  // Each fills its reply (the header is the caller's) and returns its status; *fd is a memfd to
  // pass with the reply (the caller closes it after sending), -1 if none.
  Status alloc_shared(const ipc::AllocSharedReq& q, ipc::AllocSharedRep* rep, int* fd);
  // Maps the client's memfd `fd` (ours to close) at the client's address.
  Status share_memory(const ipc::ShareMemoryReq& q, int fd, ipc::HandleRep* rep);
  Status create_pd(const ipc::CreatePdReq& q, ipc::HandleRep* rep);
  // `event_fd` (ours to close; -1: none) must be an eventfd: the bridge writes it, non-blocking,
  // when the client's arm is satisfied. Anything else is refused (kInvalidParameter): a pipe
  // that filled up would stall the engine's lcore.
  Status create_cq(const ipc::CreateCqReq& q, int event_fd, ipc::CreateCqRep* rep, int* fd);
  // `qkey` (null: an RC QP) makes a datagram QP with that Q_Key.
  Status create_qp(const ipc::CreateQpReq& q, ipc::CreateQpRep* rep, int* fd,
                   const uint32_t* qkey = nullptr);
  // An address handle on the adapter (blocks this thread while the daemon resolves the MAC,
  // up to 2 s); kept until the client goes, at most AhTable::kMax of them. The server resolves
  // off its thread instead when a MAC is to be found: prepare_ah (the checks, the address
  // vector), create_address_handle on a thread of its own, then add_ah.
  Status create_ah(const ipc::CreateAhReq& q, ipc::HandleRep* rep);
  Status prepare_ah(const ipc::CreateAhReq& q, AddressVector* av, Adapter** adapter);
  Status add_ah(const AddressHandle& ah, ipc::HandleRep* rep);
  Status query_counters(const ipc::QueryCountersReq& q, ipc::QueryCountersRep* rep);
  // Cq::resize: the daemon's CQ resized, a new ring (*fd its memfd, the caller's to close after
  // the reply), the bridge moved to it; the old ring unmapped here.
  Status resize_cq(const ipc::ResizeCqReq& q, ipc::CreateCqRep* rep, int* fd);
  // Cq::control_interrupt_moderation: the CQ's bridge holds its notifications.
  Status moderate_cq(const ipc::ModerateCqReq& q);
  // Srq::modify; the limit event goes to the channel named.
  Status modify_srq(const ipc::ModifySrqReq& q);
  // SRQs count against the QP quota.
  Status create_srq(const ipc::CreateSrqReq& q, ipc::CreateSrqRep* rep, int* fd);
  Status modify_qp(const ipc::ModifyQpReq& q);
  Status register_mr(const ipc::RegisterMrReq& q, ipc::RegisterMrRep* rep);
  // Memory windows and fast-register MRs (mem_objects.cc); both count against the MR quota.
  Status create_mw(const ipc::CreateMwReq& q, ipc::RegisterMrRep* rep);
  Status init_frmr(const ipc::InitFrmrReq& q, ipc::RegisterMrRep* rep);
  // Connectors and listeners (cm_objects.cc). `event_fd` (ours to close) must be an eventfd.
  // Connectors and listeners count against the QP quota, as the kernel's rdma_cm ids do not, but
  // each holds CM state in the daemon.
  Status cm_channel(const ipc::CmChannelReq& q, int event_fd, ipc::HandleRep* rep);
  Status cm_create(const ipc::CmCreateReq& q, ipc::HandleRep* rep);
  // kPending for a call whose outcome arrives as an event (kCompleted).
  Status cm_call(const ipc::CmCallReq& q, ipc::CmCallRep* rep);
  Status cm_events(const ipc::CmEventsReq& q, ipc::CmEventsRep* rep);
  // kInvalidHandle for a handle of nothing; kDeviceBusy for an object others still use (a PD
  // with QPs or MRs, a CQ with QPs, shared memory with MRs in it), as NDK's close would pend.
  Status destroy(uint32_t handle);
  void destroy_all();

  ObjectCounts counts() const noexcept;

 private:
  enum class Kind : uint8_t {
    kFree,
    kShared,
    kPd,
    kCq,
    kQp,
    kMr,
    kSrq,
    kCmChannel,
    kConnector,
    kListener,
    kMw,
    kCount
  };
  struct Obj {
    Kind kind = Kind::kFree;
    uint16_t gen = 0;       // bumped on every reuse of the slot: stale handles name nothing
    uint32_t adapter = 0;   // PD, CQ, QP, MR
    uint32_t engine = 0;    // CQ, QP: the bridge that serves it
    uint32_t users = 0;     // QPs and MRs of a PD, QPs of a CQ, MRs in shared memory
    uint32_t uses[4] = {};  // handles it counts as a user of (QP: PD, CQs, SRQ; MR: PD, 1-2 shm;
                            // SRQ: PD; connector: channel, QP; listener: channel)
    int event_fd = -1;      // a CQ's: the client's eventfd (closed when the CQ goes)
    uint32_t capacity = 0;  // an SRQ's receive ring
    void* map = nullptr;    // shared memory, a CQ's or QP's rings: our mapping
    size_t map_len = 0;
    Handle<Pd> pd;
    Handle<Cq> cq;
    Handle<Qp> qp;
    Handle<Mr> mr;
    Handle<Mw> mw;
    bool frmr = false;  // an MR: fast-register
    Handle<Srq> srq;
    Handle<Connector> conn;
    Handle<Listener> lis;
    std::shared_ptr<CmQueue> queue;   // a channel's
    std::unique_ptr<CmCtx> cm_ctx;    // a connector's or listener's callbacks' context
    std::unique_ptr<SrqCtx> srq_ctx;  // an SRQ's limit event's
    std::unique_ptr<FrArena> arena;   // an RC QP's FastRegister page lists (its close frees it)
  };

  // A free slot's handle (or 0 when the table is full); the slot is kind `k` from then on.
  uint32_t add(Kind k);
  Obj* find(uint32_t handle, Kind k);
  void release(uint32_t handle);
  uint32_t count(Kind k) const noexcept;
  // A create of object `h` that failed with `s` (its rings mapped or not, *fd made or not):
  // unmaps, closes *fd (-1 from then), frees the slot; returns `s`.
  Status undo_create(uint32_t h, int* fd, Status s);
  // The shared memory slot holding `address`, or -1.
  int shared_at(uint64_t address) const noexcept;
  // Whether [address, + length) lies in this client's shared memory (one region, or two that
  // touch); shm[] gets their handles (0 for none).
  bool inside_shared(uint64_t address, uint64_t length, uint32_t shm[2]);
  // A table entry for connector `c` (a listener's request) reporting to channel `channel`; 0
  // when the table or quota is full.
  uint32_t adopt_connector(Handle<Connector> c, uint32_t channel);
  // A connector's or listener's slot (kind `k`) reporting to channel `channel`: on its adapter,
  // its callbacks' context made, the channel counted as used. 0 when `channel` is not a channel
  // or the quota or the table is full.
  uint32_t add_cm(Kind k, uint32_t channel);
  Status connector_call(Obj& o, const ipc::CmCallReq& q, ipc::CmCallRep* rep);
  // A slot of kind `k` (an MR or a window) on the adapter of PD `pd` (a PD of this client), within
  // the MR quota (windows and fast-register MRs count as MRs, as NDK's max_mrs); 0 when full.
  uint32_t add_memory(Kind k, uint32_t pd);
  // An MR or window (mem_objects.cc): the first part of its destroy. Out of the bridges' table
  // (and quiesced) before it closes; kDeviceBusy for a registered MR with a window bound.
  Status retire_memory(Obj& o, uint32_t handle);
  // Shared memory going (mem_objects.cc): out of the region table; with fast-register MRs ever
  // made, its addresses stay reserved (zero pages) until the client goes, so that a region
  // still mapping it reaches nothing of anyone's.
  void unmap_shared(Obj& o);
  // Whether [address, + length) lies in one of the reserved ranges; if so it leaves them (the
  // caller maps over it at once).
  bool take_reserved(uint64_t address, uint64_t length);
  // Every bridge serving one of this client's QPs took a step.
  void quiesce_bridges();
  Status listener_call(Obj& o, const ipc::CmCallReq& q, ipc::CmCallRep* rep);

  const std::vector<ServedAdapter>& adapters_;
  const std::vector<Bridge*>& bridges_;
  const Quotas quotas_;
  std::vector<Obj> table_;
  // Live objects by kind, kept by add() and release(): quotas and counts without a table walk.
  std::array<uint32_t, static_cast<size_t>(Kind::kCount)> live_{};
  // Address handles, made with the first; the bridges read them while the client's datagram QPs
  // live (destroy_all removes those first). Freed with this table.
  std::unique_ptr<AhTable> ahs_;
  // The table, made on first use (before any bridge is given it).
  AhTable& ah_table() {
    if (!ahs_) ahs_ = std::make_unique<AhTable>();
    return *ahs_;
  }
  uint64_t shared_bytes_ = 0;
  // MRs and windows by handle, and the shared memory's ranges, for the bridges (bridge.h).
  std::unique_ptr<MemTable> mems_ = std::make_unique<MemTable>();
  std::unique_ptr<RegionTable> regions_ = std::make_unique<RegionTable>();
  bool had_frmrs_ = false;
  bool windows_ = false;  // a window was made: registered MRs are in mems_ from then on
  std::vector<std::pair<void*, size_t>> reserved_;  // unmap_shared's, unmapped by destroy_all
};

}  // namespace urnic::daemon
