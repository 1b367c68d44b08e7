#include "dataplane/port.h"

#include <rte_errno.h>

#include <algorithm>
#include <bitset>
#include <cstdio>
#include <mutex>
#include <string_view>

#include <unistd.h>

#include "dataplane/log.h"

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

// Each mbuf's data room. AF_XDP (net_af_xdp) hands the pool's objects to the kernel as its UMEM
// frames, and the kernel takes unaligned frames of at most one page (without hugepages,
// XDP_UMEM_REG fails with EINVAL): there the room is what a page leaves, so the port's frames
// are smaller (its max_mtu says so and the path MTU follows, control/runtime.cc port_mtu).
uint16_t data_room_for(const rte_eth_dev_info& info) {
  if (info.driver_name == nullptr || std::string_view(info.driver_name) != "net_af_xdp")
    return kMbufDataRoom;
  const auto page = static_cast<uint32_t>(::getpagesize());
  uint16_t room = kMbufDataRoom;
  while (room > RTE_PKTMBUF_HEADROOM + 1024 &&
         rte_mempool_calc_obj_size(sizeof(rte_mbuf) + room, 0, nullptr) > page)
    room -= RTE_CACHE_LINE_SIZE;
  return room;
}

}  // namespace

// A port that exists but cannot be opened is worth a line at ERR: the adapter on it fails to open,
// and the status alone does not say which ethdev step refused (an operator's configuration,
// mostly).
Status Port::open(const PortConfig& cfg) {
  if (open_) return Status::kInvalidDeviceState;
  if (!rte_eth_dev_is_valid_port(cfg.port_id) || cfg.queues == 0 || cfg.queues > kMaxQueues) {
    log_line(LogType::kCtl, RTE_LOG_DEBUG, "port %u: no such ethdev port, or no queues asked for",
             cfg.port_id);
    return Status::kInvalidParameter;
  }
  const auto fail = [&](Status s, const char* step, int rc) {
    log_line(LogType::kCtl, RTE_LOG_ERR, "port %u: %s failed (%s): %s", cfg.port_id, step,
             rte_strerror(rc < 0 ? -rc : rc), status_name(s));
    close();
    return s;
  };
  if (!claim(cfg.port_id)) {
    log_line(LogType::kCtl, RTE_LOG_ERR,
             "port %u is already open by another adapter of this process", cfg.port_id);
    return Status::kDeviceBusy;
  }
  claimed_ = true;
  cfg_ = cfg;

  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(cfg.port_id, &info); rc != 0)
    return fail(Status::kDeviceNotReady, "rte_eth_dev_info_get", rc);
  if (cfg.queues > info.max_rx_queues || cfg.queues > info.max_tx_queues)
    return fail(Status::kInsufficientResources, "queue count", EINVAL);

  const int socket = rte_eth_dev_socket_id(cfg.port_id);
  const uint16_t room = data_room_for(info);
  const uint32_t per_queue =
      cfg.queues == 1 ? cfg.mbufs : std::max<uint32_t>((cfg.mbufs + 1) / cfg.queues - 1, 2047);
  for (uint16_t q = 0; q < cfg.queues; ++q) {
    char name[RTE_MEMPOOL_NAMESIZE];
    // Queue 0's keeps the one-queue name (tools and tests look it up).
    if (q == 0)
      std::snprintf(name, sizeof(name), "urnic_p%u", cfg.port_id);
    else
      std::snprintf(name, sizeof(name), "urnic_p%u_q%u", cfg.port_id, q);
    pools_[q] = rte_pktmbuf_pool_create(name, per_queue, cfg.mbuf_cache, 0, room,
                                        socket < 0 ? static_cast<int>(SOCKET_ID_ANY) : socket);
    if (pools_[q] == nullptr)
      return fail(Status::kInsufficientResources, "rte_pktmbuf_pool_create", rte_errno);
  }

  rte_eth_conf conf{};
  // Several queues: RSS over the UDP ports and addresses where the port offers it, so that the
  // queues share the load (our QPs pick distinct UDP source ports, and so do rxe's and
  // ConnectX's); frames that land on another engine's queue are handed over (steering.h).
  constexpr uint64_t kUdpRss = RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_NONFRAG_IPV6_UDP;
  rss_ = cfg.queues > 1 && (info.flow_type_rss_offloads & kUdpRss) != 0;
  if (rss_) {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = info.flow_type_rss_offloads & kUdpRss;
  }
  if (int rc = rte_eth_dev_configure(cfg.port_id, cfg.queues, cfg.queues, &conf); rc != 0)
    return fail(Status::kDeviceNotReady, "rte_eth_dev_configure", rc);
  configured_ = true;
  uint16_t rxd = cfg.rx_desc, txd = cfg.tx_desc;
  rte_eth_dev_adjust_nb_rx_tx_desc(cfg.port_id, &rxd, &txd);
  for (uint16_t q = 0; q < cfg.queues; ++q) {
    if (int rc = rte_eth_rx_queue_setup(cfg.port_id, q, rxd, socket, nullptr, pools_[q]); rc != 0)
      return fail(Status::kDeviceNotReady, "rte_eth_rx_queue_setup", rc);
    if (int rc = rte_eth_tx_queue_setup(cfg.port_id, q, txd, socket, nullptr); rc != 0)
      return fail(Status::kDeviceNotReady, "rte_eth_tx_queue_setup", rc);
  }
  // MTU is best effort: virtual devices (net_ring) have no MTU to set.
  if (cfg.mtu != 0) (void)rte_eth_dev_set_mtu(cfg.port_id, cfg.mtu);
  if (int rc = rte_eth_dev_start(cfg.port_id); rc != 0)
    return fail(Status::kDeviceNotReady, "rte_eth_dev_start", rc);
  open_ = true;
  if (cfg.queues > 1) qpn_flow_ = probe_qpn_flow();
  kick_.attach(cfg.port_id, cfg.queues);
  if (cfg.promiscuous) (void)rte_eth_promiscuous_enable(cfg.port_id);
  rte_ether_addr addr{};
  if (rte_eth_macaddr_get(cfg.port_id, &addr) == 0)
    for (size_t i = 0; i < mac_.size(); ++i) mac_[i] = addr.addr_bytes[i];
  log_up(info, rxd, txd);
  return Status::kSuccess;
}

void Port::log_up(const rte_eth_dev_info& info, uint16_t rxd, uint16_t txd) const {
  uint16_t mtu = 0;
  (void)rte_eth_dev_get_mtu(cfg_.port_id, &mtu);
  rte_eth_link link{};
  (void)rte_eth_link_get_nowait(cfg_.port_id, &link);
  char link_text[RTE_ETH_LINK_MAX_STR_LEN];
  (void)rte_eth_link_to_str(link_text, sizeof link_text, &link);
  log_line(LogType::kCtl, RTE_LOG_INFO,
           "port %u up: driver %s, MAC %02x:%02x:%02x:%02x:%02x:%02x, MTU %u, %u RX/TX queues of "
           "%u/%u descriptors%s, %u mbufs, %s",
           cfg_.port_id, info.driver_name != nullptr ? info.driver_name : "?", mac_[0], mac_[1],
           mac_[2], mac_[3], mac_[4], mac_[5], mtu, cfg_.queues, rxd, txd,
           cfg_.queues == 1 ? ""
           : rss_           ? " (RSS on UDP, software hand-off)"
                            : " (software hand-off)",
           cfg_.mbufs, link_text);
}

void Port::close() noexcept {
  kick_.detach();  // net_af_packet closes its sockets when the port stops
  if (configured_ && qpn_flow_) {
    rte_flow_error err{};
    (void)rte_flow_flush(cfg_.port_id, &err);  // rules of QPs still placed
  }
  qpn_flow_ = false;
  if (open_) (void)rte_eth_dev_stop(cfg_.port_id);
  open_ = false;
  // Closing releases the queues (and, for a virtual device, the port itself) before the
  // mempool their descriptors point into is freed.
  if (configured_) (void)rte_eth_dev_close(cfg_.port_id);
  configured_ = false;
  for (rte_mempool*& p : pools_) {
    if (p != nullptr) rte_mempool_free(p);
    p = nullptr;
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
