// Crafting request frames and judging the answers, shared by urnic-conform's scenarios
// (scenarios.cc: the peer as responder; requester.cc: the peer as requester).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/conform/scenarios.h"
#include "dataplane/wire/frame.h"

namespace urnic::conform {

// AETH syndromes (IBTA §9.3.5, table 43): the top three bits say ACK (000), RNR NAK (001) or
// NAK (011); a NAK's low five bits its code.
inline constexpr uint8_t kNakPsnSeq = 0x60, kNakInvalid = 0x61, kNakAccess = 0x62;
inline constexpr uint8_t kRnrNak = 0x20, kAckUnlimited = 0x1F;

uint32_t psn_add(uint32_t p, int n);
// n bytes of a pattern that `seed` tells apart.
std::vector<uint8_t> bytes(size_t n, uint8_t seed);
// BTH with opcode, PSN and AckReq; with a RETH; an ACKNOWLEDGE (or any opcode) with an AETH.
wire::TransportHeaders hdr(uint8_t opcode, uint32_t psn, bool ack_req);
wire::TransportHeaders with_reth(uint8_t opcode, uint32_t psn, bool ack_req, uint64_t va,
                                 uint32_t rkey, uint32_t len);
wire::TransportHeaders aeth_frame(uint8_t opcode, uint32_t psn, uint8_t syndrome, uint32_t msn);
// One line saying what a frame is (opcode, PSN, AETH, payload, ICRC).
std::string describe(const RxFrame& r);

Outcome pass(std::string s);
Outcome fail(std::string s);
bool is_ack(const RxFrame& r);
bool is_nak(const RxFrame& r, uint8_t syndrome);

}  // namespace urnic::conform
