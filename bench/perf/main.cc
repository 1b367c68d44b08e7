// urnic-perf: perftest for urnic (issue 6).
//
// Loopback (no SERVER, --vdev or --port): two adapters in this process over a net_ring pair,
// one engine on lcore 1 (or driven by this thread when EAL has one lcore); the client's side of
// each run is printed the way perftest's client prints it.
//
// Real port: a perftest server (no SERVER argument) or client, speaking perftest 4.5's TCP
// exchange. The choreography of each tool, as captured between two Linux rxe guests running
// perftest 4.5 (see /work/shared/captures and docs/performance.md), with N QPs:
//   write_bw read_bw atomic_bw  N records, (RTR/RTS), N records, 1 record; the client runs;
//                               1 record, the client's report (5 x 8 bytes), close
//   send_bw                     N records, (RTR/RTS), 1 record, N records; per size: the server
//                               posts receives, 1 record, both run, and with -a 1 more record;
//                               close
//   send_lat                    as send_bw (one QP; no record after a size)
//   write_lat                   1 + 1 records, (RTR/RTS), 1 + 1 records; both run; TCP closed
//                               without a close exchange
//   read_lat atomic_lat         as write_lat; the server closes at once (its close record waits
//                               for the client's), the client runs and then closes
// where "close" is one more record each way and "done" each way (ctx_close_connection).
#include <arpa/inet.h>
#include <rte_cycles.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/perf/output.h"
#include "bench/perf/perf.h"
#include "bench/perf/report.h"
#include "bench/perf/runners.h"
#include "bench/perf/session.h"
#include "bench/perf/side.h"
#include "bench/perf/storm.h"

namespace urnic::perf {
namespace {

// ---- Loopback -------------------------------------------------------------------------------

// The runners of one loopback size. A is the client. Bandwidth: A sends to B (which receives,
// for SENDs); with -b B sends to A as well (peer_tx, and client_rx for SENDs). Latency: A and,
// for WRITE / SEND, B answering.
struct LoopRunners {
  std::unique_ptr<Runner> client, server, peer_tx, client_rx;

  std::vector<Runner*> all() const {
    std::vector<Runner*> v;
    for (Runner* r : {client.get(), server.get(), peer_tx.get(), client_rx.get()})
      if (r != nullptr) v.push_back(r);
    return v;
  }
};

LoopRunners make_loop_runners(Side& a, Side& b, const Options& o, Test t, const RunConfig& cc) {
  RunConfig sc = cc;
  sc.role = Role::kServer;
  LoopRunners l;
  if (t.kind == Kind::kBw) {
    l.client = make_bw_sender(a, cc);
    if (t.verb == Verb::kSend) l.server = make_bw_receiver(b, sc);
    if (o.bidirectional) {
      l.peer_tx = make_bw_sender(b, sc);
      if (t.verb == Verb::kSend) l.client_rx = make_bw_receiver(a, cc);
    }
  } else {
    l.client = make_lat(a, cc);
    if (t.verb == Verb::kWrite || t.verb == Verb::kSend) l.server = make_lat(b, sc);
  }
  return l;
}

// One pair of a loopback run in which one side may wait for the other without knowing when it is
// done (a receiver, or the answering side of a ping-pong): once one of the two is done the other
// learns it the way a remote one would (its next TCP message); here it is told directly, with
// the total it must have received.
void stop_partner(Runner* x, Runner* y, bool* stopped) {
  if (x == nullptr || y == nullptr || *stopped || !(x->done() || y->done())) return;
  Runner* waiting = x->done() ? y : x;
  waiting->stop(x->done() ? x->messages : y->messages);
  *stopped = true;
}

// Runs one size; false (with `out` failed) when the run did not finish.
bool run_loopback_size(Env& env, const Options& o, Test t, uint64_t size, Side& a, Side& b,
                       Outcome* out, uint64_t* completions) {
  const RunConfig cc = run_config(o, t, Role::kClient, size, true);
  const LoopRunners l = make_loop_runners(a, b, o, t, cc);
  const std::vector<Runner*> rs = l.all();
  bool stopped[2] = {false, false};
  std::optional<IntervalPrinter> ticker;
  if (o.run_infinitely) ticker.emplace(o, size, 1.0);
  // Both directions count in a -b run's interval rows.
  auto sent = [&] { return l.client->messages + (l.peer_tx ? l.peer_tx->messages : 0); };
  const CpuStat cpu0 = o.cpu_util ? read_cpu_stat() : CpuStat{};
  const bool ok = run_all(env.driver(), rs, o, t.kind, size, [&] {
    stop_partner(l.client.get(), l.server.get(), &stopped[0]);
    stop_partner(l.peer_tx.get(), l.client_rx.get(), &stopped[1]);
    if (ticker) ticker->tick(rte_rdtsc(), sent());
  });
  const double cpu = o.cpu_util ? cpu_util(cpu0, read_cpu_stat()) : -1;
  if (!ok) {
    for (Runner* r : rs)
      if (r->failed()) out->fail(r->error());
    if (out->ok) out->fail("the run did not finish");
    // An open-loop run that failed still reports what it measured, errors included.
    if (t.kind == Kind::kBw) report_open_loop(o, t, size, *l.client, out);
    return false;
  }
  for (Runner* r : rs) *completions += r->messages;
  if (ticker) {
    ticker->finish(rte_rdtsc(), sent());
  } else if (t.kind == Kind::kBw) {
    const BwReport mine = bw_of(o, size, *l.client);
    if (l.peer_tx) {
      const BwReport theirs = bw_of(o, size, *l.peer_tx);
      print_bw_row(bw_sum(mine, theirs), cpu);
      record_bw_row(o, t, bw_sum(mine, theirs));
      if (o.report_both) print_report_both(mine, theirs, o.gbits, cpu);
    } else {
      print_bw_row(mine, cpu);
      record_bw_row(o, t, mine);
    }
    report_open_loop(o, t, size, *l.client, out);
  } else {
    print_lat_result(o, t, size, *l.client, cpu);
  }
  for (Runner* r : rs) out->data(r->check_data());
  if (t.kind == Kind::kBw && (t.verb == Verb::kWrite || t.verb == Verb::kAtomic)) {
    const uint64_t per_qp = o.duration > 0 ? 0 : cc.iters;
    out->data(check_passive_target(b, cc, per_qp, l.client->messages));
    if (l.peer_tx) out->data(check_passive_target(a, cc, per_qp, l.peer_tx->messages));
  }
  return true;
}

bool run_loopback_test(Env& env, const Options& o, Test t, std::vector<uint64_t> sizes) {
  Outcome out;
  std::string err;
  Geometry geo;
  // UD: each receive also holds the GRH.
  geo.max_size = *std::max_element(sizes.begin(), sizes.end()) + (o.ud ? kGrhLength : 0);
  const uint32_t nqps = t.kind == Kind::kLat ? 1 : o.qps;
  const uint32_t tx = o.effective_tx_depth();
  const uint32_t rx = t.verb == Verb::kSend ? o.effective_rx_depth() : 16;
  const bool ipv6 = o.gid_index != 1;
  const int gid_index = ipv6 ? 2 : 1;
  const Gid gid_a = pick_gid(env.a(), gid_index, &err);
  const Gid gid_b = pick_gid(env.b(), gid_index, &err);
  const auto mac_a = env.a().query_extension<AdapterExtension>()->local_address().mac;
  const auto mac_b = env.b().query_extension<AdapterExtension>()->local_address().mac;
  const AddressVector to_b = address_to(gid_b, gid_index, &mac_b);
  const AddressVector to_a = address_to(gid_a, gid_index, &mac_a);
  std::unique_ptr<Side> a, b;
  // (Re)creates both sides and connects them back to back.
  auto setup = [&]() {
    b.reset();  // the old sides go first: their QPs hold QPNs and engine slots
    a.reset();
    a = std::make_unique<Side>(env.a(), env.driver(), side_options(o));
    b = std::make_unique<Side>(env.b(), env.driver(), side_options(o));
    if (!a->create(t, nqps, std::max(tx, 16u), rx, geo, gid_a, &err) ||
        !b->create(t, nqps, std::max(tx, 16u), rx, geo, gid_b, &err))
      return false;
    for (uint32_t i = 0; i < nqps; ++i) {
      if (!a->connect(i, b->qp(i).local, env.mtu(), to_b, &err) ||
          !b->connect(i, a->qp(i).local, env.mtu(), to_a, &err))
        return false;
    }
    return true;
  };
  if (!setup()) {
    std::fprintf(stderr, " urnic-perf: %s\n", err.c_str());
    return false;
  }
  // UD: at most the largest datagram of the in-memory port (its path MTU).
  if (o.ud) sizes = o.sizes_for(a->qp(0).ext->max_datagram_size());
  const RunConfig base = run_config(o, t, Role::kClient, sizes.front(), true);
  TestInfo info;
  info.test = t;
  info.device = env.device();
  info.exchange = o.daemon.empty() ? "loopback (net_ring, one process)"
                                   : "loopback (urnicd's in-memory pair, attach mode)";
  info.qps = nqps;
  info.mtu = env.mtu();
  info.ud = o.ud;
  info.tx_depth = base.tx_depth;
  info.rx_depth = base.rx_depth;
  info.cq_mod = base.cq_mod;
  info.out_reads = a->qp(0).local.out_reads;
  info.gid_index = ipv6 ? 2 : 1;
  print_test_info(info);
  for (uint32_t i = 0; i < nqps; ++i) print_dest("local", t, a->qp(i).local);
  for (uint32_t i = 0; i < nqps; ++i) print_dest("remote", t, b->qp(i).local);
  if (t.kind == Kind::kBw)
    print_bw_header(o.gbits, o.cpu_util);
  else
    print_lat_header(o.duration > 0, o.cpu_util);

  uint64_t completions = 0;
  for (uint64_t size : sizes) {
    // A SEND duration run leaves receives posted that the next size must not consume: give it
    // fresh QPs.
    if (size != sizes.front() && t.verb == Verb::kSend && o.duration > 0 && !setup()) {
      out.fail(err);
      break;
    }
    if (!run_loopback_size(env, o, t, size, *a, *b, &out, &completions) || !out.ok) break;
  }
  const Totals totals = totals_of({&env.a(), &env.b()});
  if (totals.qps.completions_error != 0) out.fail("the QPs counted completions with errors");
  print_summary(out, completions, totals, o.verbose || !out.ok, env.driver().events());
  return out.ok;
}

}  // namespace

int run_loopback(const Options& o) {
  Env env;
  if (!(o.daemon.empty() ? env.open_loopback(o) : env.open_attached(o))) {
    std::fprintf(stderr, "urnic-perf: %s\n", env.error_text().c_str());
    return 1;
  }
  if (!o.daemon.empty()) {
    std::printf(" urnic-perf loopback: through urnicd (attach mode)\n");
  } else if (o.engines == 1) {
    std::printf(" urnic-perf loopback: engine %s\n",
                env.engine_on_lcore() ? "on its own lcore" : "driven by this thread");
  } else {
    std::printf(
        " urnic-perf loopback: %u engines, %u on lcores of their own, %u driven by this "
        "thread\n",
        o.engines, env.engines_launched(), o.engines - env.engines_launched());
  }
  if (!o.sweep) return run_loopback_test(env, o, o.test, o.sizes_for(env.mtu())) ? 0 : 1;

  // The sweep: every test over a few sizes, short runs (the README's main command).
  struct Row {
    Test test;
    std::vector<uint64_t> sizes;
  };
  const std::vector<uint64_t> bw_sizes{64, 4096, 65536};
  const std::vector<Row> rows{
      {{Verb::kWrite, Kind::kBw}, bw_sizes},   {{Verb::kRead, Kind::kBw}, bw_sizes},
      {{Verb::kSend, Kind::kBw}, bw_sizes},    {{Verb::kAtomic, Kind::kBw}, {8}},
      {{Verb::kWrite, Kind::kLat}, {8, 4096}}, {{Verb::kRead, Kind::kLat}, {8, 4096}},
      {{Verb::kSend, Kind::kLat}, {8, 4096}},  {{Verb::kAtomic, Kind::kLat}, {8}},
  };
  int failures = 0;
  std::vector<std::string> summary;
  for (const Row& r : rows) {
    Options ro = o;
    ro.test = r.test;
    ro.all_sizes = false;
    if (r.test.kind == Kind::kBw) {
      if (ro.duration == 0) ro.duration = 1.0;
      ro.iters = 0;
    } else {
      ro.duration = 0;
      if (ro.iters == 0) ro.iters = 10000;
    }
    const bool ok = run_loopback_test(env, ro, r.test, r.sizes);
    summary.push_back(std::string(ok ? "PASS " : "FAIL ") + test_name(r.test));
    if (!ok) ++failures;
    std::printf("\n");
  }
  std::printf("urnic-perf sweep (loopback): ");
  for (const auto& s : summary) std::printf("%s%s", s.c_str(), &s == &summary.back() ? "\n" : ", ");
  std::printf("%zu passed, %d failed\n", summary.size() - failures, failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace urnic::perf

int main(int argc, char** argv) {
  using namespace urnic::perf;
  std::signal(SIGPIPE, SIG_IGN);
  Options o;
  bool exit_ok = false;
  if (!parse_options(argc, argv, &o, &exit_ok)) return exit_ok ? 0 : 2;
  if (o.all_sizes && o.duration > 0 && o.test.verb == Verb::kSend) {
    std::fprintf(stderr, "urnic-perf: -a with -D is not supported for send tests\n");
    return 2;
  }
  if (o.run_infinitely) install_stop_handlers();
  int rc = o.storm != 0 ? run_storm(o) : o.loopback() ? run_loopback(o) : run_remote(o);
  // Open-loop and storm runs wrote theirs; a closed-loop run's rows, off every measured path.
  if (!o.json.empty() && o.rate == 0 && o.storm == 0) {
    std::string err;
    if (!write_closed_loop_json(o, rc, &err)) {
      std::fprintf(stderr, "urnic-perf: --json: %s\n", err.c_str());
      if (rc == kExitOk) rc = kExitRunFailed;
    }
  }
  if (!o.report.empty()) {
    // After the run, off every measured path: the page, and gnuplot drawing its plots.
    std::string err, note;
    if (!write_perf_report(o, argc, argv, rc, &err, &note)) {
      std::fprintf(stderr, "urnic-perf: --report: %s\n", err.c_str());
      if (rc == kExitOk) rc = kExitRunFailed;
    } else if (!note.empty()) {
      std::fprintf(stderr, "urnic-perf: warning: %s: plots not drawn: %s\n", o.report.c_str(),
                   note.c_str());
    }
  }
  return rc;
}
