// urnic-perf against a real port: what the test flows of remote.cc and duplex.cc share.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "bench/perf/oob.h"
#include "bench/perf/session.h"

namespace urnic::perf {

// One connection's run state: the options, this side's QPs, the TCP exchange and the outcome.
struct RemoteRun {
  const Options& o;
  Test t;
  Role role;
  Driver& drv;
  Oob& oob;
  Side& side;
  bool urnic_peer = false;
  // Whether the peer keeps its TCP connection open until this side's run is over (not an
  // ib_write_lat): a closed connection mid-run means the peer is gone.
  bool peer_waits = true;
  Outcome out;
  uint64_t completions = 0;
  bool interrupted = false;  // SIGINT / SIGTERM ended a --run_infinitely run that cannot end itself

  struct Spec {
    // In a duration run, the runner that only answers: stopped when the peer's next TCP message
    // (a record, or the connection closing) shows up.
    Runner* waiter = nullptr;
    // -c UD: the waiter (a receiver) also stops at the peer's next TCP message when it counts
    // iterations: a datagram lost on the way would leave it waiting for ever.
    bool waiter_stops_on_peer = false;
    // --run_infinitely: the senders' end (RunConfig::stop), raised by SIGINT / SIGTERM, and with
    // `peer_ends` by the peer's record (a bidirectional peer that was interrupted first).
    std::atomic<bool>* end = nullptr;
    bool peer_ends = false;
    IntervalPrinter* ticker = nullptr;  // --run_infinitely's rows, counting rs.front()'s messages
    std::function<void()> on_step;      // runs after every step (its own conditions)
  };
  // Steps `rs` until all are done; false (with `out` failed, unless `interrupted`) otherwise.
  bool run(const std::vector<Runner*>& rs, uint64_t size, const Spec& spec);
};

// --run_infinitely for one size of a remote run: the end flag a sender stops on (SIGINT /
// SIGTERM) and the printer of the interval rows, wired into the run's RunConfig and Spec; nothing
// without the option. `sender`: this side's runner stops on the flag (a send_bw receiver does
// not: the client's record ends it).
struct EndlessRun {
  std::atomic<bool> end{false};
  std::optional<IntervalPrinter> ticker;
  EndlessRun(const Options& o, uint64_t size, double factor, bool sender, RunConfig* rc,
             RemoteRun::Spec* spec) {
    if (!o.run_infinitely) return;
    if (sender) rc->stop = spec->end = &end;
    spec->ticker = &ticker.emplace(o, size, factor);
  }
};

// -b: both sides run the requester (perftest's duplex choreography of write_bw, read_bw,
// atomic_bw and send_bw; see duplex.cc). Returns the exchange step that failed, or null (then
// rr.out says whether the run passed).
const char* run_duplex(RemoteRun& rr, const std::vector<uint64_t>& sizes);

}  // namespace urnic::perf
