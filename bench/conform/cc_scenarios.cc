// urnic-conform's congestion scenarios (rocev2.md §5; DCQCN: Zhu et al., SIGCOMM 2015, and
// ConnectX's parameters, urnic/congestion.h). The peer as notification point: CE-marked WRITEs
// to its responder must come back as CNPs to our QP, coalesced per QP. The peer as reaction
// point (its write_bw client against us, as in requester.cc): we send CNPs at a set pace for a
// while and record the rate it sends at, per millisecond, beside the rate DCQCN's rules give a
// QP on the same path for the same CNPs (cc_model.h) - how fast and how far it cuts, and how
// it recovers. DCQCN is not required by the IBTA: with no --dcqcn claim a peer that never
// answers or never reacts is NOT-APPLICABLE; with one, it FAILs.
#include <rte_cycles.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "bench/conform/acking.h"
#include "bench/conform/cc_model.h"
#include "bench/conform/craft.h"
#include "dataplane/wire/opcode.h"

namespace urnic::conform {
namespace {

namespace opc = wire::opc;
constexpr int kEcnEct0 = 2, kEcnCe = 3;

std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), f, a, b, c, d);
  return buf;
}

Outcome absent(const Ctx& c, const std::string& what) {
  if (c.dcqcn_claimed) return fail(what + ", though the peer is said to run DCQCN (--dcqcn)");
  return {Verdict::kNotApplicable, what + ": no DCQCN on the peer? (--dcqcn says it has)"};
}

void write_ce(Ctx& c, uint32_t psn, bool ack_req, int ecn) {
  const auto data = bytes(64, static_cast<uint8_t>(psn));
  TxFaults f;
  f.ecn = ecn;
  c.link.send(with_reth(opc::kWriteOnly, psn, ack_req, c.peer.vaddr, c.peer.rkey, 64), data, f);
}

// The frames within twice the answer wait: whether the ACK for `psn` came, and the CNPs.
struct Answers {
  bool acked = false;
  std::vector<RxFrame> cnps;
};
Answers answers(Ctx& c, uint32_t psn) {
  Answers a;
  for (RxFrame& r : c.link.collect(2 * c.wait_ms)) {
    if (r.opcode == opc::kCnp) a.cnps.push_back(r);
    if (is_ack(r) && r.psn == psn) a.acked = true;
  }
  return a;
}

// ---- notification point ---------------------------------------------------------------------

Outcome np_cnp(Ctx& c) {
  // ECT(0), not marked: the ACK and no CNP.
  write_ce(c, c.psn, true, kEcnEct0);
  const Answers plain = answers(c, c.psn);
  if (!plain.acked) return fail("no ACK for a WRITE ONLY with ECT(0)");
  if (!plain.cnps.empty())
    return fail("a CNP for a WRITE that was not CE-marked (ECT(0)): " + describe(plain.cnps[0]));
  const uint32_t psn = psn_add(c.psn, 1);
  write_ce(c, psn, true, kEcnCe);
  const Answers ce = answers(c, psn);
  if (!ce.acked) return fail("no ACK for a CE-marked WRITE ONLY: a mark must not stop delivery");
  if (ce.cnps.empty()) return absent(c, "no CNP for a CE-marked WRITE");
  const RxFrame& n = ce.cnps[0];
  const std::string got = describe(n) + (n.becn ? ", BECN" : ", no BECN");
  // rocev2.md §5.2: to the QP whose frames were marked (the sender's), BECN set, 16 zero bytes.
  if (n.dest_qp == c.peer.qpn)
    return fail("the CNP names the peer's own QP " + std::to_string(n.dest_qp) +
                ", not ours (the sender to slow down): " + got);
  // (Its 16 reserved bytes are the parser's: a CNP without them is no CNP, and reserved
  // fields are ignored on receipt.)
  if (!n.becn || !n.icrc_ok) return fail("the CNP: " + got);
  return pass("none for ECT(0); for CE: " + std::to_string(ce.cnps.size()) + " CNP, " + got);
}

Outcome np_coalesce(Ctx& c) {
  // 256 CE-marked WRITEs in trains of 16 that leave together, 2 ms apart (the path's rings take
  // a train, not all 256 at once): a notification point sends at most one CNP per QP per
  // interval (ConnectX min_time_between_cnps, 4 us by default; the paper's 50 us), so a train
  // that arrives back to back gets a few, not one per frame.
  constexpr uint32_t kFrames = 256, kTrain = 16;
  const uint32_t last = psn_add(c.psn, kFrames - 1);
  size_t cnps = 0, sent = 0;
  bool acked = false;
  uint32_t from = 0;
  // As a requester recovers (go-back-N, IBTA §9.7.5.2.1): a frame lost on the way (a slow peer's
  // ring) comes back as a NAK PSN sequence error, and all from it is sent again; 4 rounds.
  for (int round = 0; round < 4 && !acked; ++round) {
    int64_t nak = -1;
    auto scan = [&](std::vector<RxFrame> got) {
      for (const RxFrame& r : got) {
        if (r.opcode == opc::kCnp) ++cnps;
        if (is_ack(r) && r.psn == last) acked = true;
        if (is_nak(r, kNakPsnSeq)) nak = (r.psn - c.psn) & 0xFFFFFF;
      }
    };
    for (uint32_t i = from; i < kFrames; i += kTrain) {
      c.link.hold();
      for (uint32_t k = i; k < std::min(i + kTrain, kFrames); ++k, ++sent)
        write_ce(c, psn_add(c.psn, static_cast<int>(k)), k + 1 == kFrames, kEcnCe);
      c.link.flush();
      scan(c.link.collect(2));
    }
    scan(c.link.collect(2 * c.wait_ms));
    if (acked || nak < 0 || nak >= kFrames) break;
    from = static_cast<uint32_t>(nak);
  }
  if (!acked)
    return fail("no ACK for the last of " + std::to_string(kFrames) + " CE-marked WRITEs");
  const std::string seen = std::to_string(cnps) + " CNPs for " + std::to_string(sent) +
                           " CE-marked WRITEs in trains of " + std::to_string(kTrain);
  if (cnps == 0) return absent(c, "no CNP for " + std::to_string(sent) + " CE-marked WRITEs");
  // A notification point without pacing sends one per marked frame (a few may be lost on the
  // way). One with it, on a software path that spaces frames by microseconds, measured about
  // half as many (urnic, 4 us, through urnic-hop on two loaded cores); back to back, far fewer.
  if (cnps >= sent * 9 / 10)
    return fail(seen + ": one per marked frame, not at most one per QP per interval");
  return pass(seen);
}

// ---- reaction point --------------------------------------------------------------------------

// The run: kWarmMs without CNPs (R0, the path's rate, from the 100 ms before the CNPs), then a
// CNP every kCnpUs for kCnpMs, then kRecoverMs without. The curve starts kShownMs before the
// first CNP.
constexpr double kWarmMs = 250, kShownMs = 50, kCnpMs = 30, kRecoverMs = 120, kCnpUs = 100;
constexpr double kBinMs = 1;

struct CurveRun {
  double r0 = 0;  // Mb/s
  RateCurve curve;
  size_t cnp_from = 0, cnp_to = 0;  // the CNP window's bins in the curve
  std::vector<double> m, e;         // the curve's measured and expected rates, smoothed
};

bool run_curve(Ctx& c, CurveRun* out, std::string* why) {
  RxFrame first;
  if (!c.link.recv(&first, 10000)) {
    *why = "the peer sent no request within 10 s of the exchange";
    return false;
  }
  AckingResponder resp{c, first.psn};
  c.link.unread(first);
  const double total = kWarmMs + kCnpMs + kRecoverMs;
  const size_t bins = static_cast<size_t>(total / kBinMs);
  std::vector<double> bytes(bins, 0);
  std::vector<uint64_t> cnp_tsc;
  const uint64_t start = rte_rdtsc();
  const double tick_ms = 1e3 / static_cast<double>(rte_get_tsc_hz());
  resp.run(
      total, kCnpUs, kWarmMs, kWarmMs + kCnpMs,
      [&](uint64_t tsc, size_t n) {
        const size_t b = static_cast<size_t>(static_cast<double>(tsc - start) * tick_ms / kBinMs);
        if (tsc >= start && b < bins) bytes[b] += static_cast<double>(n);
      },
      &cnp_tsc);
  std::vector<double> mbps(bins), cnp_ms;
  for (size_t i = 0; i < bins; ++i) mbps[i] = bytes[i] * 8 / (kBinMs * 1e3);
  for (uint64_t t : cnp_tsc) cnp_ms.push_back(static_cast<double>(t - start) * tick_ms);
  const size_t w0 = static_cast<size_t>((kWarmMs - 100) / kBinMs);
  const size_t w1 = static_cast<size_t>(kWarmMs / kBinMs);
  out->r0 = std::accumulate(mbps.begin() + w0, mbps.begin() + w1, 0.0) / (w1 - w0);
  if (out->r0 <= 0) {
    *why = "no traffic from the peer in the 100 ms before the CNPs";
    return false;
  }
  const std::vector<double> expected =
      dcqcn_curve(c.dcqcn, c.peer_max_mbps, out->r0, cnp_ms, kBinMs, bins);
  const size_t shown = static_cast<size_t>((kWarmMs - kShownMs) / kBinMs);
  RateCurve& rc = out->curve;
  rc.bin_ms = kBinMs;
  rc.measured_mbps.assign(mbps.begin() + shown, mbps.end());
  rc.expected_mbps.assign(expected.begin() + shown, expected.end());
  rc.cnp_from_ms = cnp_ms.empty() ? kShownMs : cnp_ms.front() - (kWarmMs - kShownMs);
  rc.cnp_to_ms = cnp_ms.empty() ? kShownMs : cnp_ms.back() - (kWarmMs - kShownMs);
  rc.cnps = cnp_ms.size();
  out->cnp_from = static_cast<size_t>(kShownMs / kBinMs);
  out->cnp_to = static_cast<size_t>((kShownMs + kCnpMs) / kBinMs);
  if (cnp_ms.empty()) {
    *why = "no CNP sent: the peer sent nothing while they were due";
    return false;
  }
  return true;
}

// Each bin as the mean of it and its neighbours: one millisecond of a software path on a loaded
// host swings by half either way (a process paused, a ring drained late), three do not.
std::vector<double> smooth(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t a = i == 0 ? 0 : i - 1, b = std::min(v.size(), i + 2);
    out[i] = std::accumulate(v.begin() + a, v.begin() + b, 0.0) / static_cast<double>(b - a);
  }
  return out;
}

// The first bin in [from, to) whose rate is below (or, with `above`, at least) `level`; -1.
long first_bin(const std::vector<double>& v, size_t from, size_t to, double level, bool above) {
  for (size_t i = from; i < std::min(to, v.size()); ++i)
    if (above ? v[i] >= level : v[i] < level) return static_cast<long>(i);
  return -1;
}

// Common to both reaction-point scenarios: the run, or the verdict that ends it early.
bool curve_or_verdict(Ctx& c, CurveRun* run, Outcome* early) {
  if (!c.dcqcn_claimed) {
    *early = {Verdict::kNotApplicable,
              "needs the peer's DCQCN parameters to draw DCQCN's curve (--dcqcn=connectx|slow)"};
    return false;
  }
  std::string why;
  if (!run_curve(c, run, &why)) {
    *early = fail(why);
    return false;
  }
  run->m = smooth(run->curve.measured_mbps);
  run->e = smooth(run->curve.expected_mbps);
  return true;
}

Outcome rate_cut(Ctx& c) {
  CurveRun run;
  Outcome out;
  if (!curve_or_verdict(c, &run, &out)) return out;
  const RateCurve& k = run.curve;
  const std::vector<double>&m = run.m, &e = run.e;
  const size_t from = run.cnp_from, to = run.cnp_to, half = from + (to - from) / 2;
  const double r0 = run.r0;
  const long tm = first_bin(m, from, to, 0.5 * r0, false);
  const long te = first_bin(e, from, to, 0.5 * r0, false);
  // How far: over the bins of the window's second half where DCQCN is below half of R0. Our
  // CNPs go out with the peer's requests (an NP marks what arrives); a pause of this process
  // leaves gaps in which DCQCN's timer recovers, and those bins judge nothing.
  double ms = 0, es = 0;
  size_t deep = 0;
  for (size_t i = half; i < to; ++i)
    if (e[i] < 0.5 * r0) ms += m[i], es += e[i], ++deep;
  std::string seen = fmt("%.0f Mb/s before; %.0f CNPs, one per %.0f us for %.0f ms", r0,
                         static_cast<double>(k.cnps), kCnpUs, kCnpMs);
  seen += tm < 0 ? "; never below half"
                 : fmt("; below half %.0f ms after the first CNP", (tm - long(from)) * kBinMs);
  seen += te < 0 ? " (DCQCN: never)"
                 : fmt(" (DCQCN: %.0f ms)", static_cast<double>(te - long(from)) * kBinMs);
  out.curve = k;
  if (deep < 5) {
    out.verdict = Verdict::kNotApplicable;
    out.seen = seen + fmt("; inconclusive: DCQCN's rate for the CNPs sent stayed above half in "
                          "all but %.0f of the last %.0f ms (our CNPs paused: a loaded host?)",
                          static_cast<double>(deep), (to - half) * kBinMs);
    return out;
  }
  const double m_far = ms / deep, e_far = es / deep;
  seen +=
      fmt("; %.1f Mb/s in the %.0f ms of the last %.0f where DCQCN is below half (DCQCN: "
          "%.1f)",
          m_far, static_cast<double>(deep), (to - half) * kBinMs, e_far);
  // How fast: within 3 ms (bins, and the peer's scheduling) of when DCQCN falls below half.
  const bool fast = te < 0 || (tm >= 0 && tm <= te + 3);
  // How far: not much above DCQCN's level (too little cut), nor far below it (starved).
  const bool far = m_far <= e_far + 0.2 * r0 && m_far >= 0.5 * e_far - 0.05 * r0;
  out.verdict = fast && far ? Verdict::kPass : Verdict::kFail;
  out.seen = seen;
  return out;
}

Outcome rate_recovery(Ctx& c) {
  CurveRun run;
  Outcome out;
  if (!curve_or_verdict(c, &run, &out)) return out;
  const RateCurve& k = run.curve;
  const std::vector<double>&m = run.m, &e = run.e;
  const size_t from = run.cnp_from, to = run.cnp_to, end = m.size();
  const double r0 = run.r0;
  std::string seen = fmt("%.0f Mb/s before, %.0f CNPs", r0, static_cast<double>(k.cnps));
  if (first_bin(m, from, to, 0.5 * r0, false) < 0) {
    out = fail(seen + ": the rate never fell below half under the CNPs, nothing to recover from");
    out.curve = k;
    return out;
  }
  const long tm = first_bin(m, to, end, 0.75 * r0, true);
  const long te = first_bin(e, to, end, 0.75 * r0, true);
  if (te < 0) {
    out = {Verdict::kNotApplicable,
           seen + fmt(": DCQCN with these parameters takes longer than %.0f ms to recover",
                      kRecoverMs)};
    out.curve = k;
    return out;
  }
  const double de = static_cast<double>(te - long(to)) * kBinMs;
  seen += tm < 0 ? fmt("; not back to 3/4 of it within %.0f ms of the last CNP", kRecoverMs)
                 : fmt("; back to 3/4 of it %.0f ms after the last CNP",
                       static_cast<double>(tm - long(to)) * kBinMs);
  seen += fmt(" (DCQCN: %.0f ms)", de);
  // Twice DCQCN's time, or 15 ms more (a frame paced at the minimum rate before the increase
  // leaves when its slot comes, up to 8 ms for 1 KiB at 1 Mb/s).
  const double allowed = std::max(2 * de, de + 15);
  out = tm >= 0 && static_cast<double>(tm - long(to)) * kBinMs <= allowed ? pass(seen) : fail(seen);
  out.curve = k;
  return out;
}

}  // namespace

std::vector<Scenario> cc_scenarios() {
  return {
      {"cc_np_cnp",
       "A17.9 / DCQCN NP: a CE-marked request gets a CNP to the sender's QP (BECN set); an "
       "unmarked one none",
       Needs::kWrite, np_cnp},
      {"cc_np_coalesce",
       "DCQCN NP: at most one CNP per QP per interval, not one per CE-marked frame", Needs::kWrite,
       np_coalesce},
      {"cc_rate_cut",
       "DCQCN RP: under a CNP every 100 us the rate falls as fast and as far as DCQCN's rules "
       "give (--dcqcn)",
       Needs::kPeerClient, rate_cut},
      {"cc_rate_recovery",
       "DCQCN RP: once CNPs stop, the timer and byte counter bring the rate back as DCQCN's "
       "rules give (--dcqcn)",
       Needs::kPeerClient, rate_recovery},
  };
}

}  // namespace urnic::conform
