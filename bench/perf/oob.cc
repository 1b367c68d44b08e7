#include "bench/perf/oob.h"

#include <arpa/inet.h>
#include <endian.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace urnic::perf {
namespace {

// MAX_VERSION: perftest reserves 16 bytes. "6.06" is perftest 4.5's version string: below 6.28,
// so no peer sends the host-layout-dependent parameter negotiation (rocev2.md §4.2), and at or
// above 5.70, so check_version_compatibility() accepts it.
constexpr size_t kVersionSize = 16;
constexpr char kVersion[kVersionSize] = "6.06\0urnic-perf";
static_assert(sizeof(kVersion) == kVersionSize);
constexpr size_t kTailAt = 5;  // after "6.06" and its NUL

// ibv_mtu enum values (1 = 256 ... 5 = 4096) and back.
int mtu_enum(uint32_t bytes) {
  int e = 1;
  for (uint32_t b = 256; b < bytes && e < 5; b <<= 1) ++e;
  return e;
}
uint32_t mtu_bytes(int e) { return 128u << e; }

uint64_t hton64(uint64_t v) { return htobe64(v); }
uint64_t ntoh64(uint64_t v) { return be64toh(v); }
uint64_t double_bits(double d) {
  uint64_t v;
  std::memcpy(&v, &d, 8);
  return v;
}
double bits_double(uint64_t v) {
  double d;
  std::memcpy(&d, &v, 8);
  return d;
}

}  // namespace

bool Oob::fail(const std::string& what, OobFailure why) {
  if (err_.empty()) {
    err_ = what;
    why_ = why;
  }
  return false;
}

std::chrono::steady_clock::time_point Oob::deadline() const {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(timeout_s_));
}

bool Oob::wait_loop(const std::function<int()>& probe,
                    std::chrono::steady_clock::time_point deadline, const std::string& what) {
  const bool limited = timeout_s_ > 0;
  uint64_t seen = activity_ ? activity_() : 0;
  auto next_look = std::chrono::steady_clock::now();
  for (;;) {
    // Drive the engine between non-blocking polls.
    if (idle_) idle_();
    if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed))
      return fail("interrupted", OobFailure::kCanceled);
    if (const int r = probe(); r != 0) return r > 0;
    if (!limited) continue;
    const auto now = std::chrono::steady_clock::now();
    if (activity_ && now >= next_look) {
      next_look = now + std::chrono::milliseconds(100);
      if (const uint64_t a = activity_(); a != seen) {
        seen = a;
        deadline = this->deadline();
      }
    }
    if (now >= deadline) {
      char b[96];
      std::snprintf(b, sizeof(b), "the peer did not answer within %.0f s (--timeout)", timeout_s_);
      return fail(what.empty() ? std::string(b) : what + ": " + b, OobFailure::kTimeout);
    }
  }
}

bool Oob::wait_fd(short events, std::chrono::steady_clock::time_point deadline) {
  pollfd p{fd_, events, 0};
  return wait_loop(
      [&] {
        // Block at most 100 ms when no engine needs this thread.
        const int r = ::poll(&p, 1, idle_ ? 0 : 100);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) {
          fail(std::string("poll: ") + std::strerror(errno));
          return -1;
        }
        return 0;
      },
      deadline, "");
}

bool Oob::wait_until(const std::function<bool()>& ready, const std::string& what) {
  return wait_loop(
      [&] {
        if (ready()) return 1;
        // The engines run on their own lcores: do not take a core from them.
        if (!idle_) std::this_thread::sleep_for(std::chrono::microseconds(20));
        return 0;
      },
      deadline(), what);
}

bool Oob::accept_one(uint16_t port) {
  const int ls = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (ls < 0) return fail(std::string("socket: ") + std::strerror(errno));
  const int one = 1, zero = 0;
  (void)::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  (void)::setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  a.sin6_port = htons(port);
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(ls, 1) != 0) {
    const std::string e = std::strerror(errno);
    ::close(ls);
    return fail("cannot listen on TCP port " + std::to_string(port) + ": " + e);
  }
  fd_ = ls;
  const bool ready = wait_fd(POLLIN, deadline());
  fd_ = -1;
  if (!ready) {
    ::close(ls);
    if (why_ == OobFailure::kTimeout) {
      err_ = "no client connected to TCP port " + std::to_string(port) + " within " +
             std::to_string(static_cast<long>(timeout_s_)) + " s (--timeout)";
      why_ = OobFailure::kNoPeer;
    }
    return false;
  }
  fd_ = ::accept(ls, nullptr, nullptr);
  ::close(ls);
  if (fd_ < 0) return fail(std::string("accept: ") + std::strerror(errno));
  (void)::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return true;
}

bool Oob::connect_to(const std::string& host, uint16_t port, double retry_s) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
    return fail("cannot resolve " + host + ": " + ::gai_strerror(rc));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(retry_s);
  std::string last;
  for (;;) {
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      const int fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        fd_ = fd;
        break;
      }
      last = std::strerror(errno);
      ::close(fd);
    }
    if (fd_ >= 0 || std::chrono::steady_clock::now() >= deadline) break;
    // The server may still be starting (its EAL takes a moment): retry, driving the engine.
    for (int i = 0; i < 100; ++i) {
      if (idle_) idle_();
      std::this_thread::sleep_for(std::chrono::microseconds(idle_ ? 10 : 1000));
    }
  }
  ::freeaddrinfo(res);
  if (fd_ < 0)
    return fail("couldn't connect to " + host + ":" + service + ": " + last +
                    (retry_s > 0 ? " (retried for " + std::to_string(static_cast<long>(retry_s)) +
                                       " s, --connect-retry)"
                                 : ""),
                OobFailure::kNoPeer);
  const int one = 1;
  (void)::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return true;
}

bool Oob::write_all(const void* p, size_t n) {
  if (link_ != nullptr) {
    std::string e;
    int r = 0;
    if (!link_->send(p, n, &e) ||
        !wait_until([&] { return (r = link_->send_done(&e)) != 0; }, "sending to the peer"))
      return fail(e, OobFailure::kOther);
    return r > 0 || fail(e, link_->closed() ? OobFailure::kPeerGone : OobFailure::kOther);
  }
  const auto* b = static_cast<const uint8_t*>(p);
  const auto until = deadline();
  while (n > 0) {
    const ssize_t k = ::send(fd_, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      b += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!wait_fd(POLLOUT, until)) return false;
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET)
      return fail("the peer closed the TCP connection", OobFailure::kPeerGone);
    return fail(std::string("TCP write: ") + std::strerror(errno));
  }
  return true;
}

bool Oob::read_exact(void* p, size_t n) {
  if (link_ != nullptr) {
    std::string e;
    int r = 0;
    if (!wait_until([&] { return (r = link_->recv(p, n, &e)) != 0 || link_->closed(); },
                    "waiting for the peer's message"))
      return false;
    if (r > 0) return true;
    if (r == 0) return fail("the peer disconnected (rdma_cm)", OobFailure::kPeerGone);
    return fail(e, link_->closed() ? OobFailure::kPeerGone : OobFailure::kOther);
  }
  auto* b = static_cast<uint8_t*>(p);
  const auto until = deadline();
  while (n > 0) {
    const ssize_t k = ::recv(fd_, b, n, MSG_DONTWAIT);
    if (k > 0) {
      b += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0 || (k < 0 && errno == ECONNRESET))
      return fail("the peer closed the TCP connection", OobFailure::kPeerGone);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!wait_fd(POLLIN, until)) return false;
      continue;
    }
    return fail(std::string("TCP read: ") + std::strerror(errno));
  }
  return true;
}

bool Oob::xchg(const void* mine, void* theirs, size_t n) {
  if (fd_ < 0 && link_ == nullptr) return fail("not connected");
  if (role_ == Role::kClient) return write_all(mine, n) && read_exact(theirs, n);
  return read_exact(theirs, n) && write_all(mine, n);
}

bool Oob::exchange_versions(const PeerModes& modes) {
  char mine[kVersionSize] = {};
  std::memcpy(mine, kVersion, kVersionSize);
  if (modes.bidirectional || modes.run_infinitely || modes.selective_repeat) {
    // "urnic-perf" without modes, so that an older urnic-perf still knows its peer; one that
    // predates 's' reads "urnic:s" as no modes (and uses go-back-N, as this side will).
    std::snprintf(mine + kTailAt, kVersionSize - kTailAt, "urnic:%s%s%s",
                  modes.bidirectional ? "b" : "", modes.run_infinitely ? "i" : "",
                  modes.selective_repeat ? "s" : "");
  }
  char theirs[kVersionSize] = {};
  if (!xchg(mine, theirs, kVersionSize)) return false;
  const size_t len = strnlen(theirs, kVersionSize);
  peer_version_.assign(theirs, len);
  peer_version_num_ = std::atof(peer_version_.c_str());
  const std::string_view tail =
      len + 1 < kVersionSize
          ? std::string_view(theirs + len + 1, strnlen(theirs + len + 1, kVersionSize - len - 1))
          : std::string_view();
  peer_urnic_ = tail.rfind("urnic", 0) == 0;
  if (tail.rfind("urnic:", 0) == 0) {
    const std::string_view letters = tail.substr(6);
    peer_modes_.bidirectional = letters.find('b') != std::string_view::npos;
    peer_modes_.run_infinitely = letters.find('i') != std::string_view::npos;
    peer_modes_.selective_repeat = letters.find('s') != std::string_view::npos;
  }
  // check_version_compatibility(): perftest refuses peers older than 5.70.
  if (peer_version_num_ < 5.70) return fail("peer perftest version " + peer_version_ + " < 5.70");
  return true;
}

bool Oob::check_sys_data(uint32_t* cycle_buffer, uint32_t* cache_line) {
  if (peer_version_num_ < 5.32) return true;
  uint32_t mine = htonl(*cycle_buffer), theirs = 0;
  if (!xchg(&mine, &theirs, 4)) return false;
  if (ntohl(theirs) > *cycle_buffer) *cycle_buffer = ntohl(theirs);
  mine = htonl(*cache_line);
  if (!xchg(&mine, &theirs, 4)) return false;
  if (ntohl(theirs) > *cache_line) *cache_line = ntohl(theirs);
  if (*cycle_buffer > (1u << 20) || *cache_line > 4096 || *cache_line == 0)
    return fail("peer's cycle buffer / cache line size out of range");
  return true;
}

bool Oob::check_mtu(uint32_t mine, uint32_t* agreed) {
  *agreed = mine;
  if (peer_version_num_ < 5.1) return true;
  char cur[4] = {}, rem[4] = {};
  std::snprintf(cur, sizeof(cur), "%d", mtu_enum(mine));
  const size_t n = peer_version_num_ >= 5.31 ? 2 : 4;
  if (!xchg(cur, rem, n)) return false;
  const int r = std::atoi(rem);
  if (r >= 1 && r <= 5 && mtu_bytes(r) < mine) *agreed = mtu_bytes(r);
  return true;
}

bool Oob::hand_shake(const Dest& mine, Dest* theirs) {
  std::array<char, kRecordSize> rec{};
  const size_t n = record_out(mine, &rec);
  char in[kRecordSize] = {};
  if (!xchg(rec.data(), in, n)) return false;
  Dest d;
  if (!record_in(in, n, &d)) return false;
  if (theirs != nullptr) *theirs = d;
  return true;
}

size_t Oob::record_out(const Dest& d, std::array<char, kRecordSize>* out) const {
  if (link_ == nullptr) {
    *out = format_record(d);
    return kRecordSize;
  }
  // rdma_write_keys(): struct pingpong_dest, its integers big-endian (HAVE_ENDIAN).
  BinaryRecord b{};
  b.lid = htonl(d.lid);
  b.out_reads = htonl(d.out_reads);
  b.qpn = htonl(d.qpn);
  b.psn = htonl(d.psn);
  b.rkey = htonl(d.rkey);
  b.vaddr = hton64(d.vaddr);
  std::memcpy(b.gid, d.gid.data(), 16);
  b.srqn = htonl(d.srqn);
  std::memcpy(out->data(), &b, sizeof(b));
  return sizeof(b);
}

bool Oob::record_in(const char* in, size_t n, Dest* d) {
  if (link_ == nullptr) {
    if (parse_record(in, n, d)) return true;
    return fail("malformed connection record from the peer: '" + std::string(in, strnlen(in, n)) +
                "'");
  }
  BinaryRecord b;
  std::memcpy(&b, in, sizeof(b));
  d->lid = ntohl(b.lid);
  d->out_reads = ntohl(b.out_reads);
  d->qpn = ntohl(b.qpn);
  d->psn = ntohl(b.psn);
  d->rkey = ntohl(b.rkey);
  d->vaddr = ntoh64(b.vaddr);
  std::memcpy(d->gid.data(), b.gid, 16);
  d->srqn = ntohl(b.srqn);
  if (d->qpn > 0xFFFFFF || d->psn > 0xFFFFFF)
    return fail("malformed connection record from the peer: QPN or PSN above 24 bits");
  return true;
}

bool Oob::xchg_reports(const BwReport& mine, BwReport* theirs) {
  const uint64_t out[5] = {hton64(mine.size), hton64(mine.iters), hton64(double_bits(mine.bw_peak)),
                           hton64(double_bits(mine.bw_avg)), hton64(double_bits(mine.msg_rate))};
  uint64_t in[5] = {};
  if (!xchg(&out[0], &in[0], 8)) return false;
  if (peer_version_num_ >= 5.33) {
    if (!xchg(&out[1], &in[1], 8)) return false;
  } else {
    uint32_t o32 = htonl(static_cast<uint32_t>(mine.iters)), i32 = 0;
    if (!xchg(&o32, &i32, 4)) return false;
    in[1] = hton64(ntohl(i32));
  }
  for (int i = 2; i < 5; ++i)
    if (!xchg(&out[i], &in[i], 8)) return false;
  theirs->size = ntoh64(in[0]);
  theirs->iters = ntoh64(in[1]);
  theirs->bw_peak = bits_double(ntoh64(in[2]));
  theirs->bw_avg = bits_double(ntoh64(in[3]));
  theirs->msg_rate = bits_double(ntoh64(in[4]));
  return true;
}

bool Oob::close_connection(const Dest& mine) {
  if (!hand_shake(mine, nullptr)) return false;
  return say_done();
}

bool Oob::end_together(const Dest& mine) {
  // Whichever finished first tells the other, which may still be waiting for messages that
  // will not come, that the test is over.
  return sync_write_first(mine) && say_done();
}

bool Oob::sync_write_first(const Dest& mine) { return write_record(mine) && read_record(); }

bool Oob::write_record(const Dest& mine) {
  if (fd_ < 0 && link_ == nullptr) return fail("not connected");
  std::array<char, kRecordSize> rec{};
  const size_t n = record_out(mine, &rec);
  return write_all(rec.data(), n);
}

bool Oob::read_record() {
  char in[kRecordSize] = {};
  if (fd_ < 0 && link_ == nullptr) return fail("not connected");
  const size_t n = link_ != nullptr ? sizeof(BinaryRecord) : kRecordSize;
  Dest d;
  return read_exact(in, n) && record_in(in, n, &d);
}

bool Oob::say_done() {
  // Over rdma_cm, ctx_close_connection() ends with the hand shake: no "done".
  if (link_ != nullptr) {
    close();
    return true;
  }
  static constexpr char kDone[] = "done";
  if (!write_all(kDone, sizeof(kDone))) return false;
  // perftest writes "done" and closes without reading the peer's; we read it (or EOF) for up
  // to a second so that closing does not reset a connection with unread data.
  ::shutdown(fd_, SHUT_WR);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  char buf[64];
  while (std::chrono::steady_clock::now() < until) {
    const ssize_t k = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    if (idle_) idle_();
    pollfd p{fd_, POLLIN, 0};
    (void)::poll(&p, 1, idle_ ? 0 : 10);
  }
  close();
  return true;
}

bool Oob::peer_closed() {
  if (link_ != nullptr) return link_->closed() && !link_->has_message();
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  char c;
  const ssize_t k = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return k == 0 || (k < 0 && errno == ECONNRESET);
}

bool Oob::readable() {
  if (link_ != nullptr) return link_->has_message() || link_->closed();
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

void Oob::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  link_ = nullptr;
}

}  // namespace urnic::perf
