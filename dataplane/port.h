// An ethdev port as the dataplane sees it: one RX/TX queue pair per engine, one mempool per
// queue pair (so that engines never share a pool's ring: threads without an lcore have no
// mempool cache), burst RX/TX (house style rule 15). Setup is in port.cc and runs on the control
// side; the burst calls below are the per-packet path and are inline so that they cost what
// rte_eth_rx_burst / rte_eth_tx_burst cost.
//
// Works with any ethdev: net_ring (back-to-back loopback in one process), net_tap and
// net_af_packet (veth/tap in network namespaces), and PCI NICs bound to a DPDK driver.
#pragma once

#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "dataplane/tx_kick.h"
#include "dataplane/wire/headers.h"
#include "urnic/status.h"

namespace urnic::dp {

// Largest RoCEv2 frame: Ethernet 14 + VLAN 4 + IPv6 40 + UDP 8 + BTH 12 + AtomicETH 28 (the
// longest extension header set) + PMTU 4096 + ICRC 4 = 4206 bytes; rounded up for the mbuf.
inline constexpr uint32_t kMaxFrameLen = 4206;
inline constexpr uint16_t kMbufDataRoom = 4352 + RTE_PKTMBUF_HEADROOM;

struct PortConfig {
  uint16_t port_id = 0;
  uint16_t queues = 1;  // one RX and one TX queue per engine
  uint16_t rx_desc = 1024;
  uint16_t tx_desc = 1024;
  // Per-port mbufs: enough for every RX descriptor, every TX descriptor in flight, and the
  // frames engines hold for retransmission, with headroom for the per-lcore caches. Split
  // evenly over the queues' pools (at least 2047 each).
  uint32_t mbufs = 16383;  // 2^n - 1 is the optimum size for rte_mempool
  uint32_t mbuf_cache = 256;
  uint16_t mtu = 0;  // 0: leave the driver's default; else rte_eth_dev_set_mtu (best effort)
  bool promiscuous = true;
};

class Port {
 public:
  Port() = default;
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;
  ~Port() { close(); }

  // Configures queues and the mempool and starts the port. Returns kInvalidParameter for an
  // unknown port id, kDeviceBusy (logged) when another Port of this process has it open,
  // kInsufficientResources when the mempool cannot be created, and kDeviceNotReady when the
  // driver refuses the configuration.
  Status open(const PortConfig& cfg);
  uint16_t port_id() const noexcept { return cfg_.port_id; }
  // Stops and closes the port (a virtual device is released with it) and frees its mempool.
  // Idempotent.
  void close() noexcept;

  bool is_open() const noexcept { return open_; }
  uint16_t id() const noexcept { return cfg_.port_id; }
  uint16_t queues() const noexcept { return cfg_.queues; }
  // Whether the port spreads received frames over its queues by RSS (several queues only).
  bool rss() const noexcept { return rss_; }
  // rte_flow steering by destination QP (qpn_flow.cc): whether the port took a rule sending one
  // QP's RoCEv2 frames to one queue (asked at open, with several queues). Control side:
  // steer_qpn() installs the rules for `qpn` (IPv4 and IPv6; none when the port has no such
  // rules or refuses, and the software hand-off still delivers), unsteer_qpn() removes them.
  bool qpn_flow() const noexcept { return qpn_flow_; }
  struct QpnRules {
    rte_flow* v4 = nullptr;
    rte_flow* v6 = nullptr;
  };
  QpnRules steer_qpn(uint32_t qpn, uint16_t q) noexcept;
  void unsteer_qpn(QpnRules& r) noexcept;
  // The pool of queue `q`'s receive descriptors, from which its engine allocates what it sends.
  rte_mempool* pool(uint16_t q = 0) const noexcept { return q < kMaxQueues ? pools_[q] : nullptr; }
  static constexpr uint16_t kMaxQueues = 16;
  const wire::MacAddr& mac() const noexcept { return mac_; }
  // Traffic to the adapter's own addresses (a QP connected to one of its own, a datagram to its
  // own GID): switched on by the control plane the first time it resolves one of its addresses,
  // never off. While on, the engines keep frames whose destination MAC is their source MAC and
  // deliver them as received (Endpoint::loop_take_lc, Engine::phase_rx), as a NIC loops them back
  // internally: a frame to self sent on the wire would reach the other end of the link, not this
  // port.
  void enable_loopback() noexcept { loopback_.store(true, std::memory_order_release); }
  bool loopback() const noexcept { return loopback_.load(std::memory_order_relaxed); }

  // Per-packet path: callable only by the engine that owns queue `q`.
  uint16_t rx_burst(uint16_t q, rte_mbuf** pkts, uint16_t n) noexcept {
    return rte_eth_rx_burst(cfg_.port_id, q, pkts, n);
  }
  uint16_t tx_burst(uint16_t q, rte_mbuf** pkts, uint16_t n) noexcept {
    const uint16_t k = rte_eth_tx_burst(cfg_.port_id, q, pkts, n);
    if (k != 0) kick_.note_sent(q);
    return k;
  }
  // From a step with nothing to send: net_af_packet only, re-kicks a TX ring whose last kick
  // the kernel cut short (tx_kick.h). Returns whether a kick (a syscall) was made.
  bool tx_kick(uint16_t q) noexcept { return kick_.kick_if_pending(q); }

  struct Stats {
    uint64_t rx_packets, tx_packets, rx_bytes, tx_bytes, rx_missed, rx_errors, tx_errors;
  };
  Stats stats() const noexcept;

 private:
  // The bring-up line at INFO (urnic.ctl): driver, MAC, MTU, queues, link.
  void log_up(const rte_eth_dev_info& info, uint16_t rxd, uint16_t txd) const;

  PortConfig cfg_{};
  std::array<rte_mempool*, kMaxQueues> pools_{};
  wire::MacAddr mac_{};
  bool configured_ = false;
  bool open_ = false;
  bool claimed_ = false;
  std::atomic<bool> loopback_{false};
  bool rss_ = false;               // several queues, spread by the port's RSS
  bool qpn_flow_ = false;          // several queues, rte_flow rules by destination QP
  bool probe_qpn_flow() noexcept;  // this Port holds the
                                   // process-wide claim on its port id
  TxKick kick_;
};

}  // namespace urnic::dp
