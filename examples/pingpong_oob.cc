#include "examples/pingpong_oob.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace urnic::tools::oob {
namespace {

using Clock = std::chrono::steady_clock;

// A socket closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Reads exactly n bytes (MSG_WAITALL semantics) unless the peer closes or time runs out.
Status read_exact(int fd, char* buf, size_t n, Clock::time_point deadline) {
  size_t got = 0;
  while (got < n) {
    if (!wait_fd(fd, POLLIN, deadline)) return Status::kIoTimeout;
    const ssize_t r = ::recv(fd, buf + got, n - got, 0);
    if (r == 0) return Status::kConnectionAborted;
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Status::kConnectionAborted;
    }
    got += static_cast<size_t>(r);
  }
  return Status::kSuccess;
}

Status write_all(int fd, const char* buf, size_t n) {
  size_t put = 0;
  while (put < n) {
    const ssize_t r = ::send(fd, buf + put, n - put, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::kConnectionAborted;
    }
    put += static_cast<size_t>(r);
  }
  return Status::kSuccess;
}

}  // namespace

std::string gid_to_wire(const Gid& g) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : g) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

bool gid_from_wire(std::string_view hex, Gid* g) {
  if (hex.size() != 32) return false;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < 16; ++i) {
    const int h = nib(hex[2 * i]), l = nib(hex[2 * i + 1]);
    if (h < 0 || l < 0) return false;
    (*g)[i] = static_cast<uint8_t>(h << 4 | l);
  }
  return true;
}

std::array<char, kPingpongMsgSize> format_dest(const PingpongDest& d) {
  std::array<char, kPingpongMsgSize> msg{};
  std::snprintf(msg.data(), msg.size(), "%04x:%06x:%06x:%s", d.lid, d.qpn & 0xFFFFFF,
                d.psn & 0xFFFFFF, gid_to_wire(d.gid).c_str());
  return msg;
}

bool parse_dest(std::span<const char> msg, PingpongDest* d) {
  std::string_view s(msg.data(), msg.size());
  if (const auto nul = s.find('\0'); nul != std::string_view::npos) s = s.substr(0, nul);
  // "llll:qqqqqq:pppppp:" + 32 hex digits
  if (s.size() != 4 + 1 + 6 + 1 + 6 + 1 + 32 || s[4] != ':' || s[11] != ':' || s[18] != ':')
    return false;
  auto hex = [](std::string_view h, uint32_t* v) {
    *v = 0;
    for (char c : h) {
      int n;
      if (c >= '0' && c <= '9') {
        n = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        n = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        n = c - 'A' + 10;
      } else {
        return false;
      }
      *v = *v << 4 | static_cast<uint32_t>(n);
    }
    return true;
  };
  uint32_t lid = 0;
  if (!hex(s.substr(0, 4), &lid) || !hex(s.substr(5, 6), &d->qpn) ||
      !hex(s.substr(12, 6), &d->psn) || !gid_from_wire(s.substr(19, 32), &d->gid))
    return false;
  d->lid = static_cast<uint16_t>(lid);
  return true;
}

Status pingpong_client_exchange(const std::string& host, uint16_t port, const PingpongDest& mine,
                                PingpongDest* peer, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &res) != 0 || res == nullptr)
    return Status::kBadNetworkName;
  int fd = -1;
  // Like rc_pingpong, try each address; retry while the server is not listening yet.
  while (fd < 0) {
    for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        ::close(fd);
        fd = -1;
      }
    }
    if (fd < 0) {
      if (Clock::now() >= deadline) {
        ::freeaddrinfo(res);
        return Status::kHostUnreachable;
      }
      ::usleep(50 * 1000);
    }
  }
  ::freeaddrinfo(res);
  Fd sock(fd);
  const auto msg = format_dest(mine);
  if (Status s = write_all(fd, msg.data(), msg.size()); s != Status::kSuccess) return s;
  std::array<char, kPingpongMsgSize> in{};
  if (Status s = read_exact(fd, in.data(), in.size(), deadline); s != Status::kSuccess) return s;
  if (!parse_dest(in, peer)) return Status::kInvalidParameter;
  return write_all(fd, kDone, sizeof(kDone));
}

Status pingpong_server_exchange(uint16_t port, const PingpongDest& mine,
                                const std::function<bool(const PingpongDest&)>& connect_qp,
                                PingpongDest* peer, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  // rc_pingpong's server: AF_UNSPEC / AI_PASSIVE, so the IPv6 wildcard that takes IPv4 too.
  Fd lsock(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int ls = lsock.get();
  bool v6 = ls >= 0;
  if (v6) {
    const int off = 0;
    (void)::setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
  }
  Fd lsock4(v6 ? -1 : ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!v6) ls = lsock4.get();
  if (ls < 0) return Status::kInsufficientResources;
  const int one = 1;
  (void)::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_addr = in6addr_any;
    rc = ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    rc = ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  if (rc != 0 || ::listen(ls, 1) != 0) return Status::kAddressAlreadyAssociated;
  if (!wait_fd(ls, POLLIN, deadline)) return Status::kIoTimeout;
  Fd conn(::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC));
  if (conn.get() < 0) return Status::kConnectionAborted;
  std::array<char, kPingpongMsgSize> in{};
  if (Status s = read_exact(conn.get(), in.data(), in.size(), deadline); s != Status::kSuccess)
    return s;
  if (!parse_dest(in, peer)) return Status::kInvalidParameter;
  if (!connect_qp(*peer)) return Status::kConnectionAborted;
  const auto msg = format_dest(mine);
  if (Status s = write_all(conn.get(), msg.data(), msg.size()); s != Status::kSuccess) return s;
  // rc_pingpong reads up to sizeof msg and ignores the content; the client sends "done\0".
  char done[sizeof(kDone)] = {};
  return read_exact(conn.get(), done, sizeof(done), deadline);
}

}  // namespace urnic::tools::oob
