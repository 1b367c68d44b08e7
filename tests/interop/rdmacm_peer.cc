// urnic-rdmacm-peer: the rdma_cm example programs' protocols played on urnic's connection manager
// (control/cm/), to run against the stock tools on Linux rxe (tests/interop):
//
//   --rping-server  | --rping-client --addr=IP     rping (librdmacm/examples/rping.c), port 7174:
//       per ping the client SENDs its source buffer (address, rkey, length: 16 big-endian
//       bytes), the server RDMA READs it, SENDs "go ahead", the client SENDs its sink buffer,
//       the server RDMA WRITEs the data back, SENDs "go ahead"; the client checks the echo (-V)
//       and disconnects after --count pings.
//   --cmatose-server | --cmatose-client --addr=IP  ucmatose (librdmacm/examples/cmatose.c), port
//       7471: the server SENDs --count messages of --size bytes, the client receives them and
//       SENDs as many back (its receive buffer: an echo), the server disconnects.
//
// urnic checks more than the stock tools: the server side of rping checks every READ against the
// text rping's client writes; both sides count every completion; the cmatose server checks the
// echoed messages byte for byte. Output: lines like the stock tools', then
// "rdmacm-peer: OK ..." with the counts, or "rdmacm-peer: FAIL ..." and exit status 1.
//
// --drop-mad=ATTR:N (REQ, REP, RTU, DREQ, DREP, MRA, REJ) loses the Nth MAD of that type urnic
// sends (AdapterConfig::Cm::drop_tx, testing builds), to see both ends recover by
// retransmission; the "cm" line counts them (mads_dropped).
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "examples/nic.h"

namespace urnic::tools {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

[[noreturn]] void fail(const std::string& why) {
  std::printf("rdmacm-peer: FAIL %s\n", why.c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

// struct rping_rdma_info: buf (be64), rkey (be32), size (be32).
struct RpingInfo {
  uint64_t buf = 0;
  uint32_t rkey = 0;
  uint32_t size = 0;
};
void put_info(uint8_t* p, const RpingInfo& i) {
  for (int k = 0; k < 8; ++k) p[k] = static_cast<uint8_t>(i.buf >> (56 - 8 * k));
  for (int k = 0; k < 4; ++k) p[8 + k] = static_cast<uint8_t>(i.rkey >> (24 - 8 * k));
  for (int k = 0; k < 4; ++k) p[12 + k] = static_cast<uint8_t>(i.size >> (24 - 8 * k));
}
RpingInfo get_info(const uint8_t* p) {
  RpingInfo i;
  for (int k = 0; k < 8; ++k) i.buf = i.buf << 8 | p[k];
  for (int k = 0; k < 4; ++k) i.rkey = i.rkey << 8 | p[8 + k];
  for (int k = 0; k < 4; ++k) i.size = i.size << 8 | p[12 + k];
  return i;
}

// rping_test_client()'s ping text: "rdma-ping-%d: " then letters 'A'..'z' from a start that
// advances per ping, NUL at the end.
void rping_text(char* buf, int size, int ping) {
  int start = 65 + ping % 58;
  const int cc = std::snprintf(buf, static_cast<size_t>(size), "rdma-ping-%d: ", ping);
  unsigned char c = static_cast<unsigned char>(start);
  for (int i = cc; i < size; ++i) {
    buf[i] = static_cast<char>(c);
    if (++c > 122) c = 65;
  }
  buf[size - 1] = 0;
}

// Members close in reverse order: the connection objects, the QP, the MRs and the CQ, and the
// NIC last. The tool's buffers live in the test functions, which return before the Peer goes.
struct Peer {
  Nic nic;
  Handle<Cq> cq;
  std::vector<Handle<Mr>> mrs;
  Handle<Qp> qp;
  QpConnectExtension* qpx = nullptr;
  FirstRequest listener;
  Handle<Connector> conn;
  Done peer_disconnected;
  std::vector<ResultEx> done;  // every completion, in order
  size_t sends = 0, recvs = 0, reads = 0, writes = 0;
  uint64_t bytes_checked = 0;

  uint32_t reg(void* p, size_t n, uint32_t flags) {
    Handle<Mr> mr;
    uint32_t token = 0;
    if (register_buffer(nic.pd(), p, n, flags, &mr, &token) != Status::kSuccess)
      fail("register_mr");
    mrs.push_back(std::move(mr));
    return token;
  }
  void make_qp(uint32_t sq, uint32_t rq) {
    if (nic.adapter().create_cq(4 * (sq + rq) + 8, nullptr, nullptr, nullptr, nullptr, &cq) !=
        Status::kSuccess)
      fail("create_cq");
    if (nic.pd().create_qp(*cq, *cq, nullptr, rq, sq, 1, 1, 0, nullptr, nullptr, &qp) !=
            Status::kSuccess ||
        (qpx = qp->query_extension<QpConnectExtension>()) == nullptr)
      fail("create_qp");
  }
  void post_recv(void* ctx, void* p, uint32_t n, uint32_t key) {
    const Sge sge{reinterpret_cast<uint64_t>(p), n, key};
    if (qp->receive(ctx, {&sge, 1}) != Status::kSuccess) fail("receive");
  }
  void send(void* p, uint32_t n, uint32_t key) {
    const Sge sge{reinterpret_cast<uint64_t>(p), n, key};
    if (qp->send(nullptr, {&sge, 1}, 0) != Status::kSuccess) fail("send");
  }
  void read(void* p, uint32_t n, uint32_t key, uint64_t raddr, uint32_t rkey) {
    const Sge sge{reinterpret_cast<uint64_t>(p), n, key};
    if (qp->read(nullptr, {&sge, 1}, raddr, rkey, 0) != Status::kSuccess) fail("read");
  }
  void write(void* p, uint32_t n, uint32_t key, uint64_t raddr, uint32_t rkey) {
    const Sge sge{reinterpret_cast<uint64_t>(p), n, key};
    if (qp->write(nullptr, {&sge, 1}, raddr, rkey, 0) != Status::kSuccess) fail("write");
  }
  // Listens on `port`; the first connection request is kept (later ones are rejected).
  void listen(uint16_t port) {
    if (listener.listen(nic.adapter(), port) != Status::kSuccess) fail("listen");
  }
  // Waits for the request, then accepts it with the QP.
  void accept() {
    conn = listener.wait(120s);
    if (!conn) fail("no connection request");
    Done accepted;
    if (conn->accept(*qp, 1, 1, nullptr, 0, &Done::on_event, &peer_disconnected, &Done::on_request,
                     &accepted) != Status::kPending)
      fail("accept");
    const auto a = accepted.wait(60s);
    if (!a || *a != Status::kSuccess)
      fail("accept completed with " + std::string(a ? to_string(*a) : "nothing"));
  }
  // Disconnects and waits for the peer's DREP.
  void disconnect() {
    Done d;
    if (conn->disconnect(&Done::on_request, &d) != Status::kPending) fail("disconnect");
    const auto ds = d.wait(60s);
    if (!ds || *ds != Status::kSuccess)
      fail("disconnect completed with " + std::string(ds ? to_string(*ds) : "nothing"));
  }

  // Next completion of `type` (others are recorded); nullopt when the peer disconnected first
  // (if `stop_on_disconnect`) or nothing came within `t`.
  std::optional<ResultEx> next(OperationType type, bool stop_on_disconnect = false,
                               std::chrono::milliseconds t = 60s) {
    const auto deadline = Clock::now() + t;
    ResultEx r[8];
    for (uint32_t idle = 0;;) {
      for (size_t i = 0; i < pending_.size(); ++i) {
        if (pending_[i].type == type) {
          ResultEx x = pending_[i];
          pending_.erase(pending_.begin() + static_cast<long>(i));
          return x;
        }
      }
      const size_t n = cq->get_results_ex(r);
      for (size_t i = 0; i < n; ++i) {
        if (r[i].status != Status::kSuccess)
          fail("completion " + std::to_string(static_cast<uint32_t>(r[i].type)) +
               " failed: " + std::string(to_string(r[i].status)) + " (wc " +
               std::to_string(r[i].provider_error_code) + ")");
        done.push_back(r[i]);
        switch (r[i].type) {
          case OperationType::kSend:
            ++sends;
            break;
          case OperationType::kReceive:
            ++recvs;
            break;
          case OperationType::kRead:
            ++reads;
            break;
          case OperationType::kWrite:
            ++writes;
            break;
          default:
            break;
        }
        pending_.push_back(r[i]);
      }
      if (n != 0) continue;
      if (stop_on_disconnect && peer_disconnected.done()) return std::nullopt;
      if (++idle >= 256) {
        idle = 0;
        if (Clock::now() > deadline) return std::nullopt;
        std::this_thread::yield();
      }
    }
  }
  // Drains completions without waiting. After a disconnect the QP is flushed: receives still
  // posted complete as cancelled (counted apart); anything else must have succeeded.
  void drain() {
    ResultEx r[8];
    for (size_t n; (n = cq->get_results_ex(r)) != 0;) {
      for (size_t i = 0; i < n; ++i) {
        if (r[i].status == Status::kCancelled && r[i].type == OperationType::kReceive) {
          ++flushed;
          continue;
        }
        if (r[i].status != Status::kSuccess)
          fail("completion failed: " + std::string(to_string(r[i].status)));
        done.push_back(r[i]);
        sends += r[i].type == OperationType::kSend;
        recvs += r[i].type == OperationType::kReceive;
      }
    }
  }
  size_t flushed = 0;

  std::vector<ResultEx> pending_;
};

struct Options {
  std::string mode;
  std::string addr;
  uint16_t port = 0;
  int count = 3;
  int size = -1;
  bool verbose = false;
  bool validate = true;
  uint8_t cm_timeout = 18;  // 4.096 us * 2^18 = 1.07 s between CM retransmissions
  // Path MTU our REQs offer (rdma_cm derives it from the netdev MTU: 1500 -> 1024, 9000 ->
  // 4096); as the passive side we take the REQ's.
  uint32_t mtu = 1024;
  std::vector<AdapterConfig::Cm::MadDrop> drops;
};

// Connects, retrying while the peer is not listening yet (REJ: no listener) or not answering
// ARP yet, for up to 60 s: the stock tool in the guest starts at about the same time.
void connect_retry(Peer& p, const sockaddr_in& dst) {
  if (Status s = tools::connect_retry(p.nic.adapter(), *p.qp, dst, {}, 60s, &p.conn);
      s != Status::kSuccess)
    fail("connect completed with " + std::string(to_string(s)));
}

// ---- rping ------------------------------------------------------------------------------------

int rping_server(Peer& p, const Options& o) {
  const int size = o.size > 0 ? o.size : 64;
  std::vector<uint8_t> recv_buf(16), send_buf(16, 0);
  std::vector<char> rdma_buf(65536, 0);
  const uint32_t krecv = p.reg(recv_buf.data(), 16, mr_flag::kAllowLocalWrite);
  const uint32_t ksend = p.reg(send_buf.data(), 16, mr_flag::kAllowLocalRead);
  const uint32_t krdma =
      p.reg(rdma_buf.data(), rdma_buf.size(),
            mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteRead | mr_flag::kAllowRemoteWrite);
  p.listen(o.port ? o.port : 7174);
  std::printf("rdmacm-peer: rping server listening on port %u\n", o.port ? o.port : 7174);
  std::fflush(stdout);
  // rping_setup_qp / rping_create_qp: SQ 16, RQ 2; one receive posted before accepting.
  p.make_qp(16, 2);
  p.post_recv(nullptr, recv_buf.data(), 16, krecv);
  p.accept();
  int pings = 0;
  for (;;) {
    // Wait for the client's source buffer (or its disconnect).
    auto r = p.next(OperationType::kReceive, true);
    if (!r) break;
    if (r->bytes_transferred != 16)
      fail("Received bogus data, size " + std::to_string(r->bytes_transferred));
    const RpingInfo src = get_info(recv_buf.data());
    p.post_recv(nullptr, recv_buf.data(), 16, krecv);
    if (src.size > rdma_buf.size() || src.size == 0) fail("source too large");
    p.read(rdma_buf.data(), src.size, krdma, src.buf, src.rkey);
    if (!p.next(OperationType::kRead)) fail("RDMA READ did not complete");
    // The READ brought the client's ping text: check it byte for byte.
    std::vector<char> want(src.size);
    rping_text(want.data(), static_cast<int>(src.size), pings);
    if (o.validate && std::memcmp(want.data(), rdma_buf.data(), src.size) != 0)
      fail("READ data differs from rping's ping " + std::to_string(pings));
    p.bytes_checked += src.size;
    if (o.verbose) std::printf("server ping data: %s\n", rdma_buf.data());
    p.send(send_buf.data(), 16, ksend);  // go ahead
    // The client's sink buffer.
    r = p.next(OperationType::kReceive, true);
    if (!r) fail("disconnected in the middle of ping " + std::to_string(pings));
    if (r->bytes_transferred != 16) fail("Received bogus data");
    const RpingInfo sink = get_info(recv_buf.data());
    p.post_recv(nullptr, recv_buf.data(), 16, krecv);
    const auto len = static_cast<uint32_t>(std::strlen(rdma_buf.data()) + 1);
    if (len > sink.size) fail("sink too small");
    p.write(rdma_buf.data(), len, krdma, sink.buf, sink.rkey);
    if (!p.next(OperationType::kWrite)) fail("RDMA WRITE did not complete");
    p.send(send_buf.data(), 16, ksend);  // go ahead
    ++pings;
    (void)size;
  }
  if (p.peer_disconnected.done()) std::fprintf(stderr, "server DISCONNECT EVENT...\n");
  // The client disconnected (DREQ answered with DREP); ours completes at once.
  if (p.conn->disconnect(nullptr, nullptr) != Status::kSuccess) fail("disconnect");
  p.drain();
  if (o.count > 0 && pings != o.count)
    fail("expected " + std::to_string(o.count) + " pings, got " + std::to_string(pings));
  std::printf("rdmacm-peer: rping server: %d pings\n", pings);
  return pings;
}

int rping_client(Peer& p, const Options& o, sockaddr_in dst) {
  const int size = o.size > 0 ? o.size : 64;
  std::vector<uint8_t> recv_buf(16), send_buf(32);
  std::vector<char> rdma_buf(static_cast<size_t>(size), 0), start_buf(static_cast<size_t>(size));
  const uint32_t kall =
      mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteRead | mr_flag::kAllowRemoteWrite;
  const uint32_t krecv = p.reg(recv_buf.data(), 16, mr_flag::kAllowLocalWrite);
  const uint32_t ksend = p.reg(send_buf.data(), send_buf.size(), mr_flag::kAllowLocalRead);
  const uint32_t krdma = p.reg(rdma_buf.data(), rdma_buf.size(), kall);
  const uint32_t kstart = p.reg(start_buf.data(), start_buf.size(), kall);
  p.make_qp(16, 2);
  p.post_recv(nullptr, recv_buf.data(), 16, krecv);
  dst.sin_port = htons(o.port ? o.port : 7174);
  connect_retry(p, dst);
  if (p.conn->complete_connect(&Done::on_event, &p.peer_disconnected, nullptr, nullptr) !=
      Status::kSuccess)
    fail("complete_connect");
  int ping = 0;
  for (; ping < o.count; ++ping) {
    rping_text(start_buf.data(), size, ping);
    // Two send slots: a buffer is rewritten only after its SEND completed.
    uint8_t* s1 = send_buf.data();
    uint8_t* s2 = send_buf.data() + 16;
    put_info(s1,
             {reinterpret_cast<uint64_t>(start_buf.data()), kstart, static_cast<uint32_t>(size)});
    p.send(s1, 16, ksend);
    if (!p.next(OperationType::kSend)) fail("SEND did not complete");
    auto r = p.next(OperationType::kReceive);
    if (!r || r->bytes_transferred != 16) fail("no go-ahead after the source buffer");
    p.post_recv(nullptr, recv_buf.data(), 16, krecv);
    put_info(s2, {reinterpret_cast<uint64_t>(rdma_buf.data()), krdma, static_cast<uint32_t>(size)});
    p.send(s2, 16, ksend);
    if (!p.next(OperationType::kSend)) fail("SEND did not complete");
    r = p.next(OperationType::kReceive);
    if (!r || r->bytes_transferred != 16) fail("no go-ahead after the sink buffer");
    p.post_recv(nullptr, recv_buf.data(), 16, krecv);
    if (o.validate && std::memcmp(start_buf.data(), rdma_buf.data(), static_cast<size_t>(size)))
      fail("data mismatch!");
    p.bytes_checked += static_cast<uint64_t>(size);
    if (o.verbose) std::printf("ping data: %s\n", rdma_buf.data());
    std::fflush(stdout);
  }
  p.disconnect();
  p.drain();
  std::printf("rdmacm-peer: rping client: %d pings\n", ping);
  return ping;
}

// ---- cmatose ----------------------------------------------------------------------------------

void fill_pattern(uint8_t* b, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 31 + 7);
}

int cmatose_server(Peer& p, const Options& o) {
  const auto size = static_cast<uint32_t>(o.size > 0 ? o.size : 100);
  const auto count = static_cast<uint32_t>(o.count);
  std::printf("cmatose: starting server\n");
  std::vector<uint8_t> msg(size), rbuf(size * count, 0);
  fill_pattern(msg.data(), size);
  const uint32_t kmsg = p.reg(msg.data(), size, mr_flag::kAllowLocalWrite);
  const uint32_t krb = p.reg(rbuf.data(), rbuf.size(), mr_flag::kAllowLocalWrite);
  p.listen(o.port ? o.port : 7471);
  std::printf("rdmacm-peer: cmatose server listening on port %u\n", o.port ? o.port : 7471);
  std::fflush(stdout);
  // init_node(): SQ and RQ of message_count; post_recvs() before rdma_accept().
  p.make_qp(count, count);
  for (uint32_t i = 0; i < count; ++i) p.post_recv(nullptr, rbuf.data() + i * size, size, krb);
  p.accept();
  std::printf("initiating data transfers\n");
  for (uint32_t i = 0; i < count; ++i) p.send(msg.data(), size, kmsg);
  std::printf("completing sends\n");
  for (uint32_t i = 0; i < count; ++i)
    if (!p.next(OperationType::kSend)) fail("send completions missing");
  std::printf("receiving data transfers\n");
  for (uint32_t i = 0; i < count; ++i) {
    auto r = p.next(OperationType::kReceive);
    if (!r) fail("receive missing");
    if (r->bytes_transferred != size) fail("receive length");
    // The client sends back its receive buffer: our message.
    if (std::memcmp(rbuf.data() + i * size, msg.data(), size) != 0) fail("echo differs");
    p.bytes_checked += size;
  }
  std::printf("data transfers complete\n");
  std::printf("cmatose: disconnecting\n");
  p.disconnect();
  std::printf("disconnected\n");
  std::printf("test complete\n");
  std::printf("return status 0\n");
  p.drain();
  return static_cast<int>(count);
}

int cmatose_client(Peer& p, const Options& o, sockaddr_in dst) {
  const auto size = static_cast<uint32_t>(o.size > 0 ? o.size : 100);
  const auto count = static_cast<uint32_t>(o.count);
  std::printf("cmatose: starting client\n");
  std::vector<uint8_t> rbuf(size * count, 0);
  const uint32_t krb = p.reg(rbuf.data(), rbuf.size(), mr_flag::kAllowLocalWrite);
  p.make_qp(count, count);
  for (uint32_t i = 0; i < count; ++i) p.post_recv(nullptr, rbuf.data() + i * size, size, krb);
  std::printf("cmatose: connecting\n");
  dst.sin_port = htons(o.port ? o.port : 7471);
  connect_retry(p, dst);
  if (p.conn->complete_connect(&Done::on_event, &p.peer_disconnected, nullptr, nullptr) !=
      Status::kSuccess)
    fail("complete_connect");
  std::printf("receiving data transfers\n");
  for (uint32_t i = 0; i < count; ++i) {
    auto r = p.next(OperationType::kReceive);
    if (!r) fail("receive missing");
    if (r->bytes_transferred != size) fail("receive length");
  }
  std::printf("sending replies\n");
  // cmatose sends its receive buffer back.
  for (uint32_t i = 0; i < count; ++i) p.send(rbuf.data() + (count - 1) * size, size, krb);
  for (uint32_t i = 0; i < count; ++i)
    if (!p.next(OperationType::kSend)) fail("send completions missing");
  std::printf("data transfers complete\n");
  // The server disconnects once it has our replies.
  if (!p.peer_disconnected.wait(60s)) fail("no disconnect from the server");
  if (p.conn->disconnect(nullptr, nullptr) != Status::kSuccess) fail("disconnect");
  std::printf("test complete\n");
  std::printf("return status 0\n");
  p.drain();
  return static_cast<int>(count);
}

int run(int argc, char** argv) {
  NicOptions nic_opts;
  if (!take_nic_options(&argc, argv, &nic_opts)) return 2;
  Options o;
  static const option kLong[] = {{"rping-server", no_argument, nullptr, 1},
                                 {"rping-client", no_argument, nullptr, 2},
                                 {"cmatose-server", no_argument, nullptr, 3},
                                 {"cmatose-client", no_argument, nullptr, 4},
                                 {"addr", required_argument, nullptr, 'a'},
                                 {"port", required_argument, nullptr, 'p'},
                                 {"count", required_argument, nullptr, 'C'},
                                 {"size", required_argument, nullptr, 'S'},
                                 {"verbose", no_argument, nullptr, 'v'},
                                 {"no-validate", no_argument, nullptr, 'N'},
                                 {"cm-timeout", required_argument, nullptr, 't'},
                                 {"drop-mad", required_argument, nullptr, 'D'},
                                 {"mtu", required_argument, nullptr, 'm'},
                                 {nullptr, 0, nullptr, 0}};
  for (int ch; (ch = getopt_long(argc, argv, "a:p:C:S:v", kLong, nullptr)) != -1;) {
    switch (ch) {
      case 1:
      case 2:
      case 3:
      case 4:
        o.mode = kLong[ch - 1].name;  // the mode is the option's name
        break;
      case 'a':
        o.addr = optarg;
        break;
      case 'p':
        o.port = static_cast<uint16_t>(std::atoi(optarg));
        break;
      case 'C':
        o.count = std::atoi(optarg);
        break;
      case 'S':
        o.size = std::atoi(optarg);
        break;
      case 'v':
        o.verbose = true;
        break;
      case 'N':
        o.validate = false;
        break;
      case 't':
        o.cm_timeout = static_cast<uint8_t>(std::atoi(optarg));
        break;
      case 'm':
        o.mtu = static_cast<uint32_t>(std::atoi(optarg));
        break;
      case 'D': {
        // IBTA 16.7.1 attribute IDs.
        static const std::map<std::string, uint16_t> kNames = {
            {"REQ", 0x10}, {"MRA", 0x11},  {"REJ", 0x12}, {"REP", 0x13},
            {"RTU", 0x14}, {"DREQ", 0x15}, {"DREP", 0x16}};
        const std::string v = optarg;
        const auto colon = v.find(':');
        auto it = kNames.find(v.substr(0, colon));
        const int nth = colon == std::string::npos ? 0 : std::atoi(v.c_str() + colon + 1);
        if (it == kNames.end() || nth <= 0) {
          std::fprintf(stderr, "bad --drop-mad (ATTR:N)\n");
          return 2;
        }
        o.drops.push_back({it->second, static_cast<uint32_t>(nth)});
        break;
      }
      default:
        return 2;
    }
  }
  const bool client = o.mode == "rping-client" || o.mode == "cmatose-client";
  if (o.mode.empty() || (client && o.addr.empty()) || o.count <= 0) {
    std::fprintf(stderr,
                 "usage: %s --rping-server|--rping-client|--cmatose-server|--cmatose-client "
                 "[--addr=IP] [--port=N] [--count=N] [--size=N] [-v] [--drop-mad=ATTR:N]\n%s",
                 argv[0], nic_usage());
    return 2;
  }
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  if (client && ::inet_pton(AF_INET, o.addr.c_str(), &dst.sin_addr) != 1) fail("bad --addr");
  Peer p;
  nic_opts.cm.response_timeout = o.cm_timeout;
  nic_opts.cm.timewait_ms = 500;
  nic_opts.cm.path_mtu = o.mtu;
  nic_opts.cm.drop_tx = o.drops;
  if (p.nic.open(nic_opts) != Status::kSuccess) return 1;
  const auto t0 = Clock::now();
  int n = 0;
  if (o.mode == "rping-server") n = rping_server(p, o);
  if (o.mode == "rping-client") n = rping_client(p, o, dst);
  if (o.mode == "cmatose-server") n = cmatose_server(p, o);
  if (o.mode == "cmatose-client") n = cmatose_client(p, o, dst);
  QpAttributes qa;
  if (p.qpx->query(&qa) != Status::kSuccess) fail("QpConnectExtension::query");
  AdapterCounters ac;
  if (p.nic.adapter().query_counters(&ac) != Status::kSuccess) fail("query_counters");
  const CmCounters& cc = ac.cm;
  std::printf(
      "rdmacm-peer: OK mode=%s rounds=%d sends=%zu recvs=%zu reads=%zu writes=%zu "
      "bytes_checked=%llu completions=%zu errors=0 flushed=%zu mtu=%u seconds=%.2f\n",
      o.mode.c_str(), n, p.sends, p.recvs, p.reads, p.writes,
      static_cast<unsigned long long>(p.bytes_checked), p.done.size(), p.flushed, qa.path_mtu,
      std::chrono::duration<double>(Clock::now() - t0).count());
  std::printf(
      "rdmacm-peer: cm mads_in=%llu mads_out=%llu retransmits=%llu duplicates=%llu "
      "mra_sent=%llu rej_received=%llu mads_dropped=%llu\n",
      static_cast<unsigned long long>(cc.mads_in), static_cast<unsigned long long>(cc.mads_out),
      static_cast<unsigned long long>(cc.retransmits),
      static_cast<unsigned long long>(cc.duplicates), static_cast<unsigned long long>(cc.mra_sent),
      static_cast<unsigned long long>(cc.rej_received),
      static_cast<unsigned long long>(cc.mads_dropped));
  // Keep answering for a moment (a DREQ retransmitted because our DREP was lost, late ACKs).
  std::this_thread::sleep_for(300ms);
  p.nic.print_counters();
  return 0;
}

}  // namespace
}  // namespace urnic::tools

int main(int argc, char** argv) { return urnic::tools::run(argc, argv); }
