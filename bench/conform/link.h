// urnic-conform's raw link: a DPDK port driven directly (no adapter, no engine), so that a
// scenario can put any RoCEv2 frame on the wire - a wrong PSN, a bad ICRC, a foreign P_Key -
// and see exactly what the peer answers. It answers ARP for its own address (the peer must
// resolve us to answer) and resolves the peer's MAC; everything else that arrives and is not a
// RoCEv2 frame for our QP is counted and dropped.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dataplane/fault.h"
#include "dataplane/port.h"
#include "dataplane/wire/frame.h"

namespace urnic::conform {

// What the peer sent us, copied out of the mbuf.
struct RxFrame {
  uint8_t opcode = 0;
  uint32_t psn = 0;
  bool ack_req = false;
  bool becn = false;  // BTH BECN (a CNP's)
  uint64_t tsc = 0;   // when it arrived (rte_rdtsc)
  uint32_t dest_qp = 0;
  bool has_aeth = false;
  uint8_t syndrome = 0;
  uint32_t msn = 0;
  uint64_t orig = 0;              // ATOMIC ACKNOWLEDGE
  uint32_t qkey = 0, src_qp = 0;  // a datagram's DETH
  bool has_imm = false;
  uint32_t imm = 0;
  bool icrc_ok = false;
  std::vector<uint8_t> payload;
};

// How a frame deviates from a correct one (what the scenario tests).
struct TxFaults {
  bool corrupt_icrc = false;
  int pkey = -1;      // -1: the default P_Key
  int dest_qp = -1;   // -1: the peer's QP
  bool becn = false;  // BTH BECN (a CNP sets it)
  int ecn = -1;       // the IP ECN field (3: CE, congestion experienced); -1: Not-ECT (0)
};

class Link {
 public:
  Link() = default;
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Probes `devargs` and starts the port; `ipv4` (host order) is ours.
  bool open(const std::string& devargs, uint32_t ipv4, std::string* err);
  // ARP for the peer until it answers (`timeout_s`).
  bool resolve(uint32_t peer_ipv4, double timeout_s, std::string* err);
  // Our QP number and the peer's: the UDP source port and the frames we accept follow them.
  // Frames kept for the QP before are dropped: a peer still retrying on the last scenario's
  // connection must not answer for this one.
  void set_qps(uint32_t ours, uint32_t peers) {
    local_qpn_ = ours;
    peer_qpn_ = peers;
    pending_.clear();
  }

  // Builds and sends one frame: `th` as given (opcode, PSN, AckReq, extension headers), with
  // the P_Key and DestQP filled in unless `f` overrides them; the ICRC computed (or broken).
  bool send(wire::TransportHeaders th, std::span<const uint8_t> payload, const TxFaults& f = {});
  // The next RoCEv2 frame for our QP within `ms` milliseconds (and any CNP naming the peer's own
  // QP: a notification point that addressed its CNP wrongly is a scenario's finding, not noise)
  // within `ms` milliseconds; false on timeout. ARP is
  // answered meanwhile.
  bool recv(RxFrame* out, double ms);
  // Frames sent between hold() and flush() leave together, in bursts of up to 32 (one doorbell
  // each): a train that reaches the peer back to back rather than one system call apart.
  void hold() { holding_ = true; }
  void flush();
  // Puts a frame back to be the next one recv returns.
  void unread(const RxFrame& r) { pending_.insert(pending_.begin(), r); }
  // Every frame for our QP that arrives within `ms` milliseconds.
  std::vector<RxFrame> collect(double ms);
  // Answers ARP and drops everything else (between scenarios, and while the TCP exchange waits).
  void poll();

  // --inject / --inject-rx: urnic's fault injector on the RoCEv2 frames we send (ARP goes
  // untouched, as the engine's control frames do) and on everything we receive. A frame held
  // back for reordering goes out when the link is next idle, so a delay never becomes a loss.
  void set_faults(const FaultConfig& tx, const FaultConfig& rx);
  FaultCounters tx_faults() const { return tx_fault_ ? tx_fault_->counters() : FaultCounters{}; }
  FaultCounters rx_faults() const { return rx_fault_ ? rx_fault_->counters() : FaultCounters{}; }

  uint32_t mtu_bytes() const { return eth_mtu_; }
  // The port's link speed in Mb/s (what the driver reports; 0 when it reports none).
  uint32_t link_mbps() const;
  uint64_t frames_in = 0, frames_out = 0, foreign_in = 0;

 private:
  void handle(rte_mbuf* m, std::vector<RxFrame>* keep);
  void send_arp(uint16_t oper, const wire::MacAddr& dst, const wire::MacAddr& tha, uint32_t tpa);
  bool tx(rte_mbuf* m);
  bool tx_faulty(rte_mbuf* m);

  dp::Port port_;
  wire::MacAddr mac_{}, peer_mac_{};
  uint32_t ip_ = 0, peer_ip_ = 0;
  bool peer_known_ = false;
  uint32_t local_qpn_ = 0, peer_qpn_ = 0;
  uint32_t eth_mtu_ = 1500;
  std::vector<RxFrame> pending_;
  bool holding_ = false;
  std::vector<rte_mbuf*> held_;
  std::unique_ptr<dp::FaultInjector> tx_fault_, rx_fault_;
};

}  // namespace urnic::conform
