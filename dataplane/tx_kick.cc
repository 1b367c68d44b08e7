#include "dataplane/tx_kick.h"

#include <dirent.h>
#include <linux/if_packet.h>
#include <rte_ethdev.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "dataplane/log.h"

namespace urnic::dp {
namespace {

// True for an AF_PACKET socket with a TPACKET_V2 ring bound to interface `ifindex`: what
// net_af_packet opens per queue.
bool is_pmd_socket(int fd, int ifindex) {
  int domain = 0;
  socklen_t len = sizeof(domain);
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_PACKET)
    return false;
  int version = -1;
  len = sizeof(version);
  if (getsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, &len) != 0 || version != TPACKET_V2)
    return false;
  sockaddr_ll sll{};
  len = sizeof(sll);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sll), &len) != 0) return false;
  return sll.sll_ifindex == ifindex;
}

}  // namespace

void TxKick::attach(uint16_t port_id, uint16_t queues) {
  detach();
  // URNIC_AF_PACKET_KICK=0 turns the re-kick off, to measure what it does (perf_impair_test.sh).
  if (const char* e = std::getenv("URNIC_AF_PACKET_KICK"); e != nullptr && std::strcmp(e, "0") == 0)
    return;
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port_id, &info) != 0 || info.driver_name == nullptr ||
      std::strcmp(info.driver_name, "net_af_packet") != 0 || info.if_index == 0)
    return;
  std::vector<int> found;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long fd = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
      if (is_pmd_socket(static_cast<int>(fd), static_cast<int>(info.if_index)))
        found.push_back(static_cast<int>(fd));
    }
    closedir(d);
  }
  // The PMD opens its queue sockets in queue order; file descriptors are handed out lowest
  // first, so ascending order is queue order as long as the count is exactly right.
  std::sort(found.begin(), found.end());
  if (found.size() != queues) {
    log_line(LogType::kCtl, RTE_LOG_WARNING,
             "port %u (net_af_packet): found %zu ring sockets for %u queues; TX frames the "
             "kernel parks after a drop wait for the next burst",
             port_id, found.size(), queues);
    return;
  }
  fds_ = std::move(found);
  pending_.assign(queues, 0);
}

bool TxKick::kick_if_pending(uint16_t q) noexcept {
  if (q >= pending_.size() || pending_[q] == 0) return false;
  // Success means the kernel took every frame left in the ring; ENOBUFS / EAGAIN means it
  // stopped at another frame it could not queue, so the next idle step kicks again.
  if (sendto(fds_[q], nullptr, 0, MSG_DONTWAIT, nullptr, 0) >= 0 ||
      (errno != ENOBUFS && errno != EAGAIN))
    pending_[q] = 0;
  return true;
}

}  // namespace urnic::dp
