#include "control/kernel_net.h"

#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "control/route_bits.h"

namespace urnic::ctl {
namespace {

// One rtnetlink socket per request: these calls are rare (connection set-up), and a socket of
// their own keeps concurrent callers (control thread, application threads) apart.
class Netlink {
 public:
  Netlink() {
    fd_ = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd_ < 0) return;
    // No call may hang on a kernel that does not answer.
    timeval tv{1, 0};
    (void)::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  Netlink(const Netlink&) = delete;
  Netlink& operator=(const Netlink&) = delete;
  ~Netlink() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

  bool send(nlmsghdr* h) {
    h->nlmsg_seq = ++seq_;
    sockaddr_nl to{};
    to.nl_family = AF_NETLINK;
    return ::sendto(fd_, h, h->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
           static_cast<ssize_t>(h->nlmsg_len);
  }

  // Calls `each` for every message answering the last request until NLMSG_DONE (a dump) or the
  // first answer (a get). Returns 0, or the errno of an NLMSG_ERROR / a failed receive.
  template <class F>
  int receive(bool dump, F&& each) {
    alignas(nlmsghdr) char buf[16384];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0) return errno == EAGAIN ? ETIMEDOUT : errno;
      auto left = static_cast<unsigned>(n);
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_seq != seq_) continue;
        if (h->nlmsg_type == NLMSG_DONE) return 0;
        if (h->nlmsg_type == NLMSG_ERROR) {
          const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
          return -e->error;  // 0: an ACK
        }
        each(h);
        if (!dump) return 0;
      }
    }
  }

 private:
  int fd_ = -1;
  uint32_t seq_ = 0;
};

// A request: header, family message, attributes.
template <class Body>
struct Request {
  nlmsghdr h{};
  Body body{};
  alignas(NLMSG_ALIGNTO) char attrs[64]{};

  Request(uint16_t type, uint16_t flags) {
    h.nlmsg_len = NLMSG_LENGTH(sizeof(Body));
    h.nlmsg_type = type;
    h.nlmsg_flags = flags;
  }
  void add(uint16_t type, const void* data, size_t len) {
    auto* a = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(&h) + NLMSG_ALIGN(h.nlmsg_len));
    a->rta_type = type;
    a->rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
    std::memcpy(RTA_DATA(a), data, len);
    h.nlmsg_len = NLMSG_ALIGN(h.nlmsg_len) + RTA_ALIGN(a->rta_len);
  }
};

// The address bytes of a GID in its own family, and that family.
const uint8_t* raw(const Gid& g, int* family, size_t* len) {
  const bool v4 = route_bits::is_mapped(g);
  *family = v4 ? AF_INET : AF_INET6;
  *len = v4 ? 4 : 16;
  return v4 ? &g[12] : g.data();
}

Gid gid_of(int family, const void* p) {
  Gid g{};
  if (family == AF_INET) {
    std::copy(route_bits::kMappedPrefix.begin(), route_bits::kMappedPrefix.end(), g.begin());
    std::memcpy(&g[12], p, 4);
  } else {
    std::memcpy(g.data(), p, 16);
  }
  return g;
}

}  // namespace

std::vector<KernelAddress> kernel_addresses(int ifindex) {
  std::vector<KernelAddress> v4, v6;
  Netlink nl;
  if (!nl.ok()) return {};
  for (const int family : {AF_INET, AF_INET6}) {
    Request<ifaddrmsg> r(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP);
    r.body.ifa_family = static_cast<uint8_t>(family);
    if (!nl.send(&r.h)) return {};
    (void)nl.receive(true, [&](nlmsghdr* h) {
      if (h->nlmsg_type != RTM_NEWADDR) return;
      const auto* ifa = static_cast<const ifaddrmsg*>(NLMSG_DATA(h));
      if (static_cast<int>(ifa->ifa_index) != ifindex) return;
      // Link-local IPv6 is every interface's; urnic's GID 0 stands for it already.
      if (ifa->ifa_family == AF_INET6 && ifa->ifa_scope == RT_SCOPE_LINK) return;
      int len = static_cast<int>(IFA_PAYLOAD(h));
      for (auto* a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (a->rta_type != IFA_ADDRESS) continue;
        KernelAddress k{gid_of(ifa->ifa_family, RTA_DATA(a)), ifa->ifa_prefixlen};
        (ifa->ifa_family == AF_INET ? v4 : v6).push_back(k);
      }
    });
  }
  v4.insert(v4.end(), v6.begin(), v6.end());
  return v4;
}

std::optional<KernelRoute> kernel_route(const Gid& dst, std::string* why) {
  Netlink nl;
  if (!nl.ok()) {
    if (why != nullptr) *why = std::string("no rtnetlink socket: ") + std::strerror(errno);
    return std::nullopt;
  }
  int family = 0;
  size_t len = 0;
  const uint8_t* a = raw(dst, &family, &len);
  Request<rtmsg> r(RTM_GETROUTE, NLM_F_REQUEST);
  r.body.rtm_family = static_cast<uint8_t>(family);
  r.body.rtm_dst_len = static_cast<uint8_t>(len * 8);
  r.add(RTA_DST, a, len);
  if (!nl.send(&r.h)) return std::nullopt;
  std::optional<KernelRoute> out;
  const int err = nl.receive(false, [&](nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWROUTE) return;
    const auto* rt = static_cast<const rtmsg*>(NLMSG_DATA(h));
    if (rt->rtm_type != RTN_UNICAST) return;  // unreachable, blackhole, local ...
    KernelRoute k;
    k.next_hop = dst;
    int n = static_cast<int>(RTM_PAYLOAD(h));
    for (auto* at = RTM_RTA(rt); RTA_OK(at, n); at = RTA_NEXT(at, n)) {
      if (at->rta_type == RTA_GATEWAY) k.next_hop = gid_of(rt->rtm_family, RTA_DATA(at));
      if (at->rta_type == RTA_OIF) std::memcpy(&k.oif, RTA_DATA(at), sizeof k.oif);
    }
    out = k;
  });
  if (!out && why != nullptr)
    *why = err != 0 ? std::string("the kernel has no route: ") + std::strerror(err)
                    : std::string("the kernel's route is not a unicast one");
  return out;
}

std::optional<wire::MacAddr> kernel_neighbour(int ifindex, const Gid& ip) {
  Netlink nl;
  if (!nl.ok()) return std::nullopt;
  int family = 0;
  size_t len = 0;
  const uint8_t* a = raw(ip, &family, &len);
  Request<ndmsg> r(RTM_GETNEIGH, NLM_F_REQUEST);
  r.body.ndm_family = static_cast<uint8_t>(family);
  r.body.ndm_ifindex = ifindex;
  r.add(NDA_DST, a, len);
  if (!nl.send(&r.h)) return std::nullopt;
  std::optional<wire::MacAddr> out;
  (void)nl.receive(false, [&](nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWNEIGH) return;
    const auto* nd = static_cast<const ndmsg*>(NLMSG_DATA(h));
    constexpr uint16_t kUsable =
        NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP;
    if ((nd->ndm_state & kUsable) == 0) return;
    int n = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(ndmsg)));
    for (auto* at = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(const_cast<ndmsg*>(nd)) +
                                              NLMSG_ALIGN(sizeof(ndmsg)));
         RTA_OK(at, n); at = RTA_NEXT(at, n)) {
      if (at->rta_type == NDA_LLADDR && RTA_PAYLOAD(at) == 6) {
        wire::MacAddr m{};
        std::memcpy(m.data(), RTA_DATA(at), 6);
        out = m;
      }
    }
  });
  return out;
}

bool kernel_probe_neighbour(int ifindex, const Gid& ip) {
  Netlink nl;
  if (!nl.ok()) return false;
  int family = 0;
  size_t len = 0;
  const uint8_t* a = raw(ip, &family, &len);
  Request<ndmsg> r(RTM_NEWNEIGH, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE);
  r.body.ndm_family = static_cast<uint8_t>(family);
  r.body.ndm_ifindex = ifindex;
  r.body.ndm_state = NUD_NONE;
  r.body.ndm_flags = NTF_USE;  // "use": resolve now, as if a packet were waiting
  r.add(NDA_DST, a, len);
  if (!nl.send(&r.h)) return false;
  return nl.receive(false, [](nlmsghdr*) {}) == 0;
}

}  // namespace urnic::ctl
