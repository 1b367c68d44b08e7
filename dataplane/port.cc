#include "dataplane/port.h"

#include <rte_errno.h>

#include <rte_log.h>

#include <bitset>
#include <cstdio>
#include <mutex>

namespace urnic::dp {
namespace {

// Ports an urnic Port has open in this process: a second open of the same ethdev would fight
// over its queues (and its mempool name), so it is refused up front with a reason.
std::mutex g_claim_mu;
std::bitset<RTE_MAX_ETHPORTS> g_claimed;

bool claim(uint16_t port_id) {
  std::lock_guard lk(g_claim_mu);
  if (g_claimed.test(port_id)) return false;
  g_claimed.set(port_id);
  return true;
}

void release(uint16_t port_id) {
  std::lock_guard lk(g_claim_mu);
  g_claimed.reset(port_id);
}

}  // namespace

Status Port::open(const PortConfig& cfg) {
  if (open_) return Status::kInvalidDeviceState;
  if (!rte_eth_dev_is_valid_port(cfg.port_id) || cfg.queues == 0) return Status::kInvalidParameter;
  if (!claim(cfg.port_id)) {
    RTE_LOG(ERR, USER1, "urnic: port %u is already open by another adapter of this process\n",
            cfg.port_id);
    return Status::kDeviceBusy;
  }
  claimed_ = true;
  cfg_ = cfg;

  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(cfg.port_id, &info) != 0) {
    close();
    return Status::kDeviceNotReady;
  }
  if (cfg.queues > info.max_rx_queues || cfg.queues > info.max_tx_queues) {
    close();
    return Status::kInsufficientResources;
  }

  char name[RTE_MEMPOOL_NAMESIZE];
  std::snprintf(name, sizeof(name), "urnic_p%u", cfg.port_id);
  const int socket = rte_eth_dev_socket_id(cfg.port_id);
  pool_ = rte_pktmbuf_pool_create(name, cfg.mbufs, cfg.mbuf_cache, 0, kMbufDataRoom,
                                  socket < 0 ? static_cast<int>(SOCKET_ID_ANY) : socket);
  if (pool_ == nullptr) {
    close();
    return Status::kInsufficientResources;
  }

  rte_eth_conf conf{};
  if (rte_eth_dev_configure(cfg.port_id, cfg.queues, cfg.queues, &conf) != 0) {
    close();
    return Status::kDeviceNotReady;
  }
  configured_ = true;
  uint16_t rxd = cfg.rx_desc, txd = cfg.tx_desc;
  rte_eth_dev_adjust_nb_rx_tx_desc(cfg.port_id, &rxd, &txd);
  for (uint16_t q = 0; q < cfg.queues; ++q) {
    if (rte_eth_rx_queue_setup(cfg.port_id, q, rxd, socket, nullptr, pool_) != 0 ||
        rte_eth_tx_queue_setup(cfg.port_id, q, txd, socket, nullptr) != 0) {
      close();
      return Status::kDeviceNotReady;
    }
  }
  // MTU is best effort: virtual devices (net_ring) have no MTU to set.
  if (cfg.mtu != 0) (void)rte_eth_dev_set_mtu(cfg.port_id, cfg.mtu);
  if (rte_eth_dev_start(cfg.port_id) != 0) {
    close();
    return Status::kDeviceNotReady;
  }
  open_ = true;
  kick_.attach(cfg.port_id, cfg.queues);
  if (cfg.promiscuous) (void)rte_eth_promiscuous_enable(cfg.port_id);
  rte_ether_addr addr{};
  if (rte_eth_macaddr_get(cfg.port_id, &addr) == 0)
    for (size_t i = 0; i < mac_.size(); ++i) mac_[i] = addr.addr_bytes[i];
  return Status::kSuccess;
}

void Port::close() noexcept {
  kick_.detach();  // net_af_packet closes its sockets when the port stops
  if (open_) (void)rte_eth_dev_stop(cfg_.port_id);
  open_ = false;
  // Closing releases the queues (and, for a virtual device, the port itself) before the
  // mempool their descriptors point into is freed.
  if (configured_) (void)rte_eth_dev_close(cfg_.port_id);
  configured_ = false;
  if (pool_ != nullptr) {
    rte_mempool_free(pool_);
    pool_ = nullptr;
  }
  if (claimed_) release(cfg_.port_id);
  claimed_ = false;
}

Port::Stats Port::stats() const noexcept {
  rte_eth_stats s{};
  (void)rte_eth_stats_get(cfg_.port_id, &s);
  return {s.ipackets, s.opackets, s.ibytes, s.obytes, s.imissed, s.ierrors, s.oerrors};
}

}  // namespace urnic::dp
