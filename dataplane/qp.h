// Reliable-connected queue pair as the engine sees it: attributes, the state machine, and the
// per-stage transport state of the requester, completer and responder (IBTA Vol. 1 ch. 9-10;
// rocev2.md §3). A Qp is created by the control plane and then owned by exactly one engine:
// every field of QpLc below `// ---- engine-owned` is read and written only on that engine's
// lcore. The fields are private to the Qp: the dataplane's stages reach them through lc(), the
// control side and tests see const views.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "dataplane/dcqcn.h"
#include "dataplane/mailbox.h"
#include "dataplane/ring.h"
#include "dataplane/wire/frame.h"
#include "dataplane/wire/psn.h"
#include "dataplane/wqe.h"
#include "urnic/congestion.h"
#include "urnic/counters.h"
#include "urnic/status.h"
#include "urnic/types.h"

struct rte_mbuf;

namespace urnic::dp {

class Cq;
class Endpoint;
class MrTable;
class Qp;
class Srq;

// The QP states and the modify masks are the public ones (urnic/types.h): one definition.
using ::urnic::QpState;
namespace qp_attr = ::urnic::qp_attr_mask;
using ::urnic::QpCounters;  // urnic/counters.h
using ::urnic::to_string;   // QpState, RxDrop, Status names

struct QpAttr {
  QpState state = QpState::kReset;
  uint32_t access = 0;  // remote rights the QP accepts: access::kRemoteRead/Write/Atomic
  uint32_t path_mtu = 1024;
  uint32_t dest_qpn = 0;
  uint32_t rq_psn = 0;             // first PSN expected from the peer
  uint32_t sq_psn = 0;             // first PSN sent
  uint8_t max_dest_rd_atomic = 1;  // responder resources for incoming READ/ATOMIC
  uint8_t max_rd_atomic = 1;       // outstanding READ/ATOMIC this requester may have
  uint8_t timeout = 14;            // local ACK timeout 4.096 us * 2^timeout; 0 = infinite
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;  // 7 = infinite (IBTA §9.7.5.2.8)
  uint8_t min_rnr_timer = 12;
  wire::NetHeaders av{};  // address vector: MACs, IPs (the GIDs), traffic class, hop limit
  // Congestion control (QpConfig::cc at creation, or qp_attr::kCongestion up to RTR): the
  // engine's copy, which the notification and reaction points read.
  CongestionConfig cc{};
  // Selective repeat (urnic extension, qp_attr::kSelectiveRepeat; dataplane/reorder.h): set only
  // when both ends are urnic (negotiated by the CM, or set explicitly on both QPs).
  bool selective_repeat = false;
  // Datagram QPs (QpConfig::ud): the Q_Key received datagrams must carry (IBTA §10.2.5).
  uint32_t qkey = 0;
};

// Checks a modify against the transition table of the QP's service (rocev2.md §3.8, IBTA
// §10.3.1; `ud`: the UD column): the target state is reachable from `cur`, every required
// attribute is present and in range, and nothing forbidden is set. kInvalidDeviceState for an
// illegal transition, kInvalidParameter for a missing or out-of-range attribute.
Status validate_modify(QpState cur, const QpAttr& attr, uint32_t mask, bool ud = false) noexcept;

// Local ACK timeout in nanoseconds (0 = infinite), IBTA §9.7.6.1.3: 4.096 us * 2^timeout.
constexpr uint64_t ack_timeout_ns(uint8_t timeout) noexcept {
  return timeout == 0 ? 0 : 4096ull << timeout;
}
// RNR timer codes (IBTA table 45; rocev2.md §3.3) in microseconds.
uint32_t rnr_timer_us(uint8_t code) noexcept;

// Maps a verbs completion status to the NTSTATUS an NDK consumer sees (ndkpi.md §3.3).
Status status_of(WcStatus wc) noexcept;

// One send-queue entry as the requester tracks it until it is retired. The WQE comes last: a
// QP's slots are as long as its send ring's (QpLc::Requester::at), so the SGE / inline area
// beyond what the QP accepts is not there.
struct SendSlot {
  wire::Psn first_psn;
  wire::Psn last_psn;
  uint32_t npkts = 0;      // PSNs the message consumes (a READ: its response packets)
  uint32_t resp_pkts = 0;  // READ: response packets received in order
  bool started = false;    // PSNs assigned (or, for local operations, executed)
  bool done = false;       // ready to retire (completion may still be silent)
  WcStatus wc = WcStatus::kSuccess;
  uint32_t inv_key = 0;   // READ with local invalidate: key to invalidate on success
  bool resent = false;    // went out more than once (Karn: no round-trip sample from it)
  uint64_t sent_tsc = 0;  // when it last went out (its first packet, or a resend)
  SendWqe wqe;            // last: see above
};
// A requester slot for send slots of `wqe_bytes` (send_wqe_slot_bytes).
constexpr size_t send_slot_bytes(size_t wqe_bytes) noexcept {
  return offsetof(SendSlot, wqe) + wqe_bytes;
}
static_assert(send_slot_bytes(sizeof(SendWqe)) == sizeof(SendSlot));

// Responder work that produces frames in PSN order: READ responses, ATOMIC ACKs, NAKs and the
// trailing coalesced ACK, so that no ACK ever overtakes an earlier READ response (which the
// requester would read as an implied NAK).
struct RespJob {
  enum class Kind : uint8_t { kRead, kAtomicAck, kAck, kNak, kRnrNak };
  union {
    uint64_t va = 0;  // READ: remote address of the whole request
    uint64_t orig;    // ATOMIC: original value
  };
  uint32_t npkts = 1;     // READ: response packets
  uint32_t next_pkt = 0;  // READ: next response packet to send
  uint32_t rkey = 0;
  uint32_t length = 0;
  // The PSN and the MSN are 24-bit fields on the wire (BTH, AETH): each shares its word with a
  // byte, so that a job is half a cache line.
  uint32_t psn_bits : 24 = 0;  // first PSN of the job (READ: of its first response): psn()
  uint32_t syndrome : 8 = 0;   // NAK / RNR NAK / ACK syndrome
  uint32_t msn : 24 = 0;
  Kind kind : 8 = Kind::kAck;
  wire::Psn psn() const noexcept { return wire::Psn(psn_bits); }
  void set_psn(wire::Psn p) noexcept { psn_bits = p.value(); }
};
// 32 bytes: a QP that accepts 16 READs in flight holds 36 of them (resp_jobs_for).
static_assert(sizeof(RespJob) == 32);

// A saved READ/ATOMIC request (responder resource, IBTA §9.7.5.1.1; rocev2.md §3.5), used to
// replay a duplicate READ from memory and answer a duplicate ATOMIC without executing it again.
struct RespResource {
  wire::Psn first_psn;
  wire::Psn last_psn;
  union {
    uint64_t va = 0;  // READ: the whole request's address
    uint64_t orig;    // ATOMIC: the original value, returned again for a duplicate
  };
  uint32_t rkey = 0, length = 0;  // READ
  bool valid = false;
  bool atomic = false;
};
// 32 bytes: a QP that accepts 16 READs in flight holds 16 of them.
static_assert(sizeof(RespResource) == 32);

// The responder's arrays for a given max_dest_rd_atomic: resources a power of two >= it (rxe
// does the same), and room for the jobs they can queue: one READ response or ATOMIC ACK per
// resource, at most one ACK between two of those (ACKs coalesce), a NAK and an RNR NAK. A peer
// that exceeds its limit finds the queue full and retransmits (RespState::kDropQueueFull). The
// job queue holds exactly that many, not the next power of two: it was most of an idle QP's
// memory (3 KiB of 7.9 for 16 READs in flight; issue 14 item 3).
constexpr uint32_t resp_resources_for(uint32_t max_dest_rd_atomic) noexcept {
  uint32_t n = 1;
  while (n < max_dest_rd_atomic) n <<= 1;
  return n;
}
constexpr uint32_t resp_jobs_for(uint32_t resources) noexcept { return 2 * resources + 4; }

// Responder arrays made on the control side for a modify that sets max_dest_rd_atomic (the
// engine never allocates): the engine swaps them in if the QP's are too small, and the message
// then carries the old ones back to be freed by the control side (Engine::call / submit).
struct RespArrays {
  std::unique_ptr<RespResource[]> res;
  std::unique_ptr<RespJob[]> jobs;
  uint32_t nres = 0, njobs = 0;
  // Allocates the arrays for `max_dest_rd_atomic`. False when memory cannot be had.
  bool make(uint32_t max_dest_rd_atomic) noexcept;
};

struct QpConfig {
  uint32_t qpn = 0;
  uint32_t pd = 0;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  void* context = nullptr;  // NDK QPContext, echoed in every completion
  uint32_t sq_depth = 256;  // powers of two
  uint32_t rq_depth = 256;
  uint32_t max_send_sge = kMaxSge;
  uint32_t max_recv_sge = kMaxSge;
  uint32_t max_inline = kMaxInline;
  uint32_t max_unacked_psns = 256;  // requester send window (rxe uses 128)
  // AdapterConfig::adaptive_retransmit: probes after two round trips without progress (the
  // oldest unacknowledged packet alone, backing off), and after the second local ACK timeout in a
  // row without progress, back off (the next wait drawn from [T, 2T], then [2T, 4T]) and restart
  // the send window at four packets, halving it on further losses until it is whole again
  // (requester.cc). false: plain go-back-N, the whole window again every T.
  bool adaptive_retransmit = false;
  BrokenRules broken{};  // AdapterConfig::broken_rules (testing builds)
  // Congestion control (AdapterConfig::congestion): ECN marking, CNPs, DCQCN. The maximum rate
  // is resolved (never 0) by the adapter: its configured value or the port's link speed. The
  // engine works from the QP's attributes (QpAttr::cc), which start as this.
  CongestionConfig cc{};
  // Receives come from this shared receive queue instead of the QP's own ring (null: none).
  // Every QP sharing it must run on the SRQ's engine.
  Srq* srq = nullptr;
  // Work requests that may be outstanding (posted and not yet retired by a completion), send
  // and receive side (NDK queue depths, ndkpi.md §2.4). 0: bounded only by the ring, which lets
  // up to twice the depth be outstanding (the ring plus the requester's slots).
  uint32_t sq_limit = 0;
  uint32_t rq_limit = 0;
  // An unreliable-datagram QP (dataplane/datagram.cc): one UD SEND ONLY per message, no PSN
  // tracking, no responder; `ud_mtu` is the largest datagram payload.
  bool ud = false;
  uint32_t ud_mtu = 1024;
  // Which of its adapter's engines owns the QP (ctl::Adapter::engine): where the control side
  // sends its mailbox messages. 0 with one engine.
  uint8_t engine = 0;
};

// Longest message (IBTA §9.4: DMA lengths above 2^31 are invalid requests), and so the longest
// send, READ, WRITE or receive buffer a post may name (NDK max_transfer_length).
inline constexpr uint32_t kMaxMessageLength = 1u << 31;
// Deepest send or receive queue (and SRQ) a QP may ask for: a ring of 2^15 slots.
inline constexpr uint32_t kMaxQueueDepth = 32768;
// Largest max_rd_atomic / max_dest_rd_atomic accepted (validate_modify).
inline constexpr uint32_t kMaxRdAtomicLimit = 128;
// Selective repeat: the responder holds frames up to this many PSNs ahead of ePSN, and a QP
// with selective repeat keeps at most this many PSNs outstanding.
inline constexpr uint32_t kReorderSlots = 256;

// Selective repeat (dataplane/reorder.h): frames that arrived ahead of the PSN expected next, by
// PSN modulo kReorderSlots, held until the hole before them is filled; the responder's for
// requests, the requester's for READ responses and ATOMIC ACKs. The arrays exist only once the
// QP was prepared for selective repeat (Qp::prepare_selective_repeat); until then count is 0.
struct ReorderBuf {
  std::unique_ptr<rte_mbuf*[]> frame;
  std::unique_ptr<uint32_t[]> psn;
  uint32_t count = 0;
  wire::Psn high;  // the highest PSN seen ahead (the holes below it were reported)
};

// A QP's place on one of its engine's lists (dataplane/sched.h).
struct QpLink {
  Qp* prev = nullptr;
  Qp* next = nullptr;
  bool linked = false;
};

// A QP's state, private to dp::Qp: the posting side's rings and counts, and the engine-owned
// transport state (the requester, completer and responder).
struct QpLc {
  WqeRing<SendWqe> sq;  // producer: application; consumer: engine
  WqeRing<RecvWqe> rq;

  // Outstanding-request accounting for QpConfig::sq_limit / rq_limit: the posters count what
  // they posted, the engine what it retired (completions, silent ones included, and requests a
  // reset dropped). The engine publishes with release stores, the posters load with acquire.
  struct alignas(kCacheLine) PostCounts {
    uint64_t sq = 0;  // send poster only
    uint64_t rq = 0;  // receive poster only
  };
  PostCounts posted_;
  alignas(kCacheLine) std::atomic<uint64_t> sq_retired_{0};  // engine only writes
  std::atomic<uint64_t> rq_retired_{0};                      // engine only writes (no SRQ)

  // The doorbell (dataplane/sched.h): `rung` is set by the first post that finds it clear, which
  // then queues the QP's slot in its engine's table on the engine's doorbell ring; the engine
  // clears it when a visit finds the QP idle. `ring` and `slot` are set when the engine adds
  // the QP, before any post can reach it. The ring names the slot, not the QP: an entry may
  // become visible after the QP is gone (a bounded MPSC ring shows an entry only once every
  // push before it finished), and then finds the slot empty, or another QP in it.
  struct alignas(kCacheLine) Doorbell {
    std::atomic<bool> rung{false};
    MpscPtrRing<Qp*>* ring = nullptr;
    Qp** slot = nullptr;
  };
  Doorbell db_;

  // ---- engine-owned: only the owning engine's lcore reads and writes these ---------------------
  QpState state = QpState::kReset;
  Endpoint* ep = nullptr;  // the adapter's endpoint it is served through (set when added)
  QpLink ready_link;       // on the engine's ready list / timer list (dataplane/sched.h)
  QpLink timer_link;
  QpAttr attr;
  wire::NetTemplate net;  // attr.av's headers, prebuilt (qp_modify_lc; wire/frame.h)
  QpCounters counters;

  struct Requester {
    // mask + 1 slots of slot_bytes each (send_slot_bytes of the send ring's slots).
    std::unique_ptr<std::byte[]> slots;
    size_t slot_bytes = 0;
    uint32_t mask = 0;
    uint64_t head = 0;  // oldest slot not yet retired
    uint64_t cur = 0;   // slot being transmitted (or retransmitted)
    uint64_t tail = 0;  // next free slot
    uint32_t cur_pkt = 0;
    wire::Psn psn;       // PSN of the next packet to send
    wire::Psn una;       // oldest PSN not yet acknowledged
    wire::Psn max_sent;  // one past the highest PSN ever sent (for counting retransmits)
    uint32_t rd_atomic_outstanding = 0;
    bool gap_retry = false;  // a READ response gap was already answered with a re-request
    uint8_t retry_left = 7;
    uint8_t rnr_left = 7;
    uint64_t ack_deadline = 0;  // TSC; 0 = timer off
    uint64_t rnr_deadline = 0;  // TSC; 0 = not waiting
    // Selective repeat: when the oldest unacknowledged packet is resent alone if nothing has
    // moved (TSC; 0 = off): an eighth of the local ACK timeout (requester_timers_lc).
    uint64_t probe_deadline = 0;
    bool probe_una = false;     // go-back-N's probe is due (adaptive retransmission)
    uint8_t probes_in_row = 0;  // probes since the last progress (each doubles the next wait)
    // The local ACK timeout and the probe's current wait in TSC ticks (requester_retime_lc).
    uint64_t ack_ticks = 0, probe_ticks = 0;
    // Adaptive retransmission (QpConfig::adaptive_retransmit): PSNs that may be outstanding
    // after repeated timeouts (0: the configured window), the slow-start threshold, the ACKed
    // PSNs not yet turned into window growth above it, and the jitter generator's state.
    uint32_t cwnd = 0;
    uint32_t ssthresh = 0;
    uint32_t cwnd_acc = 0;
    uint32_t jitter = 0;
    wire::Psn recover;  // one past the highest PSN sent at the last halving (once per window)
    bool recovering = false;
    bool congested = false;  // since a second timeout in a row, until the window is whole again
    uint8_t timeouts_in_row = 0;  // local ACK timeouts without forward progress
    // Selective repeat (requester.cc, resend_selected_lc): PSNs to resend one by one, and per
    // PSN modulo kReorderSlots the last PSN resent that way, so that each hole goes out once per
    // NAK that names it however often it is named (a lost resend waits for the probe).
    static constexpr uint32_t kSrQueue = 64;
    std::unique_ptr<uint32_t[]> sr_queue;
    uint32_t sr_head = 0, sr_tail = 0;
    std::unique_ptr<uint32_t[]> sr_resent;
    ReorderBuf held;  // selective repeat: responses ahead of the one expected next
    // Selective repeat: the smoothed round trip (TSC ticks; 0: none measured yet), from one new
    // packet at a time to the progress past it, and from each READ / atomic response (RFC 6298's
    // estimator, Karn's rule), for the probe and the timer.
    uint64_t srtt = 0;
    uint64_t min_rtt = 0;   // the smallest sample (0: none): the round trip of an idle path
    uint64_t ack_wait = 0;  // the local ACK timer's wait: ack_ticks, or longer (ack_wait_lc)
    uint64_t rtt_tsc = 0;
    uint64_t sample_tsc = 0;  // when the last sample was taken
    wire::Psn rtt_psn;
    bool rtt_pending = false;
    // Selective repeat: an ACK that an incomplete READ / atomic stopped (ack_through_lc), applied
    // again once that completes, so the requests behind it need no resend.
    wire::Psn sr_ack;
    bool sr_ack_valid = false;
    SendSlot& at(uint64_t i) noexcept {
      return *reinterpret_cast<SendSlot*>(slots.get() + (i & mask) * slot_bytes);
    }
    const SendSlot& at(uint64_t i) const noexcept {
      return *reinterpret_cast<const SendSlot*>(slots.get() + (i & mask) * slot_bytes);
    }
  } req;

  struct Responder {
    wire::Psn epsn;
    uint32_t msn = 0;
    bool nak_sent = false;  // one sequence-error NAK per gap (rocev2.md §3.6)
    // Message in progress (multi-packet SEND / WRITE): the opcode class that may follow.
    enum class InMsg : uint8_t { kNone, kSend, kWrite } in_msg = InMsg::kNone;
    // The receive WQE the current SEND consumes, in a buffer of one slot of the QP's receive
    // queue (or its SRQ's): recv_wqe_slot_bytes, not a whole 272-byte RecvWqe per QP.
    std::unique_ptr<std::byte[]> recv_slot;
    RecvWqe& recv() noexcept { return *reinterpret_cast<RecvWqe*>(recv_slot.get()); }
    const RecvWqe& recv() const noexcept {
      return *reinterpret_cast<const RecvWqe*>(recv_slot.get());
    }
    bool have_recv = false;
    uint32_t recv_off = 0;
    uint64_t write_va = 0;  // WRITE: next address
    uint32_t write_rkey = 0;
    uint32_t write_left = 0;
    uint32_t write_len = 0;  // RETH DMA length of the current WRITE
    std::unique_ptr<RespResource[]> res;
    uint32_t res_cap = 0;    // entries in `res` (resp_resources_for its max_dest_rd_atomic)
    uint32_t res_count = 0;  // power of two >= max_dest_rd_atomic
    uint32_t res_next = 0;
    // Jobs in PSN order: a circular queue of jobs_cap entries (not a power of two), the oldest
    // at jobs_head, jobs_count of them.
    std::unique_ptr<RespJob[]> jobs;
    uint32_t jobs_cap = 0;
    uint32_t jobs_head = 0, jobs_count = 0;
    RespJob& job(uint32_t k) noexcept {  // the k-th oldest job, k < jobs_cap
      const uint32_t i = jobs_head + k;
      return jobs[i < jobs_cap ? i : i - jobs_cap];
    }
    const RespJob& job(uint32_t k) const noexcept {
      const uint32_t i = jobs_head + k;
      return jobs[i < jobs_cap ? i : i - jobs_cap];
    }
    bool ack_pending = false;  // a coalesced ACK is owed for ack_psn (no job queued)
    wire::Psn ack_psn;
    ReorderBuf held;  // selective repeat: requests ahead of ePSN
  } resp;

  // Congestion control (dataplane/congestion.cc): the reaction point's rate and pacer, and when
  // the notification point last sent a CNP (TSC; 0: never).
  Dcqcn dcqcn;
  uint64_t last_cnp_tsc = 0;

  std::atomic<QpState> public_state_{QpState::kReset};
};

class Qp {
 public:
  explicit Qp(const QpConfig& cfg);
  Qp(const Qp&) = delete;
  Qp& operator=(const Qp&) = delete;

  const QpConfig& config() const noexcept { return cfg_; }
  uint32_t qpn() const noexcept { return cfg_.qpn; }
  // Allocates what selective repeat needs (two reorder buffers and the resend table, ~7 KiB), so
  // that QPs that never use it do not carry it. Control side, before the modify that sets
  // QpAttr::selective_repeat (the mailbox that carries the modify publishes the arrays to the
  // engine); idempotent. False when memory cannot be had.
  bool prepare_selective_repeat() noexcept;
  bool selective_repeat_ready() const noexcept { return lc_.req.sr_resent != nullptr; }

  // ---- Posting (application thread; one poster per queue, NDK posting rules) ---------------
  // Stages a send WQE that the public API has validated (control/ndk_qp*.cc: arguments are
  // checked once, at the API's edge, issue 42) and publishes it unless DEFER: only what may
  // change after those checks is checked here, the QP's state and the send queue's room. On
  // failure the previously deferred WQEs are published first (ndkpi.md §7.3) and nothing is
  // posted.
  Status enqueue_send(const SendWqe& wqe) noexcept;
  // In place (issue 42: a request is written once, into its SQ slot): the slot the next send
  // WQE goes to, or nullptr when the ring is full (the caller then writes a WQE of its own
  // and enqueue_staged reports the ring full, so that the checks keep their order). Nothing
  // is posted until enqueue_staged; a slot left unposted is simply written again next time.
  SendWqe* send_slot() noexcept { return lc_.sq.stage_slot(); }
  // Posts the WQE the caller wrote and checked in `slot` (send_slot's result; enqueue_send is
  // a copy into it and this), failing on the state, then the room (a null slot: the ring was
  // full).
  Status enqueue_staged(SendWqe* slot) noexcept;
  // The public API's argument checks (validate_send), then enqueue_send: for what posts below
  // the API (the dataplane's stage tests, the fuzz harness).
  Status post_send(const SendWqe& wqe) noexcept;
  // The arguments' checks the public API makes before enqueue_send, in dataplane terms: a WQE
  // that passes fits its SQ slot and names no more than the QP allows.
  Status validate_send(const SendWqe& wqe) const noexcept;
  Status post_recv(const RecvWqe& wqe) noexcept;
  // Hands every deferred (staged, unpublished) send WQE to the engine: what a post that fails
  // before reaching post_send owes (ndkpi.md §7.3). Send poster only.
  void publish_deferred() noexcept {
    lc_.sq.publish();
    ring_doorbell();
  }
  // Whether the send queue takes requests: RTS, or SQD/ERR where they are flushed (IBTA
  // §10.3.1); not RESET, INIT or RTR.
  bool sq_open() const noexcept {
    const QpState st = public_state();
    return st != QpState::kReset && st != QpState::kInit && st != QpState::kRtr;
  }
  // State visible to posters (written by the engine / control after each transition).
  QpState public_state() const noexcept {
    return lc_.public_state_.load(std::memory_order_acquire);
  }

  // Read-only views of the engine-owned state, for the control side once a completion or a
  // modify synchronised it with the engine, and for tests that inspect a stage on purpose.
  QpState state() const noexcept { return lc_.state; }
  const QpAttr& attr() const noexcept { return lc_.attr; }
  const QpCounters& counters() const noexcept { return lc_.counters; }
  const QpLc::Requester& requester() const noexcept { return lc_.req; }
  const QpLc::Responder& responder() const noexcept { return lc_.resp; }
  const WqeRing<SendWqe>& send_ring() const noexcept { return lc_.sq; }
  const WqeRing<RecvWqe>& recv_ring() const noexcept { return lc_.rq; }

 private:
  // After a publish: tells the engine this QP has posted work, unless the doorbell is rung
  // already (the engine has not yet looked, or keeps the QP on its ready list). The exchange is
  // a full barrier between the publish and the read of the flag; the engine clears the flag and
  // then looks at the rings again, so one of the two sees the other (dataplane/sched.h).
  void ring_doorbell() noexcept {
    if (lc_.db_.rung.exchange(true, std::memory_order_seq_cst)) return;
    // Never full: the ring holds twice the engine's QPs and more, and a QP is queued at most
    // twice between two drains (Engine::phase_tx_build).
    if (lc_.db_.ring != nullptr) (void)lc_.db_.ring->push(lc_.db_.slot);
  }
  // The dataplane's stages (dataplane/ only; scripts/check-style.sh rejects lc() elsewhere).
  friend QpLc& lc(Qp& qp) noexcept;
  friend const QpLc& lc(const Qp& qp) noexcept;
  QpConfig cfg_;
  QpLc lc_;
};

// The QP's private state for the dataplane's stages (requester, completer, responder, the
// engine's demux and timers, the posting members): nothing outside dataplane/ calls these.
inline QpLc& lc(Qp& qp) noexcept { return qp.lc_; }
inline const QpLc& lc(const Qp& qp) noexcept { return qp.lc_; }

}  // namespace urnic::dp
