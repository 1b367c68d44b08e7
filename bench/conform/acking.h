// A responder played by hand for the peer's write_bw client (the scenarios with the peer as
// requester: requester.cc, cc_scenarios.cc): it takes the peer's WRITEs in order, ACKs them,
// NAKs a gap once, and sends CNPs at a set pace while asked to - the notification point of a
// congested path, without a switch.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "bench/conform/scenarios.h"

namespace urnic::conform {

// PSN order: RC requests (ending a message) and the opcodes that end one.
bool ends_message(uint8_t opcode);

struct AckingResponder {
  Ctx& c;
  uint32_t epsn, msn = 0;
  uint64_t cnps = 0;
  bool naked = false;  // a NAK PSN sequence error was sent for naked_psn
  uint32_t naked_psn = 0;

  // For `ms` milliseconds: ACKs every AckReq and every 16th request, and from `cnp_from_ms` to
  // `cnp_to_ms` into the run a CNP at most every `cnp_us` microseconds (0: none), sent when a
  // request arrives. `in_order(tsc, bytes)` hears of each request taken in order (when it
  // arrived, its payload); `cnp_tsc`, if given, gets when each CNP left.
  void run(double ms, double cnp_us, double cnp_from_ms, double cnp_to_ms,
           const std::function<void(uint64_t, size_t)>& in_order,
           std::vector<uint64_t>* cnp_tsc = nullptr);
};

}  // namespace urnic::conform
