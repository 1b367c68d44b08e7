// urnic loopback demo: two adapters whose ports are wired back to back over a net_ring pair in one
// process, moving RC SEND messages through the public API (include/urnic/) exactly as an
// application would: urnic::runtime_init and create_ring_port_pair, Adapter::open, a PD, a CQ
// and a QP per side connected with the manual-connect extension, Qp::send / Qp::receive and
// Cq::get_results_ex.
//
// A sends -n messages of -s bytes (each with its own byte pattern) at path MTU -m, over IPv4 or
// IPv6 (-6); B keeps a window of receives posted and checks every byte of every message and the
// order of the completions. One engine serves both adapters: on the second lcore when there is
// one, else driven by this thread.
//
// Usage: urnic-loopback-demo [-n messages] [-s size] [-m mtu] [-6]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "urnic/urnic.h"

using namespace urnic;

namespace {

struct Options {
  uint64_t messages = 200000;
  uint32_t size = 4096;
  uint32_t mtu = 1024;
  bool ipv6 = false;
};

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-n") {
      o.messages = std::strtoull(next(), nullptr, 10);
    } else if (a == "-s") {
      o.size = static_cast<uint32_t>(std::strtoul(next(), nullptr, 10));
    } else if (a == "-m") {
      o.mtu = static_cast<uint32_t>(std::strtoul(next(), nullptr, 10));
    } else if (a == "-6") {
      o.ipv6 = true;
    } else {
      std::fprintf(stderr, "usage: %s [-n messages] [-s size] [-m mtu 256..4096] [-6]\n", argv[0]);
      std::exit(a == "-h" || a == "--help" ? 0 : 2);
    }
  }
  if (o.mtu != 256 && o.mtu != 512 && o.mtu != 1024 && o.mtu != 2048 && o.mtu != 4096) {
    std::fprintf(stderr, "path MTU must be 256, 512, 1024, 2048 or 4096\n");
    std::exit(2);
  }
  if (o.size == 0 || o.size > (1u << 20) || o.messages == 0) {
    std::fprintf(stderr, "size must be 1 .. 1048576 bytes and messages at least 1\n");
    std::exit(2);
  }
  return o;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "urnic-loopback-demo: %s\n", what.c_str());
  std::_Exit(1);  // no destructors: the engine may still run
}
void check(Status s, const char* what) {
  if (s != Status::kSuccess) die(std::string(what) + ": " + std::string(to_string(s)));
}

inline uint8_t pattern(uint64_t msg, uint32_t off) { return static_cast<uint8_t>(msg * 31 + off); }

constexpr uint32_t kDepth = 128;  // receives kept posted at B, sends outstanding at A

struct Side {
  std::unique_ptr<Adapter> adapter;
  Handle<Pd> pd;
  Handle<Cq> cq;
  Handle<Qp> qp;
  Handle<Mr> mr;
  std::vector<uint8_t> buf;
  uint32_t key = 0;

  void open(uint16_t port, uint8_t id, Engine& engine, size_t buf_len) {
    AdapterConfig c;
    c.port_id = port;
    c.ipv4 = 0xC0000200u | id;  // 192.0.2.x (documentation range)
    c.ipv6 = std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, id};
    c.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, id};
    check(Adapter::open(c, engine, &adapter), "Adapter::open");
    check(adapter->create_pd(nullptr, nullptr, &pd), "create_pd");
    check(adapter->create_cq(2 * kDepth, nullptr, nullptr, nullptr, nullptr, &cq), "create_cq");
    check(pd->create_qp(*cq, *cq, nullptr, kDepth, kDepth, 1, 1, 0, nullptr, nullptr, &qp),
          "create_qp");
    buf.assign(buf_len, 0);
    check(pd->create_mr(false, nullptr, nullptr, &mr), "create_mr");
    check(mr->register_mr(buf.data(), buf.size(), mr_flag::kAllowLocalWrite, nullptr, nullptr),
          "register_mr");
    key = mr->get_local_token();
  }
  void connect(Side& peer, const Options& o) {
    using namespace qp_attr_mask;
    auto* x = qp->query_extension<QpConnectExtension>();
    const LocalAddress to = peer.adapter->query_extension<AdapterExtension>()->local_address();
    QpAttributes at;
    at.state = QpState::kInit;
    check(x->modify(at, kState | kAccessFlags, nullptr, nullptr), "QP to INIT");
    at.state = QpState::kRtr;
    at.av.ipv6 = o.ipv6;
    at.av.dst_ipv4 = to.ipv4;
    at.av.dst_ipv6 = to.ipv6;
    at.av.dst_mac = to.mac;
    at.path_mtu = o.mtu;
    at.dest_qpn = peer.qp->query_extension<QpConnectExtension>()->qpn();
    at.rq_psn = 0x123456;
    check(
        x->modify(at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
                  nullptr, nullptr),
        "QP to RTR");
    at.state = QpState::kRts;
    at.sq_psn = 0x123456;
    check(x->modify(at, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic, nullptr,
                    nullptr),
          "QP to RTS");
  }
  void close() {
    qp.reset();
    mr.reset();
    cq.reset();
    pd.reset();
    adapter.reset();
  }
};

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_args(argc, argv);
  RuntimeConfig rc;
  rc.program = "urnic-loopback-demo";
  rc.memory = RuntimeConfig::Memory::kNoHuge;
  if (runtime_init(rc) != Status::kSuccess) die(std::string("EAL: ") + last_error());
  uint16_t pa = 0, pb = 0;
  if (create_ring_port_pair("demo", 1, &pa, &pb) != Status::kSuccess) die(last_error());
  EngineConfig ec;
  ec.idle_yield_after = 1024;
  Engine engine(ec);
  Side a, b;
  a.open(pa, 1, engine, opt.size);  // A sends from one buffer, rewritten per message
  b.open(pb, 2, engine, static_cast<size_t>(opt.size) * kDepth);  // a slot per posted receive
  const std::vector<unsigned> workers = worker_lcores();
  const bool manual = workers.empty() || !engine.launch(workers.front());
  a.connect(b, opt);
  b.connect(a, opt);
  std::printf(
      "urnic loopback demo: %llu RC SEND messages of %u B, path MTU %u, %s, over net_ring"
      " (engine %s)\n",
      static_cast<unsigned long long>(opt.messages), opt.size, opt.mtu, opt.ipv6 ? "IPv6" : "IPv4",
      manual ? "driven by this thread" : "on its own lcore");

  // B: a receive per slot; slot i of message m is i = m % kDepth (completions come in order).
  auto post_receive = [&](uint64_t m) {
    const uint32_t slot = static_cast<uint32_t>(m % kDepth);
    const Sge s{reinterpret_cast<uint64_t>(b.buf.data()) + uint64_t{slot} * opt.size, opt.size,
                b.key};
    check(b.qp->receive(reinterpret_cast<void*>(m), {&s, 1}), "Qp::receive");
  };
  uint64_t recv_posted = 0;
  for (; recv_posted < kDepth && recv_posted < opt.messages; ++recv_posted)
    post_receive(recv_posted);

  uint64_t sent = 0, send_done = 0, received = 0, bad = 0;
  ResultEx r[32];
  const auto t0 = std::chrono::steady_clock::now();
  auto last_progress = t0;
  while (received < opt.messages || send_done < opt.messages) {
    // A: one message at a time in its buffer (a SEND's buffer is free once it completes).
    if (sent == send_done && sent < opt.messages) {
      for (uint32_t i = 0; i < opt.size; ++i) a.buf[i] = pattern(sent, i);
      const Sge s{reinterpret_cast<uint64_t>(a.buf.data()), opt.size, a.key};
      check(a.qp->send(reinterpret_cast<void*>(sent), {&s, 1}, 0), "Qp::send");
      ++sent;
    }
    if (manual) engine.run_once();
    bool progress = false;
    for (size_t n = a.cq->get_results_ex(r), k = 0; k < n; ++k, progress = true) {
      if (r[k].status != Status::kSuccess) die("send completed with an error");
      ++send_done;
    }
    for (size_t n = b.cq->get_results_ex(r), k = 0; k < n; ++k, progress = true) {
      const auto m = reinterpret_cast<uint64_t>(r[k].request_context);
      if (r[k].status != Status::kSuccess || m != received || r[k].bytes_transferred != opt.size)
        die("receive " + std::to_string(received) + " completed wrongly");
      const uint8_t* p = b.buf.data() + (m % kDepth) * opt.size;
      for (uint32_t i = 0; i < opt.size; ++i) bad += p[i] != pattern(m, i);
      ++received;
      if (recv_posted < opt.messages) post_receive(recv_posted++);
    }
    const auto now = std::chrono::steady_clock::now();
    if (progress) last_progress = now;
    if (now - last_progress > std::chrono::seconds(10)) die("no completion for 10 s");
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  AdapterCounters ca;
  check(a.adapter->query_counters(&ca), "query_counters");
  std::printf("  messages %llu in %.3f s: %.0f msg/s, %.3f Gb/s of payload\n",
              static_cast<unsigned long long>(received), secs, static_cast<double>(received) / secs,
              static_cast<double>(received) * opt.size * 8 / secs / 1e9);
  std::printf("  A: %llu packets sent, %llu retransmitted; bytes checked at B: %llu, wrong: %llu\n",
              static_cast<unsigned long long>(ca.qps.tx_packets),
              static_cast<unsigned long long>(ca.qps.retransmits),
              static_cast<unsigned long long>(received * opt.size),
              static_cast<unsigned long long>(bad));
  a.close();
  b.close();
  engine.stop();
  std::printf("result: %s\n", bad == 0 && received == opt.messages ? "PASS" : "FAIL");
  return bad == 0 && received == opt.messages ? 0 : 1;
}
