// urnic-perf against a real port: a perftest server or client (see main.cc for the choreography
// of each test's TCP exchange).
#include <arpa/inet.h>
#include <rte_cycles.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/perf/oob.h"
#include "bench/perf/report.h"
#include "bench/perf/session.h"

namespace urnic::perf {
namespace {

// ---- Real port ----------------------------------------------------------------------------------

std::string gid_text(const Gid& g) {
  char b[INET6_ADDRSTRLEN] = {};
  if (gid_is_ipv4(g)) {
    in_addr a{};
    a.s_addr = htonl(gid_to_ipv4(g));
    ::inet_ntop(AF_INET, &a, b, sizeof(b));
  } else {
    ::inet_ntop(AF_INET6, g.data(), b, sizeof(b));
  }
  return b;
}

// The exit code of a failed exchange step: the end-of-test synchronisation ("close") timing out
// is told apart from the peer going silent earlier.
int oob_exit_code(const Oob& oob, const char* step) {
  switch (oob.failure()) {
    case OobFailure::kNoPeer:
      return kExitNoPeer;
    case OobFailure::kTimeout:
      return std::strcmp(step, "close") == 0 ? kExitSyncTimeout : kExitPeerSilent;
    case OobFailure::kPeerGone:
      return kExitPeerGone;
    default:
      return kExitRunFailed;
  }
}

}  // namespace

int run_remote(const Options& o) {
  Env env;
  if (!env.open_port(o)) {
    std::fprintf(stderr, "urnic-perf: %s\n", env.error_text().c_str());
    return 1;
  }
  const Test t = o.test;
  const Role role = o.role();
  Driver& drv = env.driver();
  Outcome out;
  Oob oob(role, drv.idle_fn(), o.timeout);
  // Frames arriving mean the peer is alive and running: a wait for its next TCP message (the
  // server's, while the client runs) lasts as long as they keep coming.
  oob.set_activity([&env] {
    AdapterCounters c;
    return env.a().query_counters(&c) == Status::kSuccess ? c.port.rx_packets : 0;
  });
  auto oob_fail = [&](const char* step) {
    std::fprintf(stderr, "urnic-perf: out-of-band exchange failed (%s): %s\n", step,
                 oob.error().c_str());
    return oob_exit_code(oob, step);
  };
  if (role == Role::kServer) {
    print_waiting();
    if (!oob.accept_one(o.tcp_port)) return oob_fail("accept");
  } else if (!oob.connect_to(o.server, o.tcp_port, o.connect_retry)) {
    return oob_fail("connect");
  }
  if (!oob.exchange_versions()) return oob_fail("versions");
  Geometry geo;
  if (!oob.check_sys_data(&geo.cycle, &geo.cache_line)) return oob_fail("system data");
  uint32_t mtu = o.mtu != 0 ? std::min(o.mtu, env.mtu()) : env.mtu();
  if (!oob.check_mtu(mtu, &mtu)) return oob_fail("MTU");
  const bool urnic_peer = oob.peer_is_urnic();

  const auto sizes = o.sizes();
  geo.max_size = *std::max_element(sizes.begin(), sizes.end());
  const uint32_t nqps = t.kind == Kind::kLat ? 1 : o.qps;
  const RunConfig base = run_config(o, t, role, sizes.front(), urnic_peer);
  std::string err;
  const auto gid = pick_gid(env.a(), o.gid_index, &err);
  if (!err.empty()) {
    std::fprintf(stderr, "urnic-perf: %s\n", err.c_str());
    return 1;
  }
  Side side(env.a(), drv, side_options(o));
  const uint32_t rq = t.verb == Verb::kSend ? base.rx_depth : 16;
  if (!side.create(t, nqps, std::max(base.tx_depth, 16u), rq, geo, gid, &err)) {
    std::fprintf(stderr, "urnic-perf: %s\n", err.c_str());
    return 1;
  }
  uint64_t completions = 0;
  // From here on a failure still prints the summary with every counter (retransmits, NAKs,
  // drops), whatever -v says: a failed run must be diagnosable from its output.
  auto failed = [&](int rc) {
    out.ok = false;
    print_summary(out, completions, totals_of({&env.a()}), true);
    return rc;
  };
  auto run_failed = [&] { return failed(out.code == kExitOk ? kExitRunFailed : out.code); };
  auto oob_failed = [&](const char* step) { return failed(oob_fail(step)); };
  TestInfo info;
  info.test = t;
  info.role = role;
  info.device = env.device();
  info.qps = nqps;
  info.mtu = mtu;
  info.tx_depth = base.tx_depth;
  info.rx_depth = base.rx_depth;
  info.cq_mod = base.cq_mod;
  info.out_reads = side.qp(0).local.out_reads;
  info.gid_index = o.gid_index;
  print_test_info(info);
  for (uint32_t i = 0; i < nqps; ++i) print_dest("local", t, side.qp(i).local);

  // The connection records, in the order the perftest tool sends them (see the file comment).
  std::vector<uint32_t> seq;
  const bool lat_rw = t.kind == Kind::kLat && t.verb != Verb::kSend;
  if (lat_rw) seq.push_back(0);
  for (uint32_t i = 0; i < nqps; ++i) seq.push_back(i);
  const size_t connect_after = seq.size();
  if (t.verb == Verb::kSend) {
    seq.push_back(0);
    for (uint32_t i = 0; i < nqps; ++i) seq.push_back(i);
  } else {
    for (uint32_t i = 0; i < nqps; ++i) seq.push_back(i);
    seq.push_back(0);
  }
  std::vector<Dest> remote(nqps);
  for (size_t k = 0; k < seq.size(); ++k) {
    Dest d;
    if (!oob.hand_shake(side.qp(seq[k]).local, &d)) return oob_failed("connection records");
    if (k < connect_after) remote[seq[k]] = d;
    if (k + 1 != connect_after) continue;
    // Every peer QP is known: resolve the peer and bring the QPs up before the next record
    // (the peer starts sending after the last one).
    const Gid peer_gid = remote[0].gid;
    if (gid_is_ipv4(peer_gid) != gid_is_ipv4(gid)) {
      std::fprintf(stderr, "urnic-perf: the peer's GID %s and ours (%s) differ in IP version\n",
                   gid_text(peer_gid).c_str(), gid_text(gid).c_str());
      return failed(1);
    }
    // The adapter resolves the peer's MAC (ARP / neighbour discovery) in the RTR transition.
    const AddressVector av = address_to(peer_gid, o.gid_index);
    for (uint32_t i = 0; i < nqps; ++i) {
      if (!side.connect(i, remote[i], mtu, av, &err)) {
        std::fprintf(stderr, "urnic-perf: %s\n", err.c_str());
        return failed(kExitConnectFailed);
      }
    }
  }
  for (uint32_t i = 0; i < nqps; ++i) print_dest("remote", t, remote[i]);
  if (t.kind == Kind::kBw)
    print_bw_header(o.gbits);
  else if (!(lat_rw && role == Role::kServer && t.verb != Verb::kWrite))
    print_lat_header(o.duration > 0);

  const Dest& me = side.qp(0).local;
  // Whether this side only answers (receives SENDs, or replies in a latency ping-pong): in a
  // duration run it stops when the other side's next TCP message (a record, or the connection
  // closing) shows up.
  const bool answers = t.kind == Kind::kBw ? role == Role::kServer : !initiator(t, role);
  // Whether the peer keeps its TCP connection open until this side's run is over: not an
  // ib_write_lat, which closes it as soon as its own run ends.
  const bool peer_waits = !(t.verb == Verb::kWrite && t.kind == Kind::kLat && !urnic_peer);
  auto run_one = [&](Runner& r, uint64_t size, bool server_waits) {
    std::vector<Runner*> rs{&r};
    bool stopped = false, gone = false, stalled = false;
    // The socket is looked at once a millisecond, not on every step: a syscall per step would
    // cost the run more than the work it measures.
    const uint64_t look_every = rte_get_tsc_hz() / 1000;
    uint64_t next_look = 0;
    const bool ok = run_all(
        drv, rs, o, t.kind, size,
        [&] {
          if (stopped || gone) return;
          const uint64_t now = rte_rdtsc();
          if (now < next_look) return;
          next_look = now + look_every;
          if (peer_waits && oob.peer_closed()) {
            // The peer is gone (exited or killed): waiting for its messages is pointless.
            gone = true;
            r.abort("the peer closed its TCP connection during the run (it exited or was killed)");
          } else if (server_waits && o.duration > 0 && oob.readable()) {
            r.stop(0);
            stopped = true;
          }
        },
        &stalled);
    if (!ok)
      out.fail(r.failed() ? r.error() : "the run did not finish", gone      ? kExitPeerGone
                                                                  : stalled ? kExitStalled
                                                                            : kExitRunFailed);
    completions += r.messages;
    return ok;
  };

  if (t.kind == Kind::kBw && t.verb != Verb::kSend) {
    BwReport mine, theirs;
    if (role == Role::kClient) {
      for (uint64_t size : sizes) {
        auto r = make_bw_sender(side, run_config(o, t, role, size, urnic_peer));
        if (!run_one(*r, size, false)) break;
        mine = bw_of(o, size, *r);
        print_bw_row(mine);
        record_bw_row(o, t, mine);
        report_open_loop(o, t, size, *r, &out);
        out.data(r->check_data());
      }
      if (!out.ok) return run_failed();
      if (!oob.hand_shake(me, nullptr) || !oob.xchg_reports(mine, &theirs))
        return oob_failed("reports");
    } else {
      // The client runs; this side only serves (the responder runs on the engine).
      if (!oob.hand_shake(me, nullptr) || !oob.xchg_reports(mine, &theirs))
        return oob_failed("reports");
      print_bw_row(theirs);
      record_bw_row(o, t, theirs);
      if (theirs.size <= geo.max_size && theirs.size != 0) {
        const RunConfig rc = run_config(o, t, role, theirs.size, urnic_peer);
        const uint64_t per_qp = o.duration > 0 || nqps == 0 ? 0 : theirs.iters / nqps;
        out.data(check_passive_target(side, rc, per_qp, theirs.iters));
      }
    }
    if (!oob.close_connection(me)) return oob_failed("close");
  } else if (t.verb == Verb::kSend) {
    for (uint64_t size : sizes) {
      const RunConfig rc = run_config(o, t, role, size, urnic_peer);
      std::unique_ptr<Runner> r;
      if (t.kind == Kind::kBw)
        r = role == Role::kClient ? make_bw_sender(side, rc) : make_bw_receiver(side, rc);
      else
        r = make_lat(side, rc);  // posts its receives
      // Receives are posted: the sync record lets the client start.
      if (!oob.hand_shake(me, nullptr)) return oob_failed("sync");
      if (!run_one(*r, size, answers)) break;
      if (t.kind == Kind::kBw) {
        const BwReport row = bw_of(o, size, *r);
        print_bw_row(row);
        record_bw_row(o, t, row);
        report_open_loop(o, t, size, *r, &out);
      } else {
        print_lat_result(o, t, size, *r);
      }
      out.data(r->check_data());
      if (t.kind == Kind::kBw && o.all_sizes && !oob.hand_shake(me, nullptr))
        return oob_failed("sync");
    }
    if (!out.ok) return run_failed();
    if (!oob.close_connection(me)) return oob_failed("close");
  } else if (t.verb == Verb::kWrite) {  // write_lat
    for (uint64_t size : sizes) {
      auto r = make_lat(side, run_config(o, t, role, size, urnic_peer));
      if (!run_one(*r, size, answers)) break;
      print_lat_result(o, t, size, *r);
      out.data(r->check_data());
    }
    if (!out.ok) return run_failed();
    // ib_write_lat just closes the socket. Between two urnic-perfs both sides synchronise
    // first (as perftest's other tools do): the side that finished first keeps its QP until
    // the other's last WRITE is acknowledged, however many frames the path loses at the end.
    if (!urnic_peer)
      oob.close();
    else if (!oob.end_together(me))
      return oob_failed("close");
  } else {  // read_lat, atomic_lat
    if (role == Role::kClient) {
      for (uint64_t size : sizes) {
        auto r = make_lat(side, run_config(o, t, role, size, urnic_peer));
        if (!run_one(*r, size, false)) break;
        print_lat_result(o, t, size, *r);
        out.data(r->check_data());
      }
      if (!out.ok) return run_failed();
    }
    if (!oob.close_connection(me)) return oob_failed("close");
  }
  print_summary(out, completions, totals_of({&env.a()}), o.verbose);
  return out.ok ? kExitOk : run_failed();
}

}  // namespace urnic::perf
