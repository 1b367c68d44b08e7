// urnic-perf -b over a real port: perftest 4.5's duplex choreography (write_bw.c, read_bw.c,
// atomic_bw.c and send_bw.c with user_param.duplex on). Both sides are requesters, so both
// print the row, which is the sum of both sides' reports (print_full_bw_report(my, rem)).
#include <rte_cycles.h>

#include <optional>

#include "bench/perf/remote.h"
#include "bench/perf/report.h"

namespace urnic::perf {
namespace {

// --run_infinitely's rows count this side's messages twice (perftest's run_inf_bi_factor: the
// peer is assumed to send as much).
constexpr double kBiFactor = 2.0;

// write_bw, read_bw, atomic_bw: per size a sync record, both sides run the requester (the
// responder runs on the engine), with -a a second sync (perftest >= 4.6), then the reports are
// exchanged; after the sizes, the close exchange.
const char* duplex_rdma(RemoteRun& rr, const std::vector<uint64_t>& sizes) {
  const Options& o = rr.o;
  const Dest& me = rr.side.qp(0).local;
  const uint64_t nqps = rr.side.qps().size();
  for (uint64_t size : sizes) {
    if (!rr.oob.hand_shake(me, nullptr)) return "sync";
    RunConfig rc = run_config(o, rr.t, rr.role, size, rr.urnic_peer);
    RemoteRun::Spec spec;
    EndlessRun endless(o, size, kBiFactor, true, &rc, &spec);
    spec.peer_ends = o.run_infinitely;
    auto& ticker = endless.ticker;
    auto r = make_bw_sender(rr.side, rc);
    const CpuStat cpu0 = o.cpu_util ? read_cpu_stat() : CpuStat{};
    if (!rr.run({r.get()}, size, spec)) return nullptr;
    const double cpu = o.cpu_util ? cpu_util(cpu0, read_cpu_stat()) : -1;
    if (ticker) ticker->finish(rte_rdtsc(), r->messages);
    // Whichever side ends an endless run first tells the other, which stops on it.
    if ((o.all_sizes || o.run_infinitely) && !rr.oob.sync_write_first(me)) return "sync";
    const BwReport mine = bw_of(o, size, *r);
    BwReport theirs;
    if (!rr.oob.xchg_reports(mine, &theirs)) return "reports";
    if (!ticker) {
      print_bw_row(bw_sum(mine, theirs), cpu);
      record_bw_row(o, rr.t, bw_sum(mine, theirs));
      if (o.report_both) print_report_both(mine, theirs, o.gbits, cpu);
    }
    rr.out.data(r->check_data());
    if (rr.t.verb != Verb::kRead && theirs.size == size && nqps != 0) {
      const uint64_t per_qp = o.duration > 0 ? 0 : theirs.iters / nqps;
      rr.out.data(check_passive_target(rr.side, rc, per_qp, theirs.iters));
    }
    if (!rr.out.ok) return nullptr;
  }
  return rr.oob.close_connection(me) ? nullptr : "close";
}

// send_bw: per size both sides post their receives, a sync record, both run a sender and a
// receiver, the reports are exchanged and summed (in a duration run, as in perftest, each side
// prints its own), and a sync record ends the size.
const char* duplex_send(RemoteRun& rr, const std::vector<uint64_t>& sizes) {
  const Options& o = rr.o;
  const Dest& me = rr.side.qp(0).local;
  for (uint64_t size : sizes) {
    const RunConfig rc = run_config(o, rr.t, rr.role, size, rr.urnic_peer);
    auto rx = make_bw_receiver(rr.side, rc);  // posts its receives
    auto tx = make_bw_sender(rr.side, rc);
    if (!rr.oob.hand_shake(me, nullptr)) return "sync";
    RemoteRun::Spec spec;
    bool wrote = false, stopped = false;
    const char* failed_step = nullptr;
    if (o.duration > 0) {
      // The receiver cannot know how many messages the peer sends. Each side writes the closing
      // sync record as soon as its sender is done, and its receiver stops once the peer's
      // record has come: the peer's sender was done then, so all of its messages are in our CQ.
      // Until then the receiver keeps reposting, so the peer's tail never meets an empty queue.
      spec.on_step = [&] {
        if (!wrote && tx->done()) {
          wrote = true;
          if (!rr.oob.write_record(me)) {
            failed_step = "sync";
            tx->abort("the closing sync record could not be sent");
          }
        }
        if (wrote && !stopped && rr.oob.readable()) {
          rx->stop(0);
          stopped = true;
        }
      };
    }
    const CpuStat cpu0 = o.cpu_util ? read_cpu_stat() : CpuStat{};
    if (!rr.run({tx.get(), rx.get()}, size, spec)) return failed_step;
    const double cpu = o.cpu_util ? cpu_util(cpu0, read_cpu_stat()) : -1;
    const BwReport mine = bw_of(o, size, *tx);
    if (o.duration > 0) {
      print_bw_row(mine, cpu);
      record_bw_row(o, rr.t, mine);
      if (!rr.oob.read_record()) return "sync";
    } else {
      BwReport theirs;
      if (!rr.oob.xchg_reports(mine, &theirs)) return "reports";
      print_bw_row(bw_sum(mine, theirs), cpu);
      record_bw_row(o, rr.t, bw_sum(mine, theirs));
      if (o.report_both) print_report_both(mine, theirs, o.gbits, cpu);
      if (!rr.oob.hand_shake(me, nullptr)) return "sync";
    }
    rr.out.data(rx->check_data());
    if (!rr.out.ok) return nullptr;
  }
  return rr.oob.close_connection(me) ? nullptr : "close";
}

}  // namespace

const char* run_duplex(RemoteRun& rr, const std::vector<uint64_t>& sizes) {
  return rr.t.verb == Verb::kSend ? duplex_send(rr, sizes) : duplex_rdma(rr, sizes);
}

}  // namespace urnic::perf
