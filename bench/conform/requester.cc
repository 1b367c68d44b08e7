// urnic-conform's scenarios with the peer as requester: the peer runs a perftest write_bw client
// against urnic-conform, which plays its server's responder by hand - it withholds ACKs, NAKs a
// PSN, answers RNR or sends CNPs - and checks how the peer's requester reacts (IBTA volume 1
// §9.7.5.2, §9.7.6.1.3, annex A17.9). Every scenario leaves the peer's QP to fail on its
// retry count at the end (no more ACKs): the peer's client exits and its loop starts the next.
#include <rte_cycles.h>

#include <algorithm>
#include <cstdio>

#include "bench/conform/acking.h"
#include "bench/conform/craft.h"
#include "dataplane/wire/opcode.h"

namespace urnic::conform {
namespace {

namespace opc = wire::opc;

double ms_between(uint64_t from, uint64_t to) {
  return to > from ? static_cast<double>(to - from) * 1e3 / static_cast<double>(rte_get_tsc_hz())
                   : 0;
}

std::string ms_text(double ms) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f ms", ms);
  return b;
}

// The peer's first request: it must carry the PSN the peer announced (IBTA §9.7.1: the SQ PSN
// set at RTS is the first request's).
bool first_request(Ctx& c, RxFrame* r, std::string* why) {
  if (!c.link.recv(r, 10000)) {
    *why = "the peer sent no request within 10 s of the exchange";
    return false;
  }
  if (r->psn != c.peer_psn) {
    *why = "the first request has PSN " + std::to_string(r->psn) + ", the peer announced " +
           std::to_string(c.peer_psn);
    return false;
  }
  return true;
}

// Frames the peer sends until `pred` holds for one (returned in *hit) or nothing new comes for
// `quiet_ms`; `hi` is the highest PSN (offset from the first) seen so far and is kept up to date.
template <class Pred>
bool await(Ctx& c, uint32_t p0, double quiet_ms, uint32_t* hi, RxFrame* hit, Pred pred) {
  RxFrame f;
  while (c.link.recv(&f, quiet_ms)) {
    const uint32_t off = (f.psn - p0) & 0xFFFFFF;
    const bool rewind = off <= *hi;
    if (pred(f, off, rewind)) {
      *hit = f;
      return true;
    }
    if (!rewind) *hi = off;
  }
  return false;
}

// ---- local ACK timeout and retry count --------------------------------------------------------

Outcome retry_exhausted(Ctx& c) {
  RxFrame r;
  std::string why;
  if (!first_request(c, &r, &why)) return fail(why);
  const uint32_t p0 = r.psn;
  const uint64_t t0 = r.tsc;
  const double t = c.peer_timeout_ms;
  const double quiet = std::max(4 * t, 1000.0);
  const double cap = (c.retry_cnt + 1) * 4 * t + 2000;
  uint64_t last = t0, first_resend = 0;
  uint32_t resends = 0;
  for (RxFrame f; c.link.recv(&f, quiet);) {
    last = f.tsc;
    if (f.psn == p0) {
      if (resends++ == 0) first_resend = f.tsc;
    }
    if (ms_between(t0, f.tsc) > cap)
      return fail("still sending " + ms_text(ms_between(t0, f.tsc)) +
                  " after its first request without one ACK: it never gives up (retry count " +
                  std::to_string(c.retry_cnt) + ", T " + ms_text(t) + ")");
  }
  const double gave_up = ms_between(t0, last);
  const std::string seen = "first retransmission of PSN " + std::to_string(p0) + " after " +
                           ms_text(ms_between(t0, first_resend)) + ", " + std::to_string(resends) +
                           " in all, silent from " + ms_text(gave_up);
  if (resends == 0)
    return fail("never retransmitted its unacknowledged request; silent from " + ms_text(gave_up));
  // §9.7.6.1.3: each timeout is at least T; the QP fails after retry_cnt of them. Half that is
  // the least a conforming requester can take (urnic's adaptive backoff takes longer).
  if (gave_up < c.retry_cnt * t / 2)
    return fail(seen + ": gave up before " + std::to_string(c.retry_cnt) + " timeouts of T (" +
                ms_text(t) + ")");
  return pass(seen + " (T " + ms_text(t) + ", retry count " + std::to_string(c.retry_cnt) + ")");
}

// ---- NAK PSN sequence error --------------------------------------------------------------------

Outcome nak_resend(Ctx& c) {
  RxFrame r;
  std::string why;
  if (!first_request(c, &r, &why)) return fail(why);
  const uint32_t p0 = r.psn;
  // Wait for three requests, ACK the first two (coalesced) and NAK the third as out of
  // sequence: the requester must resend from the third, never the acknowledged two.
  uint32_t hi = 0, msn = ends_message(r.opcode) ? 1 : 0;
  RxFrame third;
  if (!await(c, p0, 2000, &hi, &third, [&](const RxFrame& f, uint32_t off, bool rewind) {
        if (!rewind && off == 1 && ends_message(f.opcode)) ++msn;
        return !rewind && off == 2;
      }))
    return fail("fewer than three requests came");
  c.link.send(aeth_frame(opc::kAcknowledge, psn_add(p0, 1), kAckUnlimited, msn), {});
  c.link.send(aeth_frame(opc::kAcknowledge, psn_add(p0, 2), kNakPsnSeq, msn), {});
  const uint64_t nak_at = rte_rdtsc();
  RxFrame again;
  if (!await(c, p0, 4 * c.peer_timeout_ms + 500, &hi, &again,
             [](const RxFrame&, uint32_t, bool rewind) { return rewind; }))
    return fail("no request resent after a NAK PSN sequence error for PSN " +
                std::to_string(psn_add(p0, 2)));
  const double after = ms_between(nak_at, again.tsc);
  const uint32_t off = (again.psn - p0) & 0xFFFFFF;
  if (off != 2)
    return fail("resent PSN +" + std::to_string(off) + " " + ms_text(after) +
                " after the NAK for PSN +2 (+0 and +1 were acknowledged)");
  return pass("resent from the NAKed PSN +2 " + ms_text(after) +
              " after the NAK: " + describe(again));
}

// ---- RNR NAK --------------------------------------------------------------------------------

Outcome rnr_wait(Ctx& c) {
  RxFrame r;
  std::string why;
  if (!first_request(c, &r, &why)) return fail(why);
  const uint32_t p0 = r.psn;
  constexpr uint8_t kCode = 24;  // 40.96 ms (IBTA table 45)
  constexpr double kWaitMs = 40.96;
  c.link.send(aeth_frame(opc::kAcknowledge, p0, kRnrNak | kCode, 0), {});
  const uint64_t nak_at = rte_rdtsc();
  uint32_t hi = 0;
  RxFrame again;
  // A quiet window well past the RNR timer and the peer's T: a paused peer on a loaded host
  // is late, not wrong.
  if (!await(c, p0, 4 * c.peer_timeout_ms + 3000, &hi, &again,
             [](const RxFrame&, uint32_t, bool rewind) { return rewind; }))
    return fail("the request RNR NAKed was never resent");
  const double after = ms_between(nak_at, again.tsc);
  if (again.psn != p0)
    return fail("resent PSN " + std::to_string(again.psn) + ", not the RNR NAKed " +
                std::to_string(p0));
  // §9.7.5.2.8: the requester waits at least the timer the RNR NAK carries. 10 % slack for
  // timer granularity on the peer.
  if (after < 0.9 * kWaitMs)
    return fail("resent " + ms_text(after) + " after an RNR NAK with timer code 24 (" +
                ms_text(kWaitMs) + ")");
  return pass("resent PSN " + std::to_string(p0) + " " + ms_text(after) +
              " after an RNR NAK with timer code 24 (" + ms_text(kWaitMs) + ")");
}

// ---- CNP reaction ---------------------------------------------------------------------------

Outcome cnp_reaction(Ctx& c) {
  RxFrame r;
  std::string why;
  if (!first_request(c, &r, &why)) return fail(why);
  AckingResponder resp{c, r.psn};
  c.link.unread(r);
  // Payload taken in order during the last 300 ms of a 600 ms run.
  auto measure = [&](double cnp_us) {
    const uint64_t from = rte_rdtsc() + static_cast<uint64_t>(0.3 * rte_get_tsc_hz());
    uint64_t bytes = 0;
    resp.run(600, cnp_us, 0, 600, [&](uint64_t tsc, size_t n) {
      if (tsc >= from) bytes += n;
    });
    return static_cast<double>(bytes) / 0.3;
  };
  const double before = measure(0);
  const double during = measure(50);
  char b[200];
  std::snprintf(b, sizeof(b),
                "%.1f MB/s acknowledged before, %.1f MB/s under a CNP per 50 us of requests",
                before / 1e6, during / 1e6);
  if (before <= 0) return fail(std::string(b) + ": no traffic to judge");
  // Annex A17.9: a reaction point cuts its rate on CNPs. Honouring CNPs is what DCQCN adds; a
  // requester without congestion control is not in breach of the transport rules.
  if (during <= 0.5 * before)
    return pass(std::string(b) + " (" + std::to_string(resp.cnps) + " CNPs): the rate fell");
  return {Verdict::kNotApplicable,
          std::string(b) + ": no clear reaction (no DCQCN reaction point on the peer?)"};
}

}  // namespace

std::vector<Scenario> requester_scenarios() {
  return {
      {"requester_retry_exhausted",
       "9.7.6.1.3: unacknowledged requests are resent after T, and the QP fails after retry_cnt",
       Needs::kPeerClient, retry_exhausted},
      {"requester_nak_resend",
       "9.7.5.2.1: after a NAK PSN sequence error the requester resends from the NAKed PSN",
       Needs::kPeerClient, nak_resend},
      {"requester_rnr_wait", "9.7.5.2.8: after an RNR NAK the requester waits at least its timer",
       Needs::kPeerClient, rnr_wait},
      {"cnp_reaction", "A17.9: a DCQCN reaction point cuts its rate on CNPs (where implemented)",
       Needs::kPeerClient, cnp_reaction},
  };
}

}  // namespace urnic::conform
