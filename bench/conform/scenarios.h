// urnic-conform's scenarios: each one drives a peer's RC responder into one corner of IBTA
// volume 1 chapter 9 (and annex A17) with hand-crafted frames on a freshly connected QP, and
// says whether the peer answered as the rule it cites requires.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench/conform/link.h"
#include "urnic/congestion.h"

namespace urnic::conform {

// The peer's QP and memory, from its perftest connection record.
struct PeerQp {
  uint32_t qpn = 0;
  uint32_t rkey = 0;
  uint64_t vaddr = 0;
  uint32_t mtu = 1024;  // the path MTU both sides agreed
};

enum class Verdict : uint8_t { kPass, kFail, kNotApplicable };
const char* to_string(Verdict v);

// The peer's rate over time beside the rate DCQCN gives it (the congestion scenarios), for the
// report's plot and the JSON: bin i covers [i, i + 1) * bin_ms of the curve's time.
struct RateCurve {
  double bin_ms = 1;
  std::vector<double> measured_mbps, expected_mbps;  // the same length
  double cnp_from_ms = 0, cnp_to_ms = 0;             // when we sent CNPs
  uint64_t cnps = 0;
  bool empty() const { return measured_mbps.empty(); }
};

struct Outcome {
  Outcome() = default;
  Outcome(Verdict v, std::string s) : verdict(v), seen(std::move(s)) {}
  Verdict verdict = Verdict::kFail;
  std::string seen;  // what the peer did (or did not do)
  RateCurve curve;   // the congestion scenarios' (empty for the others)
};

// What a scenario works with: the link, the peer's QP, our next PSN (the peer's ePSN) and the
// MSN the peer should report next.
struct Ctx {
  Link& link;
  PeerQp peer;
  uint32_t psn = 0;
  uint32_t msn = 0;
  double wait_ms = 300;    // how long an answer may take; silence is judged after 2x this
  uint8_t rnr_timer = 12;  // the peer QP's minimum RNR timer code (perftest's and urnic-perf's)
  // The peer as requester: the PSN it announced (its first request's), its local ACK timeout
  // (4.096 us * 2^timeout, in ms) and retry count.
  uint32_t peer_psn = 0;
  double peer_timeout_ms = 4.096e-3 * (1 << 14);
  uint32_t retry_cnt = 7;
  // The CM scenarios (cm_scenarios.cc): our address and the peer's (host order), the port its
  // rdma_cm listener is on, and a counter that makes each connection's IDs and QPN new.
  uint32_t own_ip = 0, peer_ip = 0;
  uint16_t cm_port = 0;
  uint32_t cm_seq = 0;
  double cm_retry_s = 0;  // how long a REQ refused with REJ 8 (no listener yet) is retried
  uint32_t own_qpn = 0;   // the UD scenarios: the QP number we claim (DETH source QP)
  // The congestion scenarios: whether the peer claims DCQCN (--dcqcn), with which parameters,
  // and its line rate (the rate an unpaced QP starts from, Mb/s).
  bool dcqcn_claimed = false;
  DcqcnConfig dcqcn{};
  double peer_max_mbps = 10'000;
};

// Which perftest server the scenario needs on the other side (what its MR allows), a perftest
// write_bw client (the peer as requester, urnic-conform as its server), or an rdma_cm listener
// that accepts every connection (the CM scenarios), or an ibv_ud_pingpong server serving two
// datagrams (the UD scenarios).
enum class Needs : uint8_t { kWrite, kRead, kAtomic, kPeerClient, kCm, kUd };

struct Scenario {
  const char* name;
  const char* rule;  // the IBTA rule (volume 1 unless said)
  Needs needs;
  Outcome (*run)(Ctx&);
};

const std::vector<Scenario>& scenarios();
// The scenarios with the peer as requester (requester.cc), run after the others.
std::vector<Scenario> requester_scenarios();
// The connection manager's (cm_scenarios.cc), the datagram QP's (ud_scenarios.cc) and
// congestion control's (cc_scenarios.cc).
std::vector<Scenario> cm_scenarios();
std::vector<Scenario> ud_scenarios();
std::vector<Scenario> cc_scenarios();
// "write_bw", "read_bw", "atomic_bw", "write_bw_client", "rdma_cm", "ud_pingpong".
const char* needs_test(Needs n);

}  // namespace urnic::conform
