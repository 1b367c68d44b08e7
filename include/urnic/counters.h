// What an adapter counts (architecture.md §7): per QP, per port queue, and the fault injector's
// tally, as plain structs. These are the structs the dataplane itself increments (one
// definition: dp::QpCounters and dp::EngineCounters are these types), so a snapshot read through
// Adapter::query_counters or QpExtension::counters shows exactly what the engine counted.
//
// Reads are snapshots taken while the engine keeps counting: each field is read once, so a total
// may lag by the packets of one engine step.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "urnic/types.h"

namespace urnic {

// ---- Per QP -------------------------------------------------------------------------------------

struct QpCounters {
  uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0, rx_bytes = 0;
  uint64_t retransmits = 0;  // packets sent again: selective_retransmits + go-back-N ones
  uint64_t timeouts = 0;     // local ACK timer expiries
  uint64_t acks_sent = 0, acks_received = 0;
  uint64_t naks_sent[4] = {};  // by NAK code: seq err, invalid req, access, operational
  uint64_t naks_received[4] = {};
  uint64_t rnr_naks_sent = 0, rnr_naks_received = 0;
  uint64_t duplicate_requests = 0;  // requests with an old PSN (re-ACKed / replayed)
  uint64_t out_of_sequence = 0;     // requests with a future PSN (dropped)
  uint64_t implied_naks = 0;        // READ/ATOMIC responses found missing by a later ACK
  uint64_t dropped_bad_state = 0;   // packets arriving while the QP cannot take them
  uint64_t dropped_stale = 0;       // stale or duplicate responses ignored
  uint64_t completions_ok = 0, completions_error = 0, completions_flushed = 0;
  // Resource exhaustion (docs/design.md "Resource exhaustion"):
  uint64_t completions_dropped = 0;  // not written: the CQ had overrun (ndkpi.md §3.3)
  uint64_t cq_overrun_errors = 0;    // times this QP was moved to ERR by an overrun CQ
  uint64_t rnr_naks_coalesced = 0;   // requests answered by an RNR NAK already queued for them
  uint64_t resp_queue_full = 0;      // requests dropped: responder output queue full
  // Congestion control (urnic/congestion.h): received frames with CE in their ECN field, CNPs
  // sent for them (at most one per cnp_interval_us), CNPs received, and the rate cuts they made
  // (at most one per DCQCN monitor period).
  uint64_t ce_marked = 0, cnps_sent = 0, cnps_received = 0, cc_rate_decreases = 0;
  // The rate DCQCN paces this QP to now, in Mb/s; 0 while it runs unpaced at its maximum. (A
  // gauge, not a count: summed over QPs in an adapter's total.)
  uint64_t cc_paced_mbps = 0;
  // Selective repeat (QpAttributes::selective_repeat): packets resent one by one for a NAKed
  // hole (the rest of `retransmits` went out in go-back-N passes), request packets the responder
  // held because they arrived ahead of a hole, and those it could not hold (its reorder buffer
  // or the adapter's share of frames held was full: dropped, the requester resends them).
  uint64_t selective_retransmits = 0, ooo_held = 0, ooo_dropped = 0;
  // Probes (selective repeat, and AdapterConfig::adaptive_retransmit): the oldest unacknowledged
  // packet resent alone because nothing moved for a few round trips (a lost tail, NAK or resend;
  // counted in selective_retransmits too).
  uint64_t sr_probes = 0;
  // Datagram (UD) QPs: datagrams dropped because their Q_Key was not the QP's (IBTA §10.2.5
  // C10-15), and because no receive was posted when they arrived (IBTA §9.8.3.1: an unreliable
  // service drops what it cannot place, silently for the sender).
  uint64_t qkey_violations = 0, datagrams_no_receive = 0;
  // Datagrams longer than the QP's largest datagram (the port's path MTU; IBTA §9.6 packet
  // length, rocev2.md: one packet of at most the PMTU per UD message): dropped.
  uint64_t datagrams_too_long = 0;
  // Every completion (send and receive, silent ones included) by its verbs status.
  uint64_t completions_by_status[static_cast<size_t>(WcStatus::kGeneralErr) + 1] = {};

  // Adds `o` into this (aggregation over QPs for adapter / engine totals).
  void add(const QpCounters& o) noexcept;
  uint64_t naks_sent_total() const noexcept {
    return naks_sent[0] + naks_sent[1] + naks_sent[2] + naks_sent[3];
  }
  uint64_t naks_received_total() const noexcept {
    return naks_received[0] + naks_received[1] + naks_received[2] + naks_received[3];
  }
};

// ---- Per port queue (what one engine saw of one adapter)
// -----------------------------------------

// Why a received frame was dropped before any QP saw it.
enum class RxDrop : uint8_t {
  kMalformed,  // the parser rejected it (the reason is counted in parse_errors)
  kBadIcrc,
  kNoQp,         // DestQP names no QP of the adapter
  kBadAddress,   // IP addresses do not match the QP's address vector
  kUnsupported,  // UC, a UD datagram for an RC QP, and UD to QP1 without a control plane
  kNotRoce,      // not IP/UDP 4791 (ARP, other traffic) and no control ring to take it
  kHandoffFull,  // for a QP of another engine of the adapter, whose hand-off ring was full
  kCount,
};
const char* to_string(RxDrop r) noexcept;

// Why the parser rejected a frame (values of the wire layer's ParseError, kOk first).
inline constexpr size_t kParseErrorCount = 17;
const char* parse_error_name(size_t index) noexcept;

struct PortCounters {
  uint64_t steps = 0, busy_steps = 0;
  uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0;
  uint64_t rx_drops[static_cast<size_t>(RxDrop::kCount)] = {};
  uint64_t parse_errors[kParseErrorCount] = {};
  uint64_t mbuf_alloc_failures = 0;
  uint64_t tx_ring_full = 0;  // steps where the port took fewer frames than offered
  // net_af_packet: extra kicks of the TX ring after a kernel drop parked frames in it (idle steps
  // only; dataplane/tx_kick.h). 0 on every other driver.
  uint64_t tx_kicks = 0;
  // An adapter over several engines (Adapter::open with engines): frames this port queue
  // received for a QP of another engine and handed to it, and frames other engines' queues
  // received for this engine's QPs (dataplane/steering.h). 0 with one engine.
  uint64_t handoffs_out = 0, handoffs_in = 0;
  // Frames addressed to this adapter itself (a QP or address handle whose peer is one of its own
  // addresses): delivered inside the engine, as a NIC loops them back, never sent. Not counted
  // in tx_packets / rx_packets.
  uint64_t looped_back = 0;

  uint64_t rx_drops_total() const noexcept {
    uint64_t t = 0;
    for (uint64_t d : rx_drops) t += d;
    return t;
  }
  // Adds another queue's counters (an adapter over several engines sums its queues').
  void add(const PortCounters& o) noexcept {
    steps += o.steps;
    busy_steps += o.busy_steps;
    rx_packets += o.rx_packets;
    rx_bytes += o.rx_bytes;
    tx_packets += o.tx_packets;
    tx_bytes += o.tx_bytes;
    for (size_t i = 0; i < std::size(rx_drops); ++i) rx_drops[i] += o.rx_drops[i];
    for (size_t i = 0; i < kParseErrorCount; ++i) parse_errors[i] += o.parse_errors[i];
    mbuf_alloc_failures += o.mbuf_alloc_failures;
    tx_ring_full += o.tx_ring_full;
    tx_kicks += o.tx_kicks;
    handoffs_out += o.handoffs_out;
    handoffs_in += o.handoffs_in;
    looped_back += o.looped_back;
  }
};

// ---- Fault injection (testing builds)
// ------------------------------------------------------------

// What the fault injector at the adapter's port boundary does to each direction's RoCEv2 frames
// (architecture.md §7). Only in builds with URNIC_TESTING (the default); elsewhere an adapter
// opened with a non-empty FaultConfig fails with kNotSupported.
struct FaultConfig {
  // Probabilities in parts per million of each frame.
  uint32_t drop_ppm = 0;
  uint32_t duplicate_ppm = 0;
  uint32_t reorder_ppm = 0;
  uint32_t corrupt_ppm = 0;
  // ECN: mark this share of the ECN-capable (ECT) frames Congestion Experienced, as a congested
  // switch would (RFC 3168 §5: a Not-ECT frame is never marked), so that the receiving QP's
  // notification point answers with CNPs (IBTA Annex A17.9).
  uint32_t ce_ppm = 0;
  uint32_t reorder_depth = 3;  // a reordered frame is released after this many later frames
  // Delay: hold this share of the frames back for delay_us microseconds (1 .. 1 000 000), as a
  // congested queue or a slow path would, to exercise a peer's timers. Frames behind a delayed
  // one pass it (a delay reorders). At most FaultInjector::kMaxHeld (32) frames are held at
  // once, reordered and delayed together; a frame that finds no room passes undelayed.
  uint32_t delay_ppm = 0;
  uint32_t delay_us = 1000;
  uint64_t seed = 1;

  // Scripted faults: act on the `nth` (1-based) frame whose BTH opcode is `opcode` (any RoCEv2
  // frame when opcode is kAnyOpcode). Each rule fires once.
  enum class Action : uint8_t { kDrop, kDuplicate, kCorrupt, kDelay };
  struct Rule {
    uint16_t opcode = 0;
    uint32_t nth = 0;
    Action action = Action::kDrop;
  };
  static constexpr uint16_t kAnyOpcode = 0x100;
  static constexpr size_t kMaxRules = 16;
  std::array<Rule, kMaxRules> rules{};
  uint32_t nrules = 0;

  bool add_rule(uint16_t opcode, uint32_t nth, Action a) noexcept {
    if (nrules == kMaxRules) return false;
    rules[nrules++] = Rule{opcode, nth, a};
    return true;
  }
  // Whether this configuration injects anything at all.
  bool active() const noexcept {
    return drop_ppm != 0 || duplicate_ppm != 0 || reorder_ppm != 0 || corrupt_ppm != 0 ||
           ce_ppm != 0 || delay_ppm != 0 || nrules != 0;
  }
};

// Responder rules an adapter's QPs break on purpose (testing builds only; elsewhere open() fails
// with kNotSupported when any is set). A conformance tester must be shown to catch a peer that
// breaks a rule - a scenario that cannot fail proves nothing - and urnic-conform's tests break
// these in a urnic-perf server (--break-rule) and check that the matching scenario FAILs.
struct BrokenRules {
  bool duplicate_ack = false;  // duplicate SEND/WRITE requests are not ACKed (IBTA §9.7.5.1.1)
  bool psn_seq_nak = false;    // out-of-sequence requests dropped without a NAK (§9.7.5.1.1)
  bool rnr_timer = false;      // RNR NAKs carry timer code 0, not the QP's (§9.7.5.2.8)
  // The connection manager's (IBTA chapter 12), for urnic-conform's CM scenarios:
  bool cm_rep_resources = false;  // the REP grants one more read resource than the REQ asked
  bool cm_rej_reason = false;     // a REQ for an unserved port: REJ 28, not 8 (table 195)
  bool cm_rep_retry = false;      // the REP is never sent again without an RTU (§12.9.6)
  bool cm_dup_req = false;        // a duplicate REQ makes a second connection (§12.9.6)
  bool cm_mra = false;            // an MRA for our REP is ignored (§12.6.6)
  bool cm_drep = false;           // a DREQ of an established connection gets no DREP (§12.6.11)
  bool cm_drep_again = false;     // a DREQ in TimeWait gets no DREP (§12.9.7)
  bool cm_dreq_qpn = false;       // a DREQ naming another QP is taken (§12.6.10)
  bool cm_stale = false;          // a REQ from a QP still connected is accepted (§12.9.8.3.1)
  bool cm_max_retries = false;    // the REP is retried 15 times whatever the REQ says (§12.7.27)
  bool cm_rej = false;            // a REJ of our REP is ignored (§12.6.7)
  bool cm_dreq_rep_sent = false;  // a DREQ while our REP waits for its RTU is ignored (§12.9.6)
  bool cm_drep_unknown = false;   // a DREQ for no connection gets no DREP (§12.9.7)
  // Datagram QPs' (urnic-conform's UD scenarios):
  bool ud_src_qp = false;  // datagrams sent name the wrong source QP in their DETH (§9.8.3)
  bool ud_qkey = false;    // received datagrams' Q_Key is not checked (§10.2.5 C10-15)
  bool ud_icrc = false;    // received datagrams' ICRC is not checked (A17)
  bool ud_pmtu = false;    // datagrams longer than the PMTU are received (§9.6)
  bool ud_imm = false;     // datagrams with immediate data are dropped (§9.8.3)
  bool ud_empty = false;   // zero-length datagrams are dropped (§9.8.3)
  // Congestion control's (urnic-conform's congestion scenarios; rocev2.md §5):
  bool cc_cnp_dest_qp = false;    // a CNP names the QP that saw the CE mark, not its peer
  bool cc_cnp_unpaced = false;    // every CE-marked frame gets a CNP (no cnp_interval_us)
  bool cc_reduce_period = false;  // CNPs within 5 ms of a rate cut are ignored (not 4 us)
  bool cc_no_recovery = false;    // a cut rate never rises again (no timer, no byte counter)
  bool any() const noexcept {
    return duplicate_ack || psn_seq_nak || rnr_timer || cm_rep_resources || cm_rej_reason ||
           cm_rep_retry || cm_dup_req || cm_mra || cm_drep || cm_drep_again || cm_dreq_qpn ||
           cm_stale || cm_max_retries || cm_rej || cm_dreq_rep_sent || cm_drep_unknown ||
           ud_src_qp || ud_qkey || ud_icrc || ud_pmtu || ud_imm || ud_empty || cc_cnp_dest_qp ||
           cc_cnp_unpaced || cc_reduce_period || cc_no_recovery;
  }
};

// The rules of BrokenRules by name ("duplicate_ack", "cm_rej", "ud_qkey", ...), as
// urnic-perf --break-rule and URNIC_BREAK_RULES (urnic-run --break-rule) take them: a
// comma-separated list. kSuccess; kInvalidParameter for a name it does not know (in *unknown,
// may be null); kNotSupported in a build without test hooks (URNIC_TESTING off).
Status parse_broken_rules(std::string_view list, BrokenRules* out, std::string* unknown) noexcept;
// Every rule's name, comma-separated (for help texts).
const char* broken_rule_names() noexcept;

struct FaultCounters {
  uint64_t seen = 0, dropped = 0, duplicated = 0, reordered = 0, corrupted = 0, scripted = 0;
  uint64_t ce_marked = 0, delayed = 0;
  void add(const FaultCounters& o) noexcept {
    delayed += o.delayed;
    seen += o.seen;
    dropped += o.dropped;
    duplicated += o.duplicated;
    reordered += o.reordered;
    corrupted += o.corrupted;
    scripted += o.scripted;
    ce_marked += o.ce_marked;
  }
};

// ---- Per adapter --------------------------------------------------------------------------------

// The connection manager's (Connector / Listener: IB CM MADs over QP1), from the adapter's open:
// its CM answers on QP1 also when no connector or listener exists (a REQ for a service nobody
// listens on gets REJ 8, rej_sent).
struct CmCounters {
  uint64_t mads_in = 0, mads_out = 0;
  uint64_t duplicates = 0;   // REQ / REP / RTU / DREQ for a known connection in a later state
  uint64_t unmatched = 0;    // MADs for no known connection
  uint64_t retransmits = 0;  // REQ / REP / DREQ sent again on the response timeout
  uint64_t timeouts = 0;     // handshakes abandoned after the last retry
  uint64_t rej_sent = 0, rej_received = 0;
  uint64_t mra_sent = 0, mra_received = 0;
  uint64_t decode_errors = 0;  // malformed MADs, dropped
  uint64_t mads_dropped = 0;   // lost on purpose (AdapterConfig::Cm::drop_tx, testing builds)
};

struct AdapterCounters {
  QpCounters qps;  // the sum over the adapter's live QPs
  PortCounters
      port;  // the sum over its port queues, one per engine (Adapter::query_engine_counters)
  uint32_t engines = 1;
  FaultCounters tx_faults, rx_faults;
  CmCounters cm;
};

}  // namespace urnic
