// Re-kicking the af_packet TX ring after the kernel cut a kick short (issue 18, item 3).
//
// net_af_packet copies each burst into the socket's PACKET_TX_RING and then kicks the kernel
// once with sendto(fd, NULL, 0, MSG_DONTWAIT). The kernel sends ring frames in order and stops at
// the first one the device layer refuses (a qdisc that drops it with qdisc_bypass=0, a full
// qdisc, no socket buffer space): the call fails with ENOBUFS or EAGAIN, and that frame and
// every frame behind it stay in the ring marked "send request" until the next kick. The PMD
// counts the whole burst as sent (DPDK 22.11 eth_af_packet_tx ignores ENOBUFS/EAGAIN), and it
// kicks only when it is given frames. So one refused frame parked the rest of its burst until
// the requester's next transmission - a local ACK timeout later, since the peer saw no gap to
// NAK: a kernel drop cost a timeout where the same drop in a forwarding hop costs one NAK round
// trip, and at 5 % QPs ran out of retries (issue 18, item 3).
//
// TxKick finds the PMD's packet sockets (the only af_packet sockets of this process bound to
// the port's interface with TPACKET_V2 rings, in creation order = queue order) when the port
// opens, and the engine kicks again from steps that had nothing to send, until a kick returns
// without an error: the parked frames leave one step later, and the lost one is a plain loss.
#pragma once

#include <cstdint>
#include <vector>

namespace urnic::dp {

class TxKick {
 public:
  // Finds the kick sockets of `port_id` when its driver is net_af_packet with `queues` queues;
  // otherwise (or when they cannot be identified) kicking stays off. Control side.
  void attach(uint16_t port_id, uint16_t queues);
  void detach() noexcept {
    fds_.clear();
    pending_.clear();
  }
  bool active() const noexcept { return !fds_.empty(); }

  // Per-packet path, owning engine only. A burst went to the PMD on queue `q`.
  void note_sent(uint16_t q) noexcept {
    if (q < pending_.size()) pending_[q] = 1;
  }
  // On a step with nothing to send: kicks queue `q` again while an earlier kick may have left
  // frames in the ring. Returns whether a kick was made.
  bool kick_if_pending(uint16_t q) noexcept;

 private:
  std::vector<int> fds_;
  std::vector<uint8_t> pending_;
};

}  // namespace urnic::dp
