// The traffic loops of urnic-perf, as non-blocking state machines: step() does what can be done
// without waiting and returns true when the run is over, so that one thread can drive both
// sides of a loopback pair (and the engine, when it has no lcore of its own).
//
// They follow perftest's run_iter_* functions (src/perftest_resources.c):
//   BwSender      run_iter_bw: keep up to tx_depth requests outstanding per QP, signal one in
//                 cq_mod, cycle the addresses of small messages through the cycle buffer;
//   BwReceiver    run_iter_bw_server (send_bw server): keep rx_depth receives posted;
//   LatWrite      run_iter_lat_write: ping-pong of RDMA WRITEs, each side polling the last byte
//                 of its own buffer for the peer's message counter;
//   LatSend       run_iter_lat_send: ping-pong of SENDs;
//   LatRequest    run_iter_lat (read_lat, atomic_lat): one READ / FETCH_ADD at a time.
// Every completion is counted and must be successful; each run's last message carries data that
// an urnic-perf receiver checks (see perf.h: last_seed()).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench/perf/openloop.h"
#include "bench/perf/perf.h"
#include "bench/perf/side.h"

namespace urnic::perf {

struct RunConfig {
  Test test;
  Role role = Role::kClient;  // the client sends first
  uint64_t size = 0;
  uint64_t iters = 0;   // per QP; ignored in duration mode
  double duration = 0;  // seconds; 0: iteration mode
  uint32_t tx_depth = kDefaultTxBw;
  uint32_t rx_depth = kDefaultRxSend;
  uint32_t cq_mod = kDefaultCqMod;
  uint32_t post_list = 0;    // -l: requests per doorbell (0: the sender's own batching)
  uint32_t inline_size = 0;  // -I: WRITEs / SENDs up to this size are posted inline
  // -c UD: the bytes a receive holds before the message (the GRH, urnic/datagram.h).
  uint32_t recv_extra = 0;
  bool peer_urnic = false;  // the peer fills its data like we do: verify it
  bool events = false;      // -e: an empty poll arms the CQ (events.h)
  // --run_infinitely: a duration run whose end is this flag (set by SIGINT / SIGTERM), not the
  // clock; null otherwise.
  const std::atomic<bool>* stop = nullptr;
  // --rate: the bandwidth sender offers load open loop (openloop.h), signalling every request;
  // always in iteration mode (a duration becomes rate x duration requests).
  OpenLoopConfig open_loop;
};

// What a data check found.
struct DataCheck {
  bool checked = false;
  bool ok = true;
  std::string note;
  void fail(const std::string& why) {
    checked = true;
    ok = false;
    if (note.empty()) note = why;
  }
  void pass(const std::string& what) {
    checked = true;
    if (ok && note.empty()) note = what;
  }
};

class Runner {
 public:
  explicit Runner(Side& side, const RunConfig& cfg) : side_(side), cfg_(cfg) {}
  virtual ~Runner() = default;
  // Does what can be done now; true when the run is over (check failed()).
  virtual bool step() noexcept = 0;
  // The peer is done (loopback partner finished, or the peer's next TCP message arrived): stop
  // waiting for more. `expected`: messages the peer sent per QP when known (else 0).
  virtual void stop(uint64_t expected) noexcept { (void)expected; }
  // Messages completed so far (the progress line and the stall watchdog).
  virtual uint64_t progress() const noexcept = 0;
  // Checks the data of the last message (after the run); receivers and READ/ATOMIC clients.
  virtual DataCheck check_data() { return {}; }
  // The open-loop schedule and latencies (a bandwidth sender with --rate), else null.
  virtual const OpenLoop* open_loop() const noexcept { return nullptr; }

  // Ends the run as failed with `why` (the peer went away, say).
  void abort(const std::string& why) noexcept { fail(why); }

  bool done() const noexcept { return done_; }
  // -e: the last step found every CQ it polled empty and armed them: the caller may sleep until
  // a notification (run_all()).
  bool waiting() const noexcept { return armed_ && !got_ && !done_; }
  bool failed() const noexcept { return !error_.empty(); }
  const std::string& error() const noexcept { return error_; }

  // Results.
  uint64_t tsc_start = 0, tsc_end = 0;
  uint64_t messages = 0;                                        // completed, all QPs
  std::vector<std::pair<uint64_t, uint64_t>> events;            // (tsc, messages) per CQ poll
  std::vector<uint64_t> tposted;                                // latency tests: post times
  uint64_t iterations() const noexcept { return iterations_; }  // per QP (latency: exchanges)

 protected:
  void fail(const std::string& e) noexcept;
  bool check_completion(const ResultEx& r) noexcept;
  // Appends a (tsc, messages) point for the peak computation, merging points closer than
  // kEventSpacingUs so that long runs keep a bounded, allocation-free history.
  void record_event(uint64_t now) noexcept;
  // Polls `cq`; with -e an empty poll arms it (CqNotify::kAny) for run_all()'s sleep. Every
  // step() starts with begin_step().
  size_t poll_cq(Cq& cq, std::span<ResultEx> r) noexcept;
  // Every CQ of the side in turn (one per engine) into `r`; take_cqs without arming.
  size_t poll_cqs(std::span<Handle<Cq>> cqs, std::span<ResultEx> r) noexcept;
  static size_t take_cqs(std::span<Handle<Cq>> cqs, std::span<ResultEx> r) noexcept;
  void begin_step() noexcept { armed_ = got_ = false; }

  Side& side_;
  RunConfig cfg_;
  std::string error_;
  uint64_t iterations_ = 0;
  uint64_t end_tsc_ = 0;  // duration mode: when to stop
  uint64_t event_spacing_ = 0;
  bool done_ = false;
  bool armed_ = false, got_ = false;  // this step: a CQ was armed / a poll found completions
  // Completion buffer, reused by every poll (a local array of ResultEx would be zeroed each
  // time: 3 KiB of memset per poll).
  std::array<ResultEx, 64> cqe_;
};

// Which side of a latency test sends the first message (and, in a duration run, decides the
// last one): the other side only answers.
bool initiator(Test t, Role r) noexcept;

std::unique_ptr<Runner> make_bw_sender(Side& side, const RunConfig& cfg);
// Shared by the runners: work-request contexts (QP index, a number), the request template of
// QP i, the last message's source or sink, seconds in TSC ticks.
void* encode(size_t qi, uint64_t v);
size_t ctx_qp(void* c);
uint64_t ctx_val(void* c);
uint64_t addr(const void* p);
Request request_template(Side& side, size_t i, const RunConfig& c);
void prepare_last(Side& side, const RunConfig& c);
uint64_t duration_tsc(double s);
std::unique_ptr<Runner> make_bw_receiver(Side& side, const RunConfig& cfg);
std::unique_ptr<Runner> make_lat(Side& side, const RunConfig& cfg);

// Receiver-side check of a passive WRITE / ATOMIC target after a bandwidth run: the slot the
// last WRITE of each QP landed in holds that message (`n_per_qp` 0: any slot), or the ATOMIC
// counters add up to `n_total`.
DataCheck check_passive_target(Side& side, const RunConfig& cfg, uint64_t n_per_qp,
                               uint64_t n_total);

}  // namespace urnic::perf
