// The bridge between attached clients' shared rings and the daemon's own objects (docs/daemon.md
// "Shared rings"). One per engine, run by the engine's lcore between two engine steps
// (urnicd's lcore loop), so a client's work request reaches the engine's QP without a thread
// hop, a lock or a syscall:
//  - send and receive rings: each new slot is copied out of the shared memory first, then
//    checked (opcode, SGE count, inline length, reserved fields) and posted through the public
//    API on the daemon's QP (Qp::send / write / read / receive), which checks the rest as for any
//    application (flags, lengths; keys, rights and bounds at execution). Anything wrong, or a
//    producer index more than a ring ahead, fails that QP alone (to ERR: its work is flushed).
//  - completion rings: the daemon CQ's completions are moved into the client's ring while it has
//    room; a consumer index the client moved past the producer's fails that CQ alone.
// Control (urnicd's main thread) adds and removes rings through a command ring and waits for
// the lcore to apply them, so the lcore owns all of this state and an object is never closed
// while the lcore may still touch its rings.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "daemon/shm.h"
#include "dataplane/ring.h"
#include "urnic/cq.h"
#include "urnic/datagram.h"
#include "urnic/engine.h"
#include "urnic/extensions.h"
#include "urnic/qp.h"
#include "urnic/srq.h"

namespace urnic::daemon {

// A client's address handles (CreateAh), read by the bridges' lcores when a datagram's send slot
// names one (1-based): entries below `count` are written before `count` is published (release)
// and never change afterwards, so a send may use one until it completes.
struct AhTable {
  static constexpr uint32_t kMax = 1024;
  std::array<AddressHandle, kMax> ah;
  std::atomic<uint32_t> count{0};
};

// A client's MRs and memory windows by handle (docs/daemon.md "Memory windows and fast-register
// MRs"), read by the bridges' lcores when a kBind, kInvalidate or kFastRegister slot names one.
// Control publishes an entry (the object, then its handle, release) and retires one by clearing
// the handle and waiting until every bridge took a step (Bridge::quiesce) before it closes the
// object: an lcore that found the handle is done with the object by then.
class MemTable {
 public:
  MemTable();  // throws std::bad_alloc
  ~MemTable();
  MemTable(const MemTable&) = delete;
  MemTable& operator=(const MemTable&) = delete;
  // Control side.
  void publish(uint32_t handle, Object* obj) noexcept;
  // Whether it was published (then the caller quiesces the bridges before closing the object).
  bool retire(uint32_t handle) noexcept;
  // The lcore's: the object named by `handle`, or null.
  Object* find(uint32_t handle) const noexcept;

 private:
  struct Entry {
    std::atomic<uint32_t> handle;
    std::atomic<Object*> obj;
  };
  static constexpr size_t kEntries = size_t{1} << 16;  // a handle's index bits
  Entry* e_ = nullptr;                                 // mmap'd: pages committed as used
};

// The client's shared memory as address ranges, for the bridges' check that a FastRegister maps
// only pages of its own client. Control adds and clears entries; an lcore reads each entry's
// start (acquire) then its end, and never trusts a start of 0: every torn read is an empty or
// an old range, never a range of the daemon's own memory.
struct RegionTable {
  static constexpr uint32_t kMax = 4096;
  struct Range {
    std::atomic<uint64_t> start{0}, end{0};
  };
  std::array<Range, kMax> r;
  std::atomic<uint32_t> used{0};  // entries below this may be set
  // Control side: false when full.
  bool add(uint64_t start, uint64_t end) noexcept;
  void remove(uint64_t start) noexcept;
  // The lcore's: whether [p, p + 4096) lies in one range.
  bool holds_page(uint64_t p) const noexcept;
};

// A QP's copies of its FastRegister page lists, the daemon's own (the engine reads a list when
// the request executes, after the client may have rewritten its area): `chunks` lists of
// kAttachFrmrPages, FastRegister n in chunk n % chunks. With chunks = sq_depth + 1 a chunk is
// reused only after its request retired (the QP holds at most sq_depth outstanding: the post
// that is admitted proves the one sq_depth + 1 back retired). mmap'd: committed as used.
// Freed by the completion of the QP's close.
struct FrArena {
  explicit FrArena(uint32_t sq_depth);  // throws std::bad_alloc
  ~FrArena();
  FrArena(const FrArena&) = delete;
  FrArena& operator=(const FrArena&) = delete;
  uint64_t* chunk(uint32_t n) noexcept {
    return pages + size_t{n % chunks} * shm::kAttachFrmrPages;
  }
  uint64_t* pages = nullptr;
  uint32_t chunks = 0;
};

struct BridgeCounters {
  uint64_t sends = 0, receives = 0, completions = 0;
  uint64_t cq_events = 0;      // client arms satisfied by the bridge (eventfd writes)
  uint64_t client_errors = 0;  // QPs and CQs failed for what their client wrote
  uint64_t sleeps = 0;         // naps with the doorbell armed
  uint64_t wakeups = 0;        // of them ended by a client's doorbell
};

class Bridge {
 public:
  struct QpRings {
    Qp* qp = nullptr;
    QpExtension* ext = nullptr;  // immediates and atomics (found by add_qp's caller)
    shm::RingView sq, rq;
    uint32_t max_send_sge = 0, max_recv_sge = 0, max_inline = 0;
    const AhTable* ahs = nullptr;  // a datagram QP's: its client's address handles
    // Windows and fast-register MRs (RC QPs): the client's MRs and windows, shared memory and
    // the QP's page list area (in its mapping) and arena. Null: kBind and the rest fail the QP.
    const MemTable* mems = nullptr;
    const RegionTable* regions = nullptr;
    const uint64_t* page_area = nullptr;
    FrArena* arena = nullptr;
  };
  struct SrqRing {
    Srq* srq = nullptr;
    shm::RingView ring;
    uint32_t max_sge = 0;
  };
  struct CqRing {
    Cq* cq = nullptr;
    shm::RingView ring;
    int event_fd = -1;  // the client's, written when its arm is satisfied (-1: none)
  };

  Bridge();
  ~Bridge();
  // The engine's doorbell (the sleeping flag's page and the wake eventfd); false if it cannot be
  // made. Control side, before the lcore starts.
  bool make_doorbell();
  // Descriptors for a client (dup'ed: the caller closes them): `what` 0 the page, 1 the eventfd.
  int doorbell_fd(uint32_t what) const noexcept;
  // The lcore's nap: arms the doorbell, naps on `engine` unless work came in meanwhile.
  void nap(Engine& engine, uint32_t max_us) noexcept;
  Bridge(const Bridge&) = delete;
  Bridge& operator=(const Bridge&) = delete;

  // Control side: each returns once the lcore applied it (true), or false when the lcore did not
  // within `patience` (it is not running).
  bool add_qp(const QpRings& q, std::chrono::milliseconds patience = std::chrono::seconds(5));
  bool remove_qp(Qp* qp, std::chrono::milliseconds patience = std::chrono::seconds(5));
  bool add_cq(const CqRing& c, std::chrono::milliseconds patience = std::chrono::seconds(5));
  bool add_srq(const SrqRing& s, std::chrono::milliseconds patience = std::chrono::seconds(5));
  bool remove_srq(Srq* srq, std::chrono::milliseconds patience = std::chrono::seconds(5));
  bool remove_cq(Cq* cq, std::chrono::milliseconds patience = std::chrono::seconds(5));
  // Returns once the lcore took a step from here (what it read before is done with).
  bool quiesce(std::chrono::milliseconds patience = std::chrono::seconds(5));
  // NdkControlCqInterruptModeration for a client's CQ (urnic/cq.h): once an arm is satisfied,
  // its eventfd is written when `count` completions were produced since, or `interval_us` passed,
  // whichever comes first (interval 0 or count 0..1: off; UINT32_MAX: that bound off). Applies
  // from the CQ's next notification.
  bool moderate_cq(Cq* cq, uint32_t interval_us, uint32_t count,
                   std::chrono::milliseconds patience = std::chrono::seconds(5));
  // Cq::resize: from the lcore's next step the CQ's completions go to `ring` (its arm carried
  // over); the old ring is marked moved (shm::RingHeader::moved) with its producer index final,
  // and the bridge touches it no more once this returns true.
  bool move_cq(Cq* cq, const shm::RingView& ring,
               std::chrono::milliseconds patience = std::chrono::seconds(5));
  BridgeCounters counters() const noexcept;

  // The lcore's step: applies commands, then moves work in and completions out. Returns whether
  // it did anything.
  bool poll() noexcept;

 private:
  struct Cmd {
    enum class Kind : uint8_t {
      kAddQp,
      kRemoveQp,
      kAddCq,
      kRemoveCq,
      kAddSrq,
      kRemoveSrq,
      kNop,
      kModerateCq,
      kMoveCq
    } kind;
    QpRings qp;
    CqRing cq;
    SrqRing srq{};
    uint32_t mod_interval_us = 0, mod_count = 0;
  };
  struct LiveQp {
    QpRings r;
    uint32_t sq_cons = 0, rq_cons = 0;  // ours: the client's copies are only published
    uint32_t fast_registers = 0;        // posted: the next one's arena chunk
    bool failed = false;
  };
  struct LiveSrq {
    SrqRing r;
    uint32_t cons = 0;
    bool failed = false;
  };
  struct LiveCq {
    CqRing r;
    uint32_t prod = 0;
    bool failed = false;
    // Moderation (moderate_cq): while `held`, a satisfied arm's eventfd write waits until the
    // producer index is `mod_count` past `held_base` or `deadline` passed.
    uint32_t mod_interval_us = 0, mod_count = 0;
    bool held = false;
    uint32_t held_base = 0;
    std::chrono::steady_clock::time_point deadline{};
    bool moderated() const noexcept { return mod_interval_us != 0 && mod_count > 1; }
  };

  bool submit(const Cmd& c, std::chrono::milliseconds patience);
  void apply(const Cmd& c);
  bool drain_sq(LiveQp& q) noexcept;
  bool drain_rq(LiveQp& q) noexcept;
  bool drain_srq(LiveSrq& q) noexcept;
  // A receive ring's new slots, each checked (reserved 0, at most `max_sge` SGEs) and posted.
  enum class Drained : uint8_t { kIdle, kBusy, kFault };
  template <class Post>
  Drained drain_receives(const shm::RingView& r, uint32_t* cons, uint32_t max_sge,
                         Post post) noexcept;
  bool fill_cq(LiveCq& c) noexcept;
  // After `fresh` was published into `c`'s ring: fires the client's arm if they satisfy it
  // (held first while the CQ is moderated).
  void notify(LiveCq& c, std::span<const ResultEx> fresh) noexcept;
  // A held CQ's notification, when its count or deadline is met (or `now` forced): the eventfd.
  void release_if_due(LiveCq& c, bool force = false) noexcept;
  void signal(LiveCq& c) noexcept;
  uint32_t held_ = 0;  // CQs held by moderation (the lcore's)
  // Whether a client published work the bridge has not taken yet (the lcore's, before a nap).
  bool pending() const noexcept;
  // Takes a QP out of service for its client's fault: to ERR, its work flushed.
  void fail(LiveQp& q) noexcept;
  // kBind, kInvalidate, kFastRegister (bridge_memory.cc): posts the copy `w` of a slot. For the
  // synchronous ones *sync is set, the status is the request's own and *token its new token
  // (both written back to the client); for kInvalidate, a failure is the client's fault as for
  // any other slot.
  Status post_memory(LiveQp& q, const shm::SendSlot& w, uint32_t flags, bool* sync,
                     uint32_t* token) noexcept;

  std::mutex submit_mu_;  // control side: one command in flight at a time
  dp::SpscRing<Cmd> cmds_{16};
  std::atomic<uint64_t> applied_{0};
  uint64_t submitted_ = 0;  // under submit_mu_

  // ---- the lcore's
  std::vector<LiveQp> qps_;
  std::vector<LiveCq> cqs_;
  std::vector<LiveSrq> srqs_;
  std::atomic<uint64_t> sends_{0}, receives_{0}, completions_{0}, client_errors_{0};
  std::atomic<uint64_t> cq_events_{0};
  std::atomic<uint64_t> sleeps_{0}, wakeups_{0};
  int page_fd_ = -1, wake_fd_ = -1;
  shm::EngineDoorbell* door_ = nullptr;
};

}  // namespace urnic::daemon
