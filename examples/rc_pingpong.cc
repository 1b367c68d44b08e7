// urnic-rc-pingpong: ibv_rc_pingpong (rdma-core libibverbs/examples/rc_pingpong.c) on urnic.
// Same options, same out-of-band TCP exchange (examples/pingpong_oob.h), same traffic (SENDs of
// -s bytes, ping-pong, -n iterations each way, one buffer for sends and receives, rx-depth
// receives posted) and the same result lines, so it runs against the stock tool in either role:
//
//   server: urnic-rc-pingpong --vdev=net_af_packet0,iface=vdpdk0 --ip=10.99.0.10 -g 1
//   client: ibv_rc_pingpong -g 1 <host running the server>
//
// With -c the data is checked more strictly than rc_pingpong does: the client fills its buffer
// with a pattern and every message that comes back (the peer echoes its receive buffer) must
// equal it; the server checks that every message equals the first. After the result lines one
// "urnic:" line gives the completion counts and the transport counters.
#include <getopt.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "examples/nic.h"
#include "examples/pingpong_oob.h"

namespace urnic::tools {
namespace {

// wr_id values, as in rc_pingpong.
void* const kRecvWrid = reinterpret_cast<void*>(1);
void* const kSendWrid = reinterpret_cast<void*>(2);
constexpr int kRecvBit = 1, kSendBit = 2;

void usage(const char* argv0) {
  std::printf(
      "Usage:\n"
      "  %s [options]            start a server and wait for connection\n"
      "  %s [options] <host>     connect to server at <host>\n\n"
      "Options:\n"
      "  -p, --port=<port>      listen on/connect to port <port> (default 18515)\n"
      "  -d, --ib-dev=<dev>     accepted and ignored (urnic: see --vdev)\n"
      "  -i, --ib-port=<port>   accepted and ignored\n"
      "  -s, --size=<size>      size of message to exchange (default 4096)\n"
      "  -m, --mtu=<size>       path MTU (default 1024)\n"
      "  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)\n"
      "  -n, --iters=<iters>    number of exchanges (default 1000)\n"
      "  -l, --sl=<sl>          accepted and ignored\n"
      "  -e, --events           accepted; completions are polled\n"
      "  -g, --gid-idx=<idx>    local GID index (accepted; the IPv4 GID is used)\n"
      "  -c, --chk              validate received buffer\n"
      "  --linger-ms=<ms>       keep answering the peer after the last iteration\n",
      argv0, argv0);
  std::printf("urnic:\n%s", nic_usage());
}

// Members go in reverse order: the QP first (its close flushes its work), then the MR, the CQ,
// the NIC (PD, adapter, engine) and last the buffer the engine may have touched.
struct Ctx {
  std::vector<uint8_t> storage;
  uint8_t* buf = nullptr;
  uint32_t size = 4096;
  uint32_t rx_depth = 500;
  Nic nic;
  Handle<Cq> cq;
  Handle<Mr> mr;
  uint32_t key = 0;
  Handle<Qp> qp;
  QpConnectExtension* conn = nullptr;
};

int post_recv(Ctx& c, int n) {
  const Sge sge{reinterpret_cast<uint64_t>(c.buf), c.size, c.key};
  int i = 0;
  for (; i < n; ++i)
    if (c.qp->receive(kRecvWrid, {&sge, 1}) != Status::kSuccess) break;
  return i;
}

Status post_send(Ctx& c) {
  const Sge sge{reinterpret_cast<uint64_t>(c.buf), c.size, c.key};
  return c.qp->send(kSendWrid, {&sge, 1}, 0);
}

bool gid_is_ipv4(const Gid& g) {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  return std::memcmp(g.data(), kMapped, sizeof(kMapped)) == 0;
}

// pp_connect_ctx(): RTR with the peer's QPN and PSN, RTS with ours. Path MTU from -m, one
// responder resource, min RNR timer 12, timeout 14, retry_cnt 7, rnr_retry 7. The peer's MAC
// is resolved by the adapter (ARP / neighbour discovery) in the RTR transition. IP TTL / hop
// limit 64 as rxe sends (rxe_prepare4: ttl 64 whatever the AH says); ibv_rc_pingpong's AH asks
// for 1, which would not cross a router.
bool connect_qp(Ctx& c, uint32_t mtu, uint32_t my_psn, const oob::PingpongDest& rem) {
  using namespace qp_attr_mask;
  QpAttributes at;
  at.state = QpState::kRtr;
  if (gid_is_ipv4(rem.gid)) {
    at.av.dst_ipv4 = static_cast<uint32_t>(rem.gid[12]) << 24 |
                     static_cast<uint32_t>(rem.gid[13]) << 16 |
                     static_cast<uint32_t>(rem.gid[14]) << 8 | rem.gid[15];
  } else {
    at.av.ipv6 = true;
    at.av.sgid_index = 0;  // our link-local GID
    at.av.dst_ipv6 = rem.gid;
  }
  at.av.hop_limit = 64;
  at.path_mtu = mtu;
  at.dest_qpn = rem.qpn;
  at.rq_psn = rem.psn;
  at.max_dest_rd_atomic = 1;
  at.min_rnr_timer = 12;
  if (Status s = c.conn->modify(
          at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
          nullptr, nullptr);
      s != Status::kSuccess) {
    std::fprintf(stderr, "Failed to modify QP to RTR: %s%s\n", std::string(to_string(s)).c_str(),
                 s == Status::kHostUnreachable
                     ? (" (no ARP/ND answer from " + gid_string(rem.gid) + ")").c_str()
                     : "");
    return false;
  }
  at.state = QpState::kRts;
  at.timeout = 14;
  at.retry_cnt = 7;
  at.rnr_retry = 7;
  at.sq_psn = my_psn;
  at.max_rd_atomic = 1;
  if (Status s = c.conn->modify(
          at, kState | kTimeout | kRetryCnt | kRnrRetry | kSqPsn | kMaxRdAtomic, nullptr, nullptr);
      s != Status::kSuccess) {
    std::fprintf(stderr, "Failed to modify QP to RTS: %s\n", std::string(to_string(s)).c_str());
    return false;
  }
  return true;
}

// The command line (rc_pingpong's options, the NIC's own taken first); false: usage printed.
struct Args {
  NicOptions nic;
  uint16_t port = oob::kPingpongPort;
  uint32_t size = 4096, mtu = 1024, rx_depth = 500, iters = 1000;
  bool validate = false;
  long linger_ms = -1;
  std::string servername;
};

bool parse_args(int argc, char** argv, Args* a) {
  if (!take_nic_options(&argc, argv, &a->nic)) {
    usage(argv[0]);
    return false;
  }
  uint16_t& port = a->port;
  uint32_t &size = a->size, &mtu = a->mtu, &rx_depth = a->rx_depth, &iters = a->iters;
  bool& validate = a->validate;
  long& linger_ms = a->linger_ms;
  static const option kLong[] = {
      {"port", required_argument, nullptr, 'p'},    {"ib-dev", required_argument, nullptr, 'd'},
      {"ib-port", required_argument, nullptr, 'i'}, {"size", required_argument, nullptr, 's'},
      {"mtu", required_argument, nullptr, 'm'},     {"rx-depth", required_argument, nullptr, 'r'},
      {"iters", required_argument, nullptr, 'n'},   {"sl", required_argument, nullptr, 'l'},
      {"events", no_argument, nullptr, 'e'},        {"gid-idx", required_argument, nullptr, 'g'},
      {"chk", no_argument, nullptr, 'c'},           {"linger-ms", required_argument, nullptr, 'L'},
      {"help", no_argument, nullptr, 'h'},          {nullptr, 0, nullptr, 0}};
  for (int ch; (ch = getopt_long(argc, argv, "p:d:i:s:m:r:n:l:eg:ch", kLong, nullptr)) != -1;) {
    switch (ch) {
      case 'p':
        port = static_cast<uint16_t>(std::strtoul(optarg, nullptr, 0));
        break;
      case 's':
        size = static_cast<uint32_t>(std::strtoul(optarg, nullptr, 0));
        break;
      case 'm':
        mtu = static_cast<uint32_t>(std::strtoul(optarg, nullptr, 0));
        if (mtu != 256 && mtu != 512 && mtu != 1024 && mtu != 2048 && mtu != 4096) {
          usage(argv[0]);
          return false;
        }
        break;
      case 'r':
        rx_depth = static_cast<uint32_t>(std::strtoul(optarg, nullptr, 0));
        break;
      case 'n':
        iters = static_cast<uint32_t>(std::strtoul(optarg, nullptr, 0));
        break;
      case 'c':
        validate = true;
        break;
      case 'L':
        linger_ms = std::strtol(optarg, nullptr, 0);
        break;
      case 'd':
      case 'i':
      case 'l':
      case 'e':
      case 'g':
        break;
      default:
        usage(argv[0]);
        return false;
    }
  }
  a->servername = optind == argc - 1 ? argv[optind] : "";
  if (optind < argc - 1 || size == 0 || rx_depth == 0 || iters == 0) {
    usage(argv[0]);
    return false;
  }
  if (linger_ms < 0) linger_ms = (a->nic.tx_loss_ppm != 0 || !a->nic.tx_drops.empty()) ? 3000 : 200;
  return true;
}

// The adapter, the page-aligned buffer and its MR, the CQ, the QP in INIT and rx_depth
// receives; *routs: the receives posted.
bool set_up(Ctx& c, const Args& a, int* routs) {
  const uint32_t size = a.size, rx_depth = a.rx_depth;
  c.size = size;
  c.rx_depth = rx_depth;
  if (c.nic.open(a.nic) != Status::kSuccess) return false;
  const long page = sysconf(_SC_PAGESIZE);
  c.storage.assign(size + static_cast<size_t>(page), 0);
  c.buf = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(c.storage.data()) + page - 1) &
                                     ~static_cast<uintptr_t>(page - 1));
  std::memset(c.buf, 0x7b, size);  // rc_pingpong's fill
  if (c.nic.pd().create_mr(false, nullptr, nullptr, &c.mr) != Status::kSuccess ||
      c.mr->register_mr(c.buf, size, mr_flag::kAllowLocalWrite, nullptr, nullptr) !=
          Status::kSuccess) {
    std::fprintf(stderr, "Couldn't register MR\n");
    return false;
  }
  c.key = c.mr->get_local_token();
  if (c.nic.adapter().create_cq(rx_depth + 1, nullptr, nullptr, nullptr, nullptr, &c.cq) !=
      Status::kSuccess) {
    std::fprintf(stderr, "Couldn't create CQ\n");
    return false;
  }
  if (c.nic.pd().create_qp(*c.cq, *c.cq, nullptr, rx_depth, 16, 1, 1, 0, nullptr, nullptr, &c.qp) !=
          Status::kSuccess ||
      (c.conn = c.qp->query_extension<QpConnectExtension>()) == nullptr) {
    std::fprintf(stderr, "Couldn't create QP\n");
    return false;
  }
  {
    QpAttributes at;
    at.state = QpState::kInit;
    at.access = 0;
    if (c.conn->modify(at, qp_attr_mask::kState | qp_attr_mask::kAccessFlags, nullptr, nullptr) !=
        Status::kSuccess) {
      std::fprintf(stderr, "Failed to modify QP to INIT\n");
      return false;
    }
  }
  *routs = post_recv(c, static_cast<int>(rx_depth));
  if (*routs < static_cast<int>(rx_depth)) {
    std::fprintf(stderr, "Couldn't post receive (%d)\n", *routs);
    return false;
  }
  return true;
}

// What the ping-pong counted.
struct Tally {
  uint32_t scnt = 0, rcnt = 0, bad = 0;
  size_t n_send = 0, n_recv = 0;
};

// The ping-pong itself: iters sends and receives each, the client first; false on any error
// (printed). expect: -c's pattern when this side knows it before the first receive.
bool ping_pong(Ctx& c, const Args& a, int routs, int pending, std::vector<uint8_t> expect,
               bool have_expect, Tally* t) {
  const uint32_t size = a.size, rx_depth = a.rx_depth, iters = a.iters;
  const bool validate = a.validate;
  uint32_t &scnt = t->scnt, &rcnt = t->rcnt, &bad = t->bad;
  size_t &n_send = t->n_send, &n_recv = t->n_recv;
  auto last_progress = std::chrono::steady_clock::now();
  ResultEx wc[16];
  uint32_t idle = 0;
  while (rcnt < iters || scnt < iters) {
    const size_t ne = c.cq->get_results_ex(wc);
    if (ne == 0) {
      if (++idle >= 256) {
        idle = 0;
        std::this_thread::yield();
        if (std::chrono::steady_clock::now() - last_progress > std::chrono::seconds(30)) {
          std::fprintf(stderr, "urnic: no completion for 30 s (scnt=%u rcnt=%u)\n%s\n", scnt, rcnt,
                       c.nic.counters_line().c_str());
          return false;
        }
      }
      continue;
    }
    last_progress = std::chrono::steady_clock::now();
    for (size_t i = 0; i < ne; ++i) {
      const ResultEx& r = wc[i];
      if (r.status != Status::kSuccess) {
        std::fprintf(stderr, "Failed status %s (%u) for wr_id %d\n%s\n",
                     std::string(to_string(r.status)).c_str(), r.provider_error_code,
                     static_cast<int>(reinterpret_cast<uintptr_t>(r.request_context)),
                     c.nic.counters_line().c_str());
        return false;
      }
      if (r.request_context == kSendWrid) {
        ++scnt;
        ++n_send;
        pending &= ~kSendBit;
      } else if (r.request_context == kRecvWrid) {
        ++n_recv;
        if (--routs <= 1) {
          routs += post_recv(c, static_cast<int>(rx_depth) - routs);
          if (routs < static_cast<int>(rx_depth)) {
            std::fprintf(stderr, "Couldn't post receive (%d)\n", routs);
            return false;
          }
        }
        if (r.bytes_transferred != size) ++bad;
        if (validate) {
          if (!have_expect) {
            expect.assign(c.buf, c.buf + size);
            have_expect = true;
          } else if (std::memcmp(expect.data(), c.buf, size) != 0) {
            ++bad;
          }
        }
        ++rcnt;
        pending &= ~kRecvBit;
      } else {
        std::fprintf(stderr, "Completion for unknown wr_id %p\n", r.request_context);
        return false;
      }
      if (scnt < iters && pending == 0) {
        if (post_send(c) != Status::kSuccess) {
          std::fprintf(stderr, "Couldn't post send\n");
          return false;
        }
        pending = kRecvBit | kSendBit;
      }
    }
  }
  return true;
}

int run(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, &a)) return 1;
  const uint32_t size = a.size, iters = a.iters;
  const std::string& servername = a.servername;
  srand48(static_cast<long>(getpid()) * static_cast<long>(std::time(nullptr)));
  Ctx c;
  int routs = 0;
  if (!set_up(c, a, &routs)) return 1;
  const long page = sysconf(_SC_PAGESIZE);
  const uint32_t mtu = a.mtu;
  const uint16_t port = a.port;
  const bool validate = a.validate;

  oob::PingpongDest my{0, c.conn->qpn(), static_cast<uint32_t>(lrand48() & 0xffffff), c.nic.gid()};
  std::printf("  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", my.lid, my.qpn,
              my.psn, gid_string(my.gid).c_str());
  std::fflush(stdout);  // a test waits for this line before starting the peer
  oob::PingpongDest rem;
  Status xs;
  if (!servername.empty()) {
    xs = oob::pingpong_client_exchange(servername, port, my, &rem);
    if (xs == Status::kSuccess && !connect_qp(c, mtu, my.psn, rem)) return 1;
  } else {
    xs = oob::pingpong_server_exchange(
        port, my, [&](const oob::PingpongDest& r) { return connect_qp(c, mtu, my.psn, r); }, &rem);
  }
  if (xs != Status::kSuccess) {
    std::fprintf(stderr, "Couldn't exchange destinations: %s\n",
                 std::string(to_string(xs)).c_str());
    return 1;
  }
  std::printf("  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", rem.lid, rem.qpn,
              rem.psn, gid_string(rem.gid).c_str());
  std::fflush(stdout);

  // -c: the client's pattern (the server echoes it back), or the server's first message.
  std::vector<uint8_t> expect;
  bool have_expect = false;
  if (validate && !servername.empty()) {
    // The first byte of each page stays 0: what a stock peer run with -c checks
    // (rc_pingpong writes i / page_size % sizeof(char) there).
    uint32_t x = 0x9E3779B9u ^ my.psn;
    for (uint32_t i = 0; i < size; ++i) {
      x = x * 1664525u + 1013904223u;
      c.buf[i] = i % page == 0 ? 0 : static_cast<uint8_t>(x >> 24);
    }
    expect.assign(c.buf, c.buf + size);
    have_expect = true;
  }

  timeval start{}, end{};
  gettimeofday(&start, nullptr);
  int pending = kRecvBit;
  if (!servername.empty()) {
    if (post_send(c) != Status::kSuccess) {
      std::fprintf(stderr, "Couldn't post send\n");
      return 1;
    }
    pending |= kSendBit;
  }
  Tally t;
  if (!ping_pong(c, a, routs, pending, std::move(expect), have_expect, &t)) return 1;
  gettimeofday(&end, nullptr);
  const uint32_t bad = t.bad;
  {
    const float usec =
        static_cast<float>((end.tv_sec - start.tv_sec) * 1000000 + (end.tv_usec - start.tv_usec));
    const long long bytes = static_cast<long long>(size) * iters * 2;
    std::printf("%lld bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec / 1000000.,
                bytes * 8. / usec);
    std::printf("%d iters in %.2f seconds = %.2f usec/iter\n", iters, usec / 1000000.,
                usec / iters);
    if (bad != 0) std::printf("invalid data in %u messages\n", bad);
  }
  std::fflush(stdout);
  // Keep the engine answering for a while: an ACK of ours that was lost (fault injection) makes
  // the peer send its last message again, and it must be acknowledged before we go.
  std::this_thread::sleep_for(std::chrono::milliseconds(a.linger_ms));
  std::printf("urnic: completions send=%zu recv=%zu bad=%u\n", t.n_send, t.n_recv, bad);
  c.nic.print_counters();
  return bad == 0 ? 0 : 1;
}

}  // namespace
}  // namespace urnic::tools

int main(int argc, char** argv) { return urnic::tools::run(argc, argv); }
