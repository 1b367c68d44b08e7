// urnic-conform's connection manager scenarios (issue 44 item 4): the peer's IB CM as rdma_cm
// speaks it (IBTA vol. 1 chapter 12, Annex A11), driven with hand-made MADs on QP1 from our raw
// link. The peer runs any rdma_cm listener that accepts every request on the -p port (cmtime's
// server, urnic-perf --connect-storm's server). Every connection claims a QP number of its own
// that the peer never saw (a stale one would be refused), and none carries data: each scenario
// judges the CM's messages only, then disconnects what it connected.
#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <variant>

#include "bench/conform/craft.h"
#include "bench/conform/scenarios.h"
#include "control/cm/cma.h"
#include "control/cm/mad.h"
#include "dataplane/wire/opcode.h"

namespace urnic::conform {
namespace {

namespace cm = ctl::cm;
using cm::Message;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kGsiQkey = 0x80010000;  // IBTA §13.5.4: QP1's Q_Key
// The answer wait for a CM message: a kernel CM answers from a work queue, slower than a
// responder's ACK.
double cm_wait(const Ctx& c) { return std::max(1000.0, 4 * c.wait_ms); }

cm::Gid gid_of(uint32_t ip) {
  cm::Gid g{};
  g[10] = g[11] = 0xff;
  g[12] = static_cast<uint8_t>(ip >> 24);
  g[13] = static_cast<uint8_t>(ip >> 16);
  g[14] = static_cast<uint8_t>(ip >> 8);
  g[15] = static_cast<uint8_t>(ip);
  return g;
}

const char* name_of(const Message& m) {
  static constexpr const char* kNames[] = {"REQ",  "MRA",  "REJ",      "REP",     "RTU",
                                           "DREQ", "DREP", "SIDR_REQ", "SIDR_REP"};
  return kNames[m.body.index()];
}

// One connection's side of the CM exchange: our IDs, and what the peer said.
struct CmConn {
  Ctx& c;
  uint32_t local_id;
  uint32_t qpn;  // the QP number we claim
  uint64_t tid;
  uint32_t remote_id = 0;   // the peer's, from its REP
  uint32_t remote_qpn = 0;  // the peer's QP
  std::string log;          // what was seen, for the verdict
  Message last;             // the answer request() got

  explicit CmConn(Ctx& ctx)
      : c(ctx),
        local_id(0x55000000u + ++ctx.cm_seq),
        qpn(0x600000u | (ctx.cm_seq & 0xFFFFF)),
        tid(0xC0F0'0000'0000ull | ctx.cm_seq) {}

  bool send(const Message& m) {
    wire::TransportHeaders th = hdr(wire::opc::kUdSendOnly, c.cm_seq, false);
    th.deth.qkey = wire::Be32::of(kGsiQkey);
    wire::Deth::SrcQp::set(th.deth, 1u);
    const auto mad = cm::encode(m);
    return c.link.send(th, mad);
  }

  cm::Req req(uint16_t port) const {
    cm::Req r;
    r.local_comm_id = local_id;
    r.service_id = cm::service_id_for(port);
    r.local_ca_guid = 0x0200'00ff'fe00'0001ull;
    r.local_qpn = qpn;
    r.responder_resources = 1;
    r.initiator_depth = 1;
    r.remote_cm_response_timeout = 18;  // 1.07 s: how long we let the peer take to answer
    r.starting_psn = 0x1000;
    r.local_cm_response_timeout = 18;  // how long we may take to answer its REP
    r.retry_count = 7;
    r.path_mtu = cm::mtu_code(1024);
    r.rnr_retry_count = 7;
    r.max_cm_retries = 15;
    r.primary.local_gid = gid_of(c.own_ip);
    r.primary.remote_gid = gid_of(c.peer_ip);
    r.primary.hop_limit = 1;
    r.primary.subnet_local = true;
    r.primary.local_ack_timeout = 14;
    cm::CmaHdr h;
    h.src_port = 0xC000 | (c.cm_seq & 0x3FFF);
    h.src = gid_of(c.own_ip);
    h.dst = gid_of(c.peer_ip);
    cm::encode(h, std::span(r.private_data).first<cm::kCmaHdrSize>());
    return r;
  }

  // The next CM message for this connection (its remote comm ID ours) within `ms`, decoded;
  // anything else on QP1 is skipped.
  bool recv(Message* m, double ms) {
    const auto end = Clock::now() + std::chrono::duration<double, std::milli>(ms);
    for (;;) {
      const double left = std::chrono::duration<double, std::milli>(end - Clock::now()).count();
      if (left <= 0) return false;
      RxFrame r;
      if (!c.link.recv(&r, left)) return false;
      if (r.opcode != wire::opc::kUdSendOnly || cm::decode(r.payload, m) != cm::MadError::kOk)
        continue;
      if (remote_of(*m) == local_id) return true;
    }
  }

  static uint32_t remote_of(const Message& m) {
    return std::visit(
        [](const auto& b) -> uint32_t {
          if constexpr (requires { b.remote_comm_id; })
            return b.remote_comm_id;
          else if constexpr (requires { b.request_id; })
            return b.request_id;
          else
            return 0;
        },
        m.body);
  }

  // REQ, then the REP; false (with the reason in `log`) on anything else.
  // A peer that restarts its listener after a failed handshake (rping -P in a loop) refuses
  // with REJ 8 meanwhile: with `wait_listener`, the REQ is sent again (a new comm ID: the REJ
  // ended the old one), every 200 ms for up to --connect-retry seconds.
  bool request(cm::Req r, cm::Rep* rep, bool wait_listener = true) {
    const auto until = Clock::now() + std::chrono::duration<double>(c.cm_retry_s);
    for (;;) {
      send(Message{tid, 0, r});
      if (!recv(&last, cm_wait(c))) return (log = "no answer to a REQ"), false;
      const auto* rej = std::get_if<cm::Rej>(&last.body);
      if (!wait_listener || rej == nullptr || rej->reason != cm::RejReason::kInvalidServiceId ||
          Clock::now() >= until)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // paces the retries
      r.local_comm_id = local_id = 0x55000000u + ++c.cm_seq;
      tid += 0x10;
    }
    if (!std::holds_alternative<cm::Rep>(last.body)) {
      log = std::string("a REQ was answered with a ") + name_of(last);
      if (const auto* rej = std::get_if<cm::Rej>(&last.body))
        log += " (reason " + std::to_string(static_cast<unsigned>(rej->reason)) + ", " +
               cm::to_string(rej->reason) + ")";
      return false;
    }
    *rep = std::get<cm::Rep>(last.body);
    remote_id = rep->local_comm_id;
    remote_qpn = rep->local_qpn;
    return true;
  }
  void rtu() { send(Message{tid + 1, 0, cm::Rtu{local_id, remote_id, {}}}); }
  void dreq() { send(Message{tid + 2, 0, cm::Dreq{local_id, remote_id, remote_qpn, {}}}); }
  // DREQ and the DREP: the connection is gone at the peer too.
  bool disconnect(std::string* seen) {
    dreq();
    Message m;
    const bool ok = recv_kind<cm::Drep>(&m);
    if (!ok) *seen += "; no DREP to our DREQ";
    return ok;
  }
  template <class T>
  bool recv_kind(Message* m) {
    while (recv(m, cm_wait(c)))
      if (std::holds_alternative<T>(m->body)) return true;
    return false;
  }
  // Connected: REQ, REP, RTU.
  bool connect(cm::Rep* rep, uint16_t port) {
    if (!request(req(port), rep)) return false;
    rtu();
    return true;
  }
};

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "%#x", v);
  return b;
}

std::string rep_line(const cm::Rep& r) {
  return "REP: comm ID " + hex(r.local_comm_id) + ", QPN " + hex(r.local_qpn) + ", PSN " +
         hex(r.starting_psn) + ", resources " + std::to_string(r.responder_resources) + "/" +
         std::to_string(r.initiator_depth);
}

// Every message of this connection within `ms`, until `quiet_ms` pass without one.
std::vector<Message> gather(CmConn& k, double ms, double quiet_ms) {
  std::vector<Message> out;
  const auto end = Clock::now() + std::chrono::duration<double, std::milli>(ms);
  Message m;
  while (Clock::now() < end) {
    const double left = std::chrono::duration<double, std::milli>(end - Clock::now()).count();
    if (!k.recv(&m, std::min(left, quiet_ms))) break;
    out.push_back(m);
  }
  return out;
}
size_t count_of(const std::vector<Message>& v, size_t index) {
  size_t n = 0;
  for (const Message& m : v) n += m.body.index() == index;
  return n;
}
constexpr size_t kRejIndex = 2, kRepIndex = 3, kDrepIndex = 6;  // in Message::body

// Ends a connection whatever state the peer left it in: our DREQ (its DREP, or nothing if it
// forgot the connection already).
void tidy(CmConn& k) {
  k.dreq();
  (void)gather(k, 500, 200);
}

// ---- Scenarios --------------------------------------------------------------------------------

Outcome req_rep(Ctx& c) {
  CmConn k(c);
  cm::Rep rep;
  if (!k.request(k.req(c.cm_port), &rep)) return fail(k.log);
  std::string seen = rep_line(rep), bad;
  if (rep.local_comm_id == 0) bad += "; its comm ID is 0";
  if (rep.local_qpn < 2) bad += "; QPN " + hex(rep.local_qpn) + " is not a QP of a consumer";
  if (rep.responder_resources > 1 || rep.initiator_depth > 1)
    bad += "; more read resources than our REQ offered (1 / 1)";
  k.rtu();
  std::string tail;
  const bool down = k.disconnect(&tail);
  if (!bad.empty()) return fail(seen + bad);
  return down ? pass(seen + "; RTU; our DREQ answered by DREP") : fail(seen + tail);
}

Outcome no_listener(Ctx& c) {
  CmConn k(c);
  const uint16_t port = c.cm_port == 65535 ? 65534 : static_cast<uint16_t>(c.cm_port + 1);
  cm::Rep rep;
  if (k.request(k.req(port), &rep, false)) {
    tidy(k);
    return fail("a REQ for port " + std::to_string(port) + " (nobody listens) got a REP");
  }
  const auto* rej = std::get_if<cm::Rej>(&k.last.body);
  if (rej == nullptr) return fail(k.log);
  const std::string seen = "REJ reason " + std::to_string(static_cast<unsigned>(rej->reason)) +
                           " (" + cm::to_string(rej->reason) + "), message rejected " +
                           std::to_string(static_cast<unsigned>(rej->message_rejected));
  if (rej->reason != cm::RejReason::kInvalidServiceId ||
      rej->message_rejected != cm::MsgResponse::kReq)
    return fail(seen + "; expected reason 8 (invalid service ID) for the REQ");
  return pass(seen);
}

// The REP again when no RTU comes (its retry on our LocalCMResponseTimeout, 268 ms here).
Outcome rep_repeated(Ctx& c) {
  CmConn k(c);
  cm::Req r = k.req(c.cm_port);
  r.local_cm_response_timeout = 16;
  cm::Rep rep;
  if (!k.request(r, &rep)) return fail(k.log);
  Message m;
  const bool again = k.recv_kind<cm::Rep>(&m) || k.recv_kind<cm::Rep>(&m);
  const cm::Rep* second = again ? std::get_if<cm::Rep>(&m.body) : nullptr;
  k.rtu();
  std::string tail;
  (void)k.disconnect(&tail);
  if (second == nullptr) return fail(rep_line(rep) + "; no RTU sent, and the REP never came again");
  if (second->local_comm_id != rep.local_comm_id || second->local_qpn != rep.local_qpn ||
      second->starting_psn != rep.starting_psn)
    return fail("the REP came again but changed: " + rep_line(*second));
  return pass(rep_line(rep) + "; without an RTU it came again, unchanged");
}

// A duplicate REQ while the REP waits for its RTU (the REQ's retry, as the peer sees it): known
// by its comm ID, so no second connection and no REJ; the REP again or nothing (Linux drops it:
// its REP's own retry answers), and the first connection completes.
Outcome dup_req(Ctx& c) {
  CmConn k(c);
  cm::Req r = k.req(c.cm_port);
  r.local_cm_response_timeout = 21;  // its own REP retry 8.6 s away
  cm::Rep rep;
  if (!k.request(r, &rep)) return fail(k.log);
  r.local_comm_id = k.local_id;  // as the retried REQ had it
  k.send(Message{k.tid, 0, r});
  const auto got = gather(k, cm_wait(c), cm_wait(c));
  std::string bad;
  for (const Message& m : got) {
    const auto* again = std::get_if<cm::Rep>(&m.body);
    if (again == nullptr)
      bad += std::string("; it answered with a ") + name_of(m);
    else if (again->local_comm_id != rep.local_comm_id || again->local_qpn != rep.local_qpn)
      bad += "; a second connection: " + rep_line(*again);
  }
  k.rtu();
  std::string tail;
  const bool down = k.disconnect(&tail);
  const std::string seen =
      rep_line(rep) + "; the same REQ again: " + (got.empty() ? "dropped" : "the REP again");
  if (!bad.empty()) return fail(seen + bad);
  return down ? pass(seen + "; RTU, DREQ / DREP") : fail(seen + tail);
}

// Our REQ allows 2 CM retries: the REP is sent at most 3 times (LocalCMResponseTimeout 15:
// 134 ms apart), then given up.
Outcome max_cm_retries(Ctx& c) {
  CmConn k(c);
  cm::Req r = k.req(c.cm_port);
  r.local_cm_response_timeout = 15;
  r.max_cm_retries = 2;
  cm::Rep rep;
  if (!k.request(r, &rep)) return fail(k.log);
  const auto later = gather(k, 6000, 2500);
  const size_t reps = 1 + count_of(later, kRepIndex);
  const bool rej = count_of(later, kRejIndex) != 0;
  tidy(k);
  const std::string seen = "the REP sent " + std::to_string(reps) + " times without an RTU" +
                           (rej ? ", then a REJ" : "");
  return reps <= 3 ? pass(seen) : fail(seen + "; our REQ allowed 2 retries (3 sends)");
}

// An MRA for the REP: the peer waits the MRA's service timeout (8.6 s) before sending the REP
// again, instead of its 134 ms.
Outcome mra_holds_rep(Ctx& c) {
  CmConn k(c);
  cm::Req r = k.req(c.cm_port);
  r.local_cm_response_timeout = 15;
  cm::Rep rep;
  if (!k.request(r, &rep)) return fail(k.log);
  cm::Mra mra;
  mra.local_comm_id = k.local_id;
  mra.remote_comm_id = k.remote_id;
  mra.message_mraed = cm::MsgResponse::kRep;
  mra.service_timeout = 21;
  k.send(Message{k.tid + 3, 0, mra});
  const auto later = gather(k, 1500, 1500);
  const size_t reps = count_of(later, kRepIndex);
  k.rtu();
  std::string tail;
  const bool down = k.disconnect(&tail);
  if (reps != 0)
    return fail("after our MRA (service timeout 8.6 s) the REP still came " + std::to_string(reps) +
                " times in 1.5 s");
  return down ? pass("no REP for 1.5 s after our MRA; RTU then DREQ / DREP")
              : fail("no REP after our MRA, but then" + tail);
}

Outcome dreq_drep(Ctx& c) {
  CmConn k(c);
  cm::Rep rep;
  if (!k.connect(&rep, c.cm_port)) return fail(k.log);
  k.dreq();
  Message m;
  if (!k.recv_kind<cm::Drep>(&m)) return fail("connected (" + rep_line(rep) + "); no DREP");
  const auto& d = std::get<cm::Drep>(m.body);
  if (d.local_comm_id != rep.local_comm_id)
    return fail("DREP with comm ID " + hex(d.local_comm_id) + ", not the REP's " +
                hex(rep.local_comm_id));
  return pass("connected; our DREQ answered by a DREP with both comm IDs");
}

// A DREQ again after the DREP (our DREP lost, as the peer sees it): the DREP again.
Outcome dreq_repeated(Ctx& c) {
  CmConn k(c);
  cm::Rep rep;
  if (!k.connect(&rep, c.cm_port)) return fail(k.log);
  std::string seen;
  if (!k.disconnect(&seen)) return fail("connected" + seen);
  k.dreq();
  Message m;
  return k.recv_kind<cm::Drep>(&m) ? pass("DREQ, DREP; the same DREQ again: the DREP again")
                                   : fail("DREQ, DREP; the same DREQ again got no DREP");
}

// A DREQ naming another QP than the connection's: not this connection's (dropped).
Outcome dreq_wrong_qpn(Ctx& c) {
  CmConn k(c);
  cm::Rep rep;
  if (!k.connect(&rep, c.cm_port)) return fail(k.log);
  k.send(
      Message{k.tid + 2, 0, cm::Dreq{k.local_id, k.remote_id, (k.remote_qpn + 1) & 0xFFFFFF, {}}});
  const auto got = gather(k, 2 * c.wait_ms, 2 * c.wait_ms);
  std::string tail;
  const bool down = k.disconnect(&tail);
  if (count_of(got, kDrepIndex) != 0)
    return fail("a DREQ naming QPN " + hex((k.remote_qpn + 1) & 0xFFFFFF) + " (not " +
                hex(k.remote_qpn) + ") was answered with a DREP");
  return down ? pass("a DREQ naming another QP was ignored; the right one got its DREP")
              : fail("a DREQ naming another QP was ignored; then" + tail);
}

// A DREQ while the REP still waits for its RTU (the RTU lost, the active side already tearing
// down): the connection ends with a DREP, not a REP retry.
Outcome dreq_before_rtu(Ctx& c) {
  CmConn k(c);
  cm::Rep rep;
  if (!k.request(k.req(c.cm_port), &rep)) return fail(k.log);
  k.dreq();
  Message m;
  return k.recv_kind<cm::Drep>(&m) ? pass(rep_line(rep) + "; no RTU; our DREQ answered by DREP")
                                   : fail(rep_line(rep) + "; no RTU; our DREQ got no DREP");
}

// A DREQ naming a connection the peer does not know (its DREP lost long ago, as the sender sees
// it): a DREP all the same, so that the sender can finish.
Outcome dreq_unknown(Ctx& c) {
  CmConn k(c);
  k.remote_id = 0x0BAD0000u | (c.cm_seq & 0xFFFF);
  k.remote_qpn = 0x7FFF00u | (c.cm_seq & 0xFF);
  k.dreq();
  Message m;
  if (!k.recv_kind<cm::Drep>(&m)) return fail("a DREQ for no connection got no DREP");
  const auto& d = std::get<cm::Drep>(m.body);
  if (d.local_comm_id != k.remote_id)
    return fail("DREP naming comm ID " + hex(d.local_comm_id) + ", not the DREQ's " +
                hex(k.remote_id));
  return pass("a DREQ for no connection answered by a DREP with the DREQ's comm IDs");
}

// A REQ from a QP that another connection of ours still uses: stale, refused (reason 10).
Outcome stale_qpn(Ctx& c) {
  CmConn a(c);
  cm::Rep rep;
  if (!a.connect(&rep, c.cm_port)) return fail(a.log);
  CmConn b(c);
  b.qpn = a.qpn;
  cm::Rep rep2;
  const bool accepted = b.request(b.req(c.cm_port), &rep2);
  if (accepted) tidy(b);
  tidy(a);  // the peer may have sent a DREQ for it already: our DREQ then finds it gone
  if (accepted) return fail("a second REQ from QPN " + hex(a.qpn) + " (still connected) got a REP");
  const auto* rej = std::get_if<cm::Rej>(&b.last.body);
  if (rej == nullptr) return fail(b.log);
  const std::string seen = "REJ reason " + std::to_string(static_cast<unsigned>(rej->reason)) +
                           " (" + cm::to_string(rej->reason) + ")";
  return rej->reason == cm::RejReason::kStaleConn ? pass(seen)
                                                  : fail(seen + "; expected 10 (stale connection)");
}

// Our REJ of its REP ends the handshake: no more REPs (it would repeat every 134 ms).
Outcome rej_ends_rep(Ctx& c) {
  CmConn k(c);
  cm::Req r = k.req(c.cm_port);
  r.local_cm_response_timeout = 15;
  cm::Rep rep;
  if (!k.request(r, &rep)) return fail(k.log);
  cm::Rej rej;
  rej.local_comm_id = k.local_id;
  rej.remote_comm_id = k.remote_id;
  rej.message_rejected = cm::MsgResponse::kRep;
  rej.reason = cm::RejReason::kConsumerDefined;
  k.send(Message{k.tid + 3, 0, rej});
  const auto later = gather(k, 1500, 1500);
  const size_t reps = count_of(later, kRepIndex);
  return reps == 0 ? pass("REP; our REJ; no REP for 1.5 s")
                   : fail("after our REJ of its REP the REP still came " + std::to_string(reps) +
                          " times");
}

}  // namespace

// The two that leave the peer's accept failing come last: some listeners exit on that (rping).
std::vector<Scenario> cm_scenarios() {
  return {
      {"cm_req_rep", "12.6.8 / 12.9.5: a REQ for a listened port is answered with a REP",
       Needs::kCm, req_rep},
      {"cm_no_listener", "12.6.7.2 (table 195) / A11: nobody on the port: REJ 8", Needs::kCm,
       no_listener},
      {"cm_rep_repeated", "12.9.6: no RTU within the REQ's CM response timeout: the REP again",
       Needs::kCm, rep_repeated},
      {"cm_duplicate_req", "12.9.6: a duplicate REQ is known by its comm ID: no 2nd connection",
       Needs::kCm, dup_req},
      {"cm_mra_holds_rep", "12.6.6: an MRA defers the REP's retry by its service timeout",
       Needs::kCm, mra_holds_rep},
      {"cm_dreq_drep", "12.6.10 / 12.6.11: a DREQ is answered with a DREP", Needs::kCm, dreq_drep},
      {"cm_dreq_repeated", "12.9.7: a DREQ in TimeWait gets the DREP again", Needs::kCm,
       dreq_repeated},
      {"cm_dreq_wrong_qpn", "12.6.10: a DREQ naming another QP is not this connection's",
       Needs::kCm, dreq_wrong_qpn},
      {"cm_dreq_before_rtu", "12.9.6: a DREQ while the REP waits for its RTU gets a DREP",
       Needs::kCm, dreq_before_rtu},
      {"cm_dreq_unknown", "12.9.7: a DREQ for no connection still gets a DREP (the sender ends)",
       Needs::kCm, dreq_unknown},
      {"cm_stale_qpn", "12.9.8.3.1: a REQ from a QP still connected is stale: REJ 10", Needs::kCm,
       stale_qpn},
      {"cm_max_cm_retries", "12.7.27: the REP is retried no more than the REQ's Max CM Retries",
       Needs::kCm, max_cm_retries},
      {"cm_rej_ends_rep", "12.6.7: a REJ of the REP ends the handshake: no more REPs", Needs::kCm,
       rej_ends_rep},
  };
}

}  // namespace urnic::conform
