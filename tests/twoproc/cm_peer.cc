// urnic-cm-peer: one end of a two-process connection through urnic's connection manager
// (control/cm/), for tests/twoproc. Both processes run urnic on their own port:
//
//   server: urnic-cm-peer --vdev=... --ip=10.0.0.1 --listen[=PORT]
//   client: urnic-cm-peer --vdev=... --ip=10.0.0.2 --connect=10.0.0.1[:PORT]
//
// 1. CM: the client's REQ carries its WRITE window (address, rkey, length) in the private data,
//    the server's REP carries its own; both check what they got. The client completes with RTU.
// 2. Data, one round per size (--sizes): the client WRITEs a pattern into the server's window,
//    then SENDs another pattern; the server checks both byte for byte when the SEND arrives (the
//    WRITE landed before it: IBTA ordering), then does the same towards the client, which
//    checks. Every completion is counted and must succeed.
// 3. Teardown: the side named by --disconnect (client by default) calls disconnect() (DREQ);
//    the other sees its disconnect event, then calls disconnect() too (done at once).
// Output: "cm-peer: ..." lines; the last is "cm-peer: OK ..." with the counts, or the process
// exits non-zero with "cm-peer: FAIL ...".
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "examples/nic.h"

namespace urnic::tools {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr uint16_t kDefaultPort = 20079;
constexpr uint32_t kMagic = 0x75636d31;  // "ucm1"

[[noreturn]] void fail(const std::string& why) {
  std::printf("cm-peer: FAIL %s\n", why.c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

void fill(uint8_t* p, uint32_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 0x9E3779B9u;
  for (uint32_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = static_cast<uint8_t>(x);
  }
}

bool matches(const uint8_t* p, uint32_t n, uint32_t seed) {
  std::vector<uint8_t> want(n);
  fill(want.data(), n, seed);
  return std::memcmp(p, want.data(), n) == 0;
}

// The window a side advertises: magic, address, rkey, length (big-endian), 20 bytes.
struct Window {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t len = 0;
};
std::vector<uint8_t> encode(const Window& w) {
  std::vector<uint8_t> v(20);
  auto put = [&](size_t off, uint64_t x, int n) {
    for (int i = 0; i < n; ++i) v[off + i] = static_cast<uint8_t>(x >> (8 * (n - 1 - i)));
  };
  put(0, kMagic, 4);
  put(4, w.addr, 8);
  put(12, w.rkey, 4);
  put(16, w.len, 4);
  return v;
}
std::optional<Window> decode(const uint8_t* p) {
  auto get = [&](size_t off, int n) {
    uint64_t x = 0;
    for (int i = 0; i < n; ++i) x = x << 8 | p[off + i];
    return x;
  };
  if (get(0, 4) != kMagic) return std::nullopt;
  return Window{get(4, 8), static_cast<uint32_t>(get(12, 4)), static_cast<uint32_t>(get(16, 4))};
}

// Members close in reverse order: the connection objects, the QP, the MRs and CQs, then the
// buffers, and the NIC last.
struct Peer {
  Nic nic;
  std::vector<uint8_t> window, src, recv_area;
  uint32_t max_size = 0;
  std::vector<uint32_t> sizes;
  std::vector<ResultEx> sends, recvs;
  uint64_t bytes_checked = 0;
  Handle<Cq> scq, rcq;
  Handle<Mr> mwin, msrc, mrecv;
  uint32_t kwin = 0, ksrc = 0, krecv = 0;
  Handle<Qp> qp;
  QpConnectExtension* qpx = nullptr;
  FirstRequest listener;
  Handle<Connector> conn;

  uint32_t reg(Handle<Mr>& mr, void* p, size_t n, uint32_t flags) {
    uint32_t token = 0;
    if (register_buffer(nic.pd(), p, n, flags, &mr, &token) != Status::kSuccess)
      fail("register_mr");
    return token;
  }
};

void post_recvs(Peer& p) {
  for (size_t i = 0; i < p.sizes.size(); ++i) {
    const Sge sge{reinterpret_cast<uint64_t>(p.recv_area.data()) + i * p.max_size, p.max_size,
                  p.krecv};
    if (p.qp->receive(reinterpret_cast<void*>(i), {&sge, 1}) != Status::kSuccess) fail("receive");
  }
}

// WRITE pattern `seed_w` into the peer's window, then SEND pattern `seed_s`; wait for both.
void write_and_send(Peer& p, const Window& peer_win, uint32_t size, uint32_t seed_w,
                    uint32_t seed_s) {
  if (size > peer_win.len) fail("peer window too small");
  fill(p.src.data(), size, seed_w);
  fill(p.src.data() + p.max_size, size, seed_s);
  const Sge w{reinterpret_cast<uint64_t>(p.src.data()), size, p.ksrc};
  if (p.qp->write(nullptr, {&w, 1}, peer_win.addr, peer_win.rkey, 0) != Status::kSuccess)
    fail("post WRITE");
  const Sge sd{reinterpret_cast<uint64_t>(p.src.data()) + p.max_size, size, p.ksrc};
  if (p.qp->send(nullptr, {&sd, 1}, 0) != Status::kSuccess) fail("post SEND");
  const size_t want = p.sends.size() + 2;
  if (poll_cq(*p.scq, p.sends, want, 30s) < want) fail("send completions missing");
}

// Waits for the next receive and checks it and the window.
void receive_and_check(Peer& p, size_t round, uint32_t size, uint32_t seed_w, uint32_t seed_s) {
  const size_t want = p.recvs.size() + 1;
  if (poll_cq(*p.rcq, p.recvs, want, 30s) < want) fail("receive missing");
  const ResultEx& r = p.recvs.back();
  if (r.status != Status::kSuccess) fail("receive status " + std::string(to_string(r.status)));
  if (reinterpret_cast<size_t>(r.request_context) != round) fail("receive out of order");
  if (r.bytes_transferred != size) fail("receive length");
  if (!matches(p.recv_area.data() + round * p.max_size, size, seed_s)) fail("SEND data differs");
  if (!matches(p.window.data(), size, seed_w)) fail("WRITE data differs");
  p.bytes_checked += 2ull * size;
}

int run(int argc, char** argv) {
  NicOptions nic_opts;
  if (!take_nic_options(&argc, argv, &nic_opts)) return 2;
  bool server = false;
  std::string connect_to;
  uint16_t port = kDefaultPort;
  std::string sizes = "1,64,1000,1024,1025,4096,5000,16384,65536";
  std::string disconnect_by = "client";
  uint32_t mtu = 1024;
  static const option kLong[] = {
      {"listen", optional_argument, nullptr, 'l'},     {"connect", required_argument, nullptr, 'c'},
      {"sizes", required_argument, nullptr, 's'},      {"mtu", required_argument, nullptr, 'm'},
      {"disconnect", required_argument, nullptr, 'd'}, {nullptr, 0, nullptr, 0}};
  for (int ch; (ch = getopt_long(argc, argv, "", kLong, nullptr)) != -1;) {
    switch (ch) {
      case 'l':
        server = true;
        if (optarg) port = static_cast<uint16_t>(std::atoi(optarg));
        break;
      case 'c': {
        connect_to = optarg;
        if (auto c = connect_to.find(':'); c != std::string::npos) {
          port = static_cast<uint16_t>(std::atoi(connect_to.c_str() + c + 1));
          connect_to.resize(c);
        }
        break;
      }
      case 's':
        sizes = optarg;
        break;
      case 'm':
        mtu = static_cast<uint32_t>(std::atoi(optarg));
        break;
      case 'd':
        disconnect_by = optarg;
        break;
      default:
        return 2;
    }
  }
  if (server == !connect_to.empty()) {
    std::fprintf(stderr, "exactly one of --listen / --connect\n");
    return 2;
  }
  Peer p;
  {
    std::stringstream ss(sizes);
    for (std::string t; std::getline(ss, t, ',');) {
      p.sizes.push_back(static_cast<uint32_t>(std::stoul(t)));
      p.max_size = std::max(p.max_size, p.sizes.back());
    }
  }
  nic_opts.cm.path_mtu = mtu;
  nic_opts.cm.response_timeout = 16;  // 268 ms: quick retries if a MAD is lost
  nic_opts.cm.timewait_ms = 200;
  if (p.nic.open(nic_opts) != Status::kSuccess) return 1;
  auto& ad = p.nic.adapter();
  const size_t nsizes = p.sizes.size();
  if (ad.create_cq(4 * static_cast<uint32_t>(nsizes) + 8, nullptr, nullptr, nullptr, nullptr,
                   &p.scq) != Status::kSuccess ||
      ad.create_cq(static_cast<uint32_t>(nsizes) + 8, nullptr, nullptr, nullptr, nullptr, &p.rcq) !=
          Status::kSuccess)
    fail("create_cq");
  p.window.assign(p.max_size, 0);
  p.src.assign(2ull * p.max_size, 0);
  p.recv_area.assign(nsizes * p.max_size, 0);
  p.kwin = p.reg(p.mwin, p.window.data(), p.max_size,
                 mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteWrite);
  p.ksrc = p.reg(p.msrc, p.src.data(), p.src.size(), mr_flag::kAllowLocalWrite);
  p.krecv = p.reg(p.mrecv, p.recv_area.data(), p.recv_area.size(), mr_flag::kAllowLocalWrite);
  // A new QP is in INIT: every receive is posted before the peer can send (connect() and
  // accept() take a QP in INIT).
  if (p.nic.pd().create_qp(*p.rcq, *p.scq, nullptr, static_cast<uint32_t>(nsizes) + 1, 16, 1, 1, 0,
                           nullptr, nullptr, &p.qp) != Status::kSuccess ||
      (p.qpx = p.qp->query_extension<QpConnectExtension>()) == nullptr)
    fail("create_qp");
  post_recvs(p);
  const std::vector<uint8_t> mine =
      encode(Window{reinterpret_cast<uint64_t>(p.window.data()), p.kwin, p.max_size});

  Window peer_win;
  Done peer_disconnected;
  const auto t0 = Clock::now();
  auto window_from = [&](Connector& c, const char* what) {
    uint8_t pd[196];  // REP private data; a REQ's is 56 bytes
    uint32_t len = sizeof(pd);
    if (c.get_connection_data(nullptr, nullptr, pd, &len) != Status::kSuccess)
      fail(std::string(what) + " data");
    auto w = decode(pd);
    if (!w) fail(std::string(what) + " private data has no window");
    return *w;
  };
  if (server) {
    if (p.listener.listen(ad, port) != Status::kSuccess) fail("listen");
    std::printf("cm-peer: listening on port %u\n", port);
    std::fflush(stdout);
    p.conn = p.listener.wait(120s);
    if (!p.conn) fail("no connection request");
    peer_win = window_from(*p.conn, "REQ");
    Done accepted;
    if (p.conn->accept(*p.qp, 1, 1, mine.data(), static_cast<uint32_t>(mine.size()),
                       &Done::on_event, &peer_disconnected, &Done::on_request,
                       &accepted) != Status::kPending)
      fail("accept");
    const auto a = accepted.wait(30s);
    if (!a || *a != Status::kSuccess)
      fail("accept completed with " + std::string(a ? to_string(*a) : "nothing"));
  } else {
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(port);
    if (::inet_pton(AF_INET, connect_to.c_str(), &dst.sin_addr) != 1) fail("bad --connect address");
    // The server may not listen yet: the connect is retried with a new connector.
    if (Status s = connect_retry(ad, *p.qp, dst, mine, 60s, &p.conn); s != Status::kSuccess)
      fail("connect completed with " + std::string(to_string(s)));
    peer_win = window_from(*p.conn, "REP");
    if (p.conn->complete_connect(&Done::on_event, &peer_disconnected, nullptr, nullptr) !=
        Status::kSuccess)
      fail("complete_connect");
  }
  QpAttributes qa;
  if (p.qpx->query(&qa) != Status::kSuccess) fail("QpConnectExtension::query");
  std::printf("cm-peer: established in %.1f ms: local QPN 0x%06x, remote QPN 0x%06x, MTU %u\n",
              std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), p.qpx->qpn(),
              qa.dest_qpn, qa.path_mtu);
  std::fflush(stdout);

  for (size_t i = 0; i < nsizes; ++i) {
    const uint32_t size = p.sizes[i];
    const auto r = static_cast<uint32_t>(i);
    if (!server) {
      write_and_send(p, peer_win, size, 1000 + r, 2000 + r);
      receive_and_check(p, i, size, 3000 + r, 4000 + r);
    } else {
      receive_and_check(p, i, size, 1000 + r, 2000 + r);
      write_and_send(p, peer_win, size, 3000 + r, 4000 + r);
    }
  }
  size_t errors = 0;
  for (const auto& r : p.sends) errors += r.status != Status::kSuccess;
  for (const auto& r : p.recvs) errors += r.status != Status::kSuccess;
  if (errors != 0) fail("completions with errors: " + std::to_string(errors));

  const bool me_first = disconnect_by == (server ? "server" : "client");
  if (me_first) {
    Done done;
    if (p.conn->disconnect(&Done::on_request, &done) != Status::kPending) fail("disconnect");
    const auto d = done.wait(30s);
    if (!d || *d != Status::kSuccess)
      fail("disconnect completed with " + std::string(d ? to_string(*d) : "nothing"));
    std::printf("cm-peer: disconnected (DREQ sent, DREP received)\n");
  } else {
    if (!peer_disconnected.wait(30s)) fail("no disconnect event");
    std::printf("cm-peer: disconnect event\n");
    if (p.conn->disconnect(nullptr, nullptr) != Status::kSuccess)
      fail("disconnect after the peer's");
    std::printf("cm-peer: disconnected by the peer (DREQ received, DREP sent)\n");
  }
  if (p.qpx->state() != QpState::kErr) fail("QP not flushed after disconnect");
  AdapterCounters c;
  if (ad.query_counters(&c) != Status::kSuccess) fail("query_counters");
  std::printf(
      "cm-peer: OK rounds=%zu sends=%zu recvs=%zu bytes_checked=%llu completions=%zu "
      "errors=0 mads_in=%llu mads_out=%llu retransmits=%llu\n",
      nsizes, p.sends.size(), p.recvs.size(), static_cast<unsigned long long>(p.bytes_checked),
      p.sends.size() + p.recvs.size(), static_cast<unsigned long long>(c.cm.mads_in),
      static_cast<unsigned long long>(c.cm.mads_out),
      static_cast<unsigned long long>(c.cm.retransmits));
  p.nic.print_counters();
  return 0;
}

}  // namespace
}  // namespace urnic::tools

int main(int argc, char** argv) { return urnic::tools::run(argc, argv); }
