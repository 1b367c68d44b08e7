// urnic-perf against a real port: a perftest server or client (see main.cc for the choreography
// of each test's TCP exchange).
#include <arpa/inet.h>
#include <rte_cycles.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/perf/cm_link.h"
#include "bench/perf/remote.h"
#include "bench/perf/report.h"

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
    case OobFailure::kCanceled:
      return kExitOk;  // SIGINT / SIGTERM under --run_infinitely: the end the user asked for
    default:
      return kExitRunFailed;
  }
}

// -b and --run_infinitely are symmetric (perftest: "SYMMETRIC"): an urnic-perf peer says what
// it was told (oob.h PeerModes), and a mismatch would leave one side waiting for a run the other
// never makes.
bool modes_agree(const Options& o, const Oob& oob) {
  if (!oob.peer_is_urnic()) return true;
  const PeerModes& p = oob.peer_modes();
  const char* peer = o.role() == Role::kClient ? "server" : "client";
  if (p.bidirectional != o.bidirectional) {
    std::fprintf(stderr,
                 "urnic-perf: this side was started %s -b (bidirectional) and the %s %s: -b is "
                 "symmetric, give it to both sides or neither\n",
                 o.bidirectional ? "with" : "without", peer, p.bidirectional ? "was" : "was not");
    return false;
  }
  // A send_bw server counts receives until the client says it is done; a bidirectional side
  // sends until the other tells it: both need to know that the run has no end.
  if ((o.bidirectional || o.test.verb == Verb::kSend) && p.run_infinitely != o.run_infinitely) {
    std::fprintf(stderr,
                 "urnic-perf: this side was started %s --run_infinitely and the %s %s: give it "
                 "to both sides or neither\n",
                 o.run_infinitely ? "with" : "without", peer, p.run_infinitely ? "was" : "was not");
    return false;
  }
  return true;
}

// Selective repeat (issue 41 item 3): used when both sides offer it, which only urnic-perf does
// (perftest's side of the exchange has no such field, and its responder would not understand
// a hole named in a NAK's MSN field); --sr=on refuses a peer that does not offer it.
bool sr_agreed(const Options& o, const Oob& oob, bool* sr) {
  const bool offered = oob.peer_is_urnic() && oob.peer_modes().selective_repeat;
  *sr = o.sr != Options::SrMode::kOff && offered;
  if (o.sr != Options::SrMode::kOn || offered) return true;
  std::fprintf(stderr,
               "urnic-perf: --sr=on, but the peer does not offer selective repeat (%s): give it "
               "--sr=on or --sr=auto, or use --sr=auto here\n",
               oob.peer_is_urnic() ? "it was started with --sr=off" : "it is not urnic-perf");
  return false;
}

// write_bw, read_bw, atomic_bw: the client runs and sends its report; the server only serves
// (the responder runs on the engine) and prints the client's report.
const char* flow_bw_rdma(RemoteRun& rr, const std::vector<uint64_t>& sizes, uint64_t max_size) {
  const Options& o = rr.o;
  const Dest& me = rr.side.qp(0).local;
  BwReport mine, theirs;
  if (rr.role == Role::kClient) {
    for (uint64_t size : sizes) {
      RunConfig rc = run_config(o, rr.t, rr.role, size, rr.urnic_peer);
      RemoteRun::Spec spec;
      EndlessRun endless(o, size, 1.0, true, &rc, &spec);
      auto& ticker = endless.ticker;
      auto r = make_bw_sender(rr.side, rc);
      const CpuStat cpu0 = o.cpu_util ? read_cpu_stat() : CpuStat{};
      if (!rr.run({r.get()}, size, spec)) {
        report_open_loop(o, rr.t, size, *r, &rr.out);  // what it measured, errors included
        break;
      }
      mine = bw_of(o, size, *r);
      if (ticker)
        ticker->finish(rte_rdtsc(), r->messages);
      else
        print_bw_row(mine, o.cpu_util ? cpu_util(cpu0, read_cpu_stat()) : -1);
      if (!ticker) record_bw_row(o, rr.t, mine);
      report_open_loop(o, rr.t, size, *r, &rr.out);
      rr.out.data(r->check_data());
    }
    if (!rr.out.ok) return nullptr;
    if (!rr.oob.hand_shake(me, nullptr) || !rr.oob.xchg_reports(mine, &theirs)) return "reports";
  } else {
    if (!rr.oob.hand_shake(me, nullptr) || !rr.oob.xchg_reports(mine, &theirs)) return "reports";
    print_bw_row(theirs);
    record_bw_row(o, rr.t, theirs);
    const uint64_t nqps = rr.side.qps().size();
    if (theirs.size <= max_size && theirs.size != 0) {
      const RunConfig rc = run_config(o, rr.t, rr.role, theirs.size, rr.urnic_peer);
      const uint64_t per_qp = o.duration > 0 || nqps == 0 ? 0 : theirs.iters / nqps;
      rr.out.data(check_passive_target(rr.side, rc, per_qp, theirs.iters));
    }
  }
  return rr.oob.close_connection(me) ? nullptr : "close";
}

// send_bw and send_lat: per size the receiver posts its receives, a sync record lets the client
// start, both run (with -a, send_bw adds a record after each size).
const char* flow_send(RemoteRun& rr, const std::vector<uint64_t>& sizes) {
  const Options& o = rr.o;
  const Test t = rr.t;
  const Dest& me = rr.side.qp(0).local;
  // Whether this side only answers (receives SENDs, or replies in a ping-pong): in a duration
  // run it stops when the other side's next TCP message shows up.
  const bool answers = t.kind == Kind::kBw ? rr.role == Role::kServer : !initiator(t, rr.role);
  for (uint64_t size : sizes) {
    RunConfig rc = run_config(o, t, rr.role, size, rr.urnic_peer);
    RemoteRun::Spec spec;
    EndlessRun endless(o, size, 1.0, rr.role == Role::kClient, &rc, &spec);
    auto& ticker = endless.ticker;
    std::unique_ptr<Runner> r;
    if (t.kind == Kind::kBw)
      r = rr.role == Role::kClient ? make_bw_sender(rr.side, rc) : make_bw_receiver(rr.side, rc);
    else
      r = make_lat(rr.side, rc);  // posts its receives
    // Receives are posted: the sync record lets the client start.
    if (!rr.oob.hand_shake(me, nullptr)) return "sync";
    if (answers) spec.waiter = r.get();
    spec.waiter_stops_on_peer = o.ud && t.kind == Kind::kBw;
    const CpuStat cpu0 = o.cpu_util ? read_cpu_stat() : CpuStat{};
    if (!rr.run({r.get()}, size, spec)) break;
    const double cpu = o.cpu_util ? cpu_util(cpu0, read_cpu_stat()) : -1;
    if (ticker) {
      ticker->finish(rte_rdtsc(), r->messages);
    } else if (t.kind == Kind::kBw) {
      const BwReport row = bw_of(o, size, *r);
      print_bw_row(row, cpu);
      record_bw_row(o, t, row);
      report_open_loop(o, t, size, *r, &rr.out);
    } else {
      print_lat_result(o, t, size, *r, cpu);
    }
    rr.out.data(r->check_data());
    if (t.kind == Kind::kBw && o.all_sizes && !rr.oob.hand_shake(me, nullptr)) return "sync";
  }
  if (!rr.out.ok || rr.interrupted) return nullptr;
  return rr.oob.close_connection(me) ? nullptr : "close";
}

// write_lat, read_lat, atomic_lat.
const char* flow_lat_rdma(RemoteRun& rr, const std::vector<uint64_t>& sizes) {
  const Options& o = rr.o;
  const Test t = rr.t;
  const Dest& me = rr.side.qp(0).local;
  if (t.verb == Verb::kWrite || rr.role == Role::kClient) {
    for (uint64_t size : sizes) {
      auto r = make_lat(rr.side, run_config(o, t, rr.role, size, rr.urnic_peer));
      RemoteRun::Spec spec;
      if (!initiator(t, rr.role)) spec.waiter = r.get();
      const CpuStat cpu0 = o.cpu_util ? read_cpu_stat() : CpuStat{};
      if (!rr.run({r.get()}, size, spec)) break;
      print_lat_result(o, t, size, *r, o.cpu_util ? cpu_util(cpu0, read_cpu_stat()) : -1);
      rr.out.data(r->check_data());
    }
    if (!rr.out.ok) return nullptr;
  }
  if (t.verb != Verb::kWrite) return rr.oob.close_connection(me) ? nullptr : "close";
  // ib_write_lat just closes the socket. Between two urnic-perfs both sides synchronise first
  // (as perftest's other tools do): the side that finished first keeps its QP until the other's
  // last WRITE is acknowledged, however many frames the path loses at the end.
  if (!rr.urnic_peer) {
    rr.oob.close();
    return nullptr;
  }
  return rr.oob.end_together(me) ? nullptr : "close";
}

}  // namespace

bool RemoteRun::run(const std::vector<Runner*>& rs, uint64_t size, const Spec& spec) {
  bool stopped = false, gone = false, stalled = false;
  // The socket is looked at once a millisecond, not on every step: a syscall per step would
  // cost the run more than the work it measures.
  const uint64_t look_every = tsc_hz() / 1000;
  uint64_t next_look = 0;
  auto abort_all = [&](const char* why) {
    for (Runner* r : rs) r->abort(why);
  };
  const bool ok = run_all(
      drv, rs, o, t.kind, size,
      [&] {
        if (spec.on_step) spec.on_step();
        if (stopped || gone || interrupted) return;
        const uint64_t now = rte_rdtsc();
        if (now < next_look) return;
        next_look = now + look_every;
        if (spec.ticker != nullptr) spec.ticker->tick(now, rs.front()->messages);
        if (o.run_infinitely && stop_requested()) {
          if (spec.end != nullptr) {
            spec.end->store(true, std::memory_order_relaxed);  // the senders finish
          } else {
            // A receiver has no end of its own: this side leaves the run (the peer will see
            // its TCP connection close).
            interrupted = true;
            abort_all("interrupted");
            return;
          }
        }
        if (peer_waits && oob.peer_closed()) {
          // The peer is gone (exited or killed): waiting for its messages is pointless.
          gone = true;
          abort_all("the peer closed its TCP connection during the run (it exited or was killed)");
        } else if (spec.end != nullptr && spec.peer_ends && oob.readable()) {
          spec.end->store(true, std::memory_order_relaxed);
        } else if (spec.waiter != nullptr && (o.duration > 0 || spec.waiter_stops_on_peer) &&
                   oob.readable()) {
          spec.waiter->stop(0);
          stopped = true;
        }
      },
      &stalled);
  for (Runner* r : rs) completions += r->messages;
  if (spec.ticker != nullptr && interrupted) spec.ticker->finish(rte_rdtsc(), rs.front()->messages);
  if (!ok && !interrupted) {
    std::string why = "the run did not finish";
    for (Runner* r : rs)
      if (r->failed()) {
        why = r->error();
        break;
      }
    out.fail(why, gone ? kExitPeerGone : stalled ? kExitStalled : kExitRunFailed);
  }
  return ok;
}

namespace {

// The connection records, in the order the perftest tool sends them (see the file comment);
// once every peer QP is known the peer is resolved and the QPs brought up, before the next
// record (the peer starts sending after the last one). kExitOk, or the exit code; *step names
// the exchange step when the exchange itself failed.
int exchange_records(RemoteRun& rr, const Gid& gid, uint32_t mtu, bool lat_rw,
                     std::vector<Dest>* remote, const char** step) {
  // -R: the CM connected the QPs already; the records carry the buffers' addresses and keys.
  const bool connected = rr.o.rdma_cm;
  const Options& o = rr.o;
  const Test& t = rr.t;
  const uint32_t nqps = static_cast<uint32_t>(remote->size());
  std::vector<uint32_t> seq;
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
  std::string err;
  for (size_t k = 0; k < seq.size(); ++k) {
    Dest d;
    if (!rr.oob.hand_shake(rr.side.qp(seq[k]).local, &d)) {
      *step = "connection records";
      return kExitRunFailed;
    }
    if (k < connect_after) (*remote)[seq[k]] = d;
    if (k + 1 != connect_after) continue;
    const Gid peer_gid = (*remote)[0].gid;
    if (gid_is_ipv4(peer_gid) != gid_is_ipv4(gid)) {
      std::fprintf(stderr, "urnic-perf: the peer's GID %s and ours (%s) differ in IP version\n",
                   gid_text(peer_gid).c_str(), gid_text(gid).c_str());
      return 1;
    }
    if (connected) {
      for (uint32_t i = 0; i < nqps; ++i) rr.side.set_remote(i, (*remote)[i]);
      continue;
    }
    // The adapter resolves the peer's MAC (ARP / neighbour discovery) in the RTR transition.
    const AddressVector av = address_to(peer_gid, o.gid_index);
    for (uint32_t i = 0; i < nqps; ++i) {
      if (!rr.side.connect(i, (*remote)[i], mtu, av, &err)) {
        std::fprintf(stderr, "urnic-perf: %s\n", err.c_str());
        return kExitConnectFailed;
      }
    }
  }
  return kExitOk;
}

// perftest's test banner and this side's connection records.
void print_local(const RemoteRun& rr, const std::string& device, uint32_t nqps, uint32_t mtu,
                 const RunConfig& base) {
  TestInfo info;
  info.test = rr.t;
  info.role = rr.role;
  info.device = device;
  info.qps = nqps;
  info.mtu = mtu;
  info.tx_depth = base.tx_depth;
  info.rx_depth = base.rx_depth;
  info.cq_mod = base.cq_mod;
  info.out_reads = rr.side.qp(0).local.out_reads;
  info.gid_index = rr.o.gid_index;
  info.rdma_cm = rr.o.rdma_cm;
  info.ud = rr.o.ud;
  if (rr.o.rdma_cm) info.exchange = "rdma_cm";  // perftest: exchange_state[use_rdma_cm]
  print_test_info(info);
  for (uint32_t i = 0; i < nqps; ++i) print_dest("local", rr.t, rr.side.qp(i).local);
}

// The test's choreography (main.cc); the exchange step that failed, or null.
const char* run_flow(RemoteRun& rr, const std::vector<uint64_t>& sizes, uint64_t max_size) {
  const Test& t = rr.t;
  if (rr.o.bidirectional) return run_duplex(rr, sizes);
  if (t.kind == Kind::kBw && t.verb != Verb::kSend) return flow_bw_rdma(rr, sizes, max_size);
  if (t.verb == Verb::kSend) return flow_send(rr, sizes);
  return flow_lat_rdma(rr, sizes);
}

// The exchange's connection: TCP, or with -R an RC QP through the CM on the same port
// (cm_link.h). Returns the step that failed, or null.
const char* open_exchange(const Options& o, Adapter& a, const Gid& gid, Oob& oob,
                          std::optional<CmLink>* link) {
  const Role role = o.role();
  if (role == Role::kServer) print_waiting();
  if (!o.rdma_cm) {
    if (role == Role::kServer) return oob.accept_one(o.tcp_port) ? nullptr : "accept";
    return oob.connect_to(o.server, o.tcp_port, o.connect_retry) ? nullptr : "connect";
  }
  std::string err;
  CmLink& l = link->emplace(a, oob);
  const bool v4 = gid_is_ipv4(gid);
  if (!l.create(&err)) {
    oob.fail(err);
    return "rdma_cm resources";
  }
  if (role == Role::kServer) {
    if (!l.accept(v4 ? AF_INET : AF_INET6, o.tcp_port)) return "accept";
  } else {
    sockaddr_storage dst{};
    socklen_t len = 0;
    if (!cm_resolve(o.server, o.tcp_port, v4, &dst, &len, &err)) {
      oob.fail(err, OobFailure::kNoPeer);
      return "connect";
    }
    if (!l.connect(reinterpret_cast<const sockaddr*>(&dst), len, o.connect_retry)) return "connect";
  }
  oob.use_link(&l);
  return nullptr;
}

// -R: perftest's create_rdma_cm_connection(): a record exchange, the test's QPs connected
// through the CM on the exchange's port (the server listens before its side of that exchange;
// the client retries while perftest's server, which listens only after it, is not yet
// listening), and another record exchange. Returns the step that failed, or null.
const char* cm_connect_tests(RemoteRun& rr, const Gid& gid, Adapter& a,
                             std::optional<CmTestConns>* out) {
  const Options& o = rr.o;
  CmTestConns& tc = out->emplace(a, rr.oob);
  const bool v4 = gid_is_ipv4(gid);
  const bool server = rr.role == Role::kServer;
  if (server && !tc.listen(v4 ? AF_INET : AF_INET6, o.tcp_port)) return "rdma_cm listen";
  if (!rr.oob.hand_shake(rr.side.qp(0).local, nullptr)) return "connection records";
  std::vector<Qp*> qps;
  for (QpRes& q : rr.side.qps()) qps.push_back(q.qp.get());
  const bool reads = rr.t.verb == Verb::kRead || rr.t.verb == Verb::kAtomic;
  const uint32_t limit = reads ? rr.side.qp(0).local.out_reads : 0;
  if (server) {
    if (!tc.accept_all(qps, limit)) return "rdma_cm connections";
  } else {
    sockaddr_storage dst{};
    socklen_t len = 0;
    std::string err;
    if (!cm_resolve(o.server, o.tcp_port, v4, &dst, &len, &err)) {
      rr.oob.fail(err, OobFailure::kNoPeer);
      return "rdma_cm connections";
    }
    if (!tc.connect_all(qps, reinterpret_cast<const sockaddr*>(&dst), len, limit,
                        std::max(o.connect_retry, 10.0)))
      return "rdma_cm connections";
  }
  return rr.oob.hand_shake(rr.side.qp(0).local, nullptr) ? nullptr : "connection records";
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
  Oob oob(role, drv.idle_fn(), o.timeout);
  // --run_infinitely: a server that waits for its client (or receives) ends on SIGINT too. The
  // senders instead finish their run and the exchange after it.
  if (o.run_infinitely && role == Role::kServer && !o.bidirectional) oob.set_cancel(stop_flag());
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
  std::string err;
  const auto gid = pick_gid(env.a(), o.gid_index, &err);
  if (!err.empty()) {
    std::fprintf(stderr, "urnic-perf: %s\n", err.c_str());
    return 1;
  }
  std::optional<CmLink> link;  // -R: the exchange over RDMA
  if (const char* step = open_exchange(o, env.a(), gid, oob, &link); step != nullptr)
    return oob_fail(step);
  if (!oob.exchange_versions(
          PeerModes{o.bidirectional, o.run_infinitely, o.sr != Options::SrMode::kOff}))
    return oob_fail("versions");
  if (!modes_agree(o, oob)) return kExitUsage;
  bool sr = false;
  if (!sr_agreed(o, oob, &sr)) return kExitUsage;
  Geometry geo;
  if (!oob.check_sys_data(&geo.cycle, &geo.cache_line)) return oob_fail("system data");
  uint32_t mtu = o.mtu != 0 ? std::min(o.mtu, env.mtu()) : env.mtu();
  if (!oob.check_mtu(mtu, &mtu)) return oob_fail("MTU");
  const bool urnic_peer = oob.peer_is_urnic();

  const auto sizes = o.sizes_for(mtu);
  // UD: each receive also holds the GRH.
  geo.max_size = *std::max_element(sizes.begin(), sizes.end()) + (o.ud ? kGrhLength : 0);
  const uint32_t nqps = t.kind == Kind::kLat ? 1 : o.qps;
  const RunConfig base = run_config(o, t, role, sizes.front(), urnic_peer);
  SideOptions so = side_options(o);
  so.selective_repeat = sr;
  Side side(env.a(), drv, so);
  const uint32_t rq = t.verb == Verb::kSend ? base.rx_depth : 16;
  if (!side.create(t, nqps, std::max(base.tx_depth, 16u), rq, geo, gid, &err)) {
    std::fprintf(stderr, "urnic-perf: %s\n", err.c_str());
    return 1;
  }
  // Whether the peer keeps its TCP connection open until this side's run is over: not an
  // ib_write_lat, which closes it as soon as its own run ends.
  const bool peer_waits = !(t.verb == Verb::kWrite && t.kind == Kind::kLat && !urnic_peer);
  RemoteRun rr{o, t, role, drv, oob, side, urnic_peer, peer_waits, Outcome{}, 0, false};
  Outcome& out = rr.out;
  uint64_t& completions = rr.completions;
  // From here on a failure still prints the summary with every counter (retransmits, NAKs,
  // drops), whatever -v says: a failed run must be diagnosable from its output.
  auto totals = [&] {
    Totals tt = totals_of({&env.a()});
    tt.has_xdp = port_xdp_counters(env.port(), &tt.xdp) == Status::kSuccess;
    return tt;
  };
  auto failed = [&](int rc) {
    out.ok = false;
    print_summary(out, completions, totals(), true);
    return rc;
  };
  auto run_failed = [&] { return failed(out.code == kExitOk ? kExitRunFailed : out.code); };
  auto oob_failed = [&](const char* step) { return failed(oob_fail(step)); };
  std::optional<CmTestConns> tests_cm;  // -R: the test's QPs' connections
  if (o.rdma_cm) {
    if (const char* step = cm_connect_tests(rr, gid, env.a(), &tests_cm); step != nullptr)
      return oob_failed(step);
  }
  print_local(rr, env.device(), nqps, mtu, base);

  const bool lat_rw = t.kind == Kind::kLat && t.verb != Verb::kSend;
  std::vector<Dest> remote(nqps);
  const char* records_step = nullptr;
  if (const int rc = exchange_records(rr, gid, mtu, lat_rw, &remote, &records_step); rc != kExitOk)
    return records_step != nullptr ? oob_failed(records_step) : failed(rc);
  for (uint32_t i = 0; i < nqps; ++i) print_dest("remote", t, remote[i]);
  if (t.kind == Kind::kBw)
    print_bw_header(o.gbits, o.cpu_util);
  else if (!(lat_rw && role == Role::kServer && t.verb != Verb::kWrite))
    print_lat_header(o.duration > 0, o.cpu_util);

  const char* step = run_flow(rr, sizes, geo.max_size);
  if (rr.interrupted || oob.failure() == OobFailure::kCanceled) {
    // SIGINT / SIGTERM under --run_infinitely on a side that cannot end the run itself (a
    // receiver, or a server waiting for its client): its last row is out, and that is success.
    std::fprintf(stderr, " urnic-perf: interrupted\n");
    print_summary(out, completions, totals(), o.verbose);
    return kExitOk;
  }
  if (step != nullptr) return oob_failed(step);
  if (!out.ok) return run_failed();
  // -R: the server disconnects the test's QPs, the client waits for that (perftest's
  // rdma_cm_disconnect_nodes(); a perftest peer waits for its disconnect events).
  if (tests_cm && !tests_cm->finish(role == Role::kServer)) return oob_failed("rdma_cm disconnect");
  print_summary(out, completions, totals(), o.verbose, drv.events());
  return kExitOk;
}

}  // namespace urnic::perf
