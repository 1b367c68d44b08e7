// hello_rdma: the smallest complete urnic program, on the public API alone (include/urnic/).
//
// Two adapters in this process, wired back to back over a net_ring port pair and served by one
// engine on a worker lcore. B listens; A connects through the connection manager (as rdma_cm
// would), B accepts and hands A the address and token of a buffer in its private data. A then
// RDMA-WRITEs into that buffer and SENDs a message into a receive B posted; both are checked
// byte for byte. Every wait has a timeout; any failure prints why and exits non-zero.
//
//   build/examples/hello_rdma          (no hugepages, no NIC, no root needed; lcores 0-1)
#include <arpa/inet.h>
#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "urnic/urnic.h"  // the whole public API, bring-up (urnic/runtime.h) included

namespace {

using namespace std::chrono_literals;
using urnic::Status;

constexpr uint32_t kIpA = 0xC0000201;  // 192.0.2.1
constexpr uint32_t kIpB = 0xC0000202;  // 192.0.2.2
constexpr uint16_t kPort = 18515;
constexpr size_t kSize = 4096;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "hello_rdma: FAILED: %s\n", what.c_str());
  std::fflush(stdout);
  std::_Exit(1);  // no destructors: the engine and the control threads may still run
}
void check(Status s, const char* what, Status want = Status::kSuccess) {
  if (s != want)
    die(std::string(what) + " returned " + std::string(urnic::to_string(s)) + ", expected " +
        std::string(urnic::to_string(want)));
}
// Waits until `done` holds, at most `timeout`; dies with `what` otherwise.
template <class F>
void wait_for(F done, const char* what, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline)
      die(std::string("timed out after ") + std::to_string(timeout.count()) + " ms waiting for " +
          what);
    std::this_thread::sleep_for(1ms);
  }
}

// A kPending request's completion (runs on the adapter's control thread).
struct Completion {
  std::atomic<bool> done{false};
  std::atomic<Status> status{Status::kPending};
  static void on_request(void* ctx, Status s) {
    auto* c = static_cast<Completion*>(ctx);
    c->status.store(s);
    c->done.store(true);
  }
};

// What B tells A in its accept private data: where A may write.
struct Window {
  uint64_t address;
  uint32_t token;
};

// One side: PD, one CQ for both queues, one QP.
struct Side {
  std::unique_ptr<urnic::Adapter> adapter;
  urnic::Handle<urnic::Pd> pd;
  urnic::Handle<urnic::Cq> cq;
  urnic::Handle<urnic::Qp> qp;

  void open(uint16_t port, uint32_t ip, uint8_t mac_last, urnic::Engine& engine) {
    urnic::AdapterConfig c;
    c.port_id = port;
    c.ipv4 = ip;
    c.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, mac_last};
    c.mbufs = 4095;
    check(urnic::Adapter::open(c, engine, &adapter), "Adapter::open");
  }
  void create_objects() {
    check(adapter->create_pd(nullptr, nullptr, &pd), "create_pd");
    check(adapter->create_cq(64, nullptr, nullptr, nullptr, nullptr, &cq), "create_cq");
    check(pd->create_qp(*cq, *cq, this, 16, 16, 1, 1, 0, nullptr, nullptr, &qp), "create_qp");
  }
  urnic::Handle<urnic::Mr> reg(void* p, size_t len, uint32_t flags) {
    urnic::Handle<urnic::Mr> mr;
    check(pd->create_mr(false, nullptr, nullptr, &mr), "create_mr");
    check(mr->register_mr(p, len, flags, nullptr, nullptr), "register_mr");
    return mr;
  }
  // Waits for one completion of the request `ctx` and checks its status.
  urnic::ResultEx wait_completion(void* ctx, const char* what) {
    urnic::ResultEx r;
    wait_for([&] { return cq->get_results_ex({&r, 1}) == 1; }, what);
    if (r.request_context != ctx) die(std::string(what) + ": a completion of another request");
    if (r.status != Status::kSuccess)
      die(std::string(what) + " completed with " + std::string(urnic::to_string(r.status)));
    return r;
  }
};

// B's listener callback: accept the connection with B's QP, handing A the window.
struct Passive {
  Side* b = nullptr;
  Window window{};
  std::atomic<urnic::Connector*> connector{nullptr};
  Completion accepted;
  static void on_connect(void* ctx, urnic::Connector* c) {
    auto* self = static_cast<Passive*>(ctx);
    self->connector.store(c);  // B owns it now (closed at the end)
    const Status s = c->accept(*self->b->qp, 1, 1, &self->window, sizeof(self->window), nullptr,
                               nullptr, &Completion::on_request, &self->accepted);
    if (s != Status::kPending) Completion::on_request(&self->accepted, s);
  }
};

sockaddr_in v4(uint32_t ip, uint16_t port) {
  return sockaddr_in{
      .sin_family = AF_INET, .sin_port = htons(port), .sin_addr = {htonl(ip)}, .sin_zero = {}};
}

}  // namespace

int main() {
  // 1. EAL without hugepages on lcores 0 (this thread) and 1 (the engine), and two ports.
  urnic::RuntimeConfig rc;
  rc.program = "hello_rdma";
  rc.memory = urnic::RuntimeConfig::Memory::kNoHuge;
  rc.memory_mb = 256;
  rc.lcores = "0-1";
  if (urnic::runtime_init(rc) != Status::kSuccess) die(urnic::last_error());
  const std::vector<unsigned> workers = urnic::worker_lcores();
  if (workers.empty()) die("no worker lcore: the connection manager needs a launched engine");
  uint16_t port_a = 0, port_b = 0;
  if (urnic::create_ring_port_pair("hello", 1, &port_a, &port_b) != Status::kSuccess)
    die(urnic::last_error());

  // 2. One engine serves both adapters; it is launched once they are attached.
  urnic::EngineConfig ec;
  ec.idle_yield_after = 256;  // share the cores politely (tests run side by side)
  urnic::Engine engine(ec);
  {
    Side a, b;
    a.open(port_a, kIpA, 1, engine);
    b.open(port_b, kIpB, 2, engine);
    if (!engine.launch(workers.front()))
      die("cannot launch the engine on lcore " + std::to_string(workers.front()));
    a.create_objects();
    b.create_objects();

    std::vector<uint8_t> a_src(kSize), b_window(kSize, 0), b_recv(kSize, 0);
    for (size_t i = 0; i < kSize; ++i) a_src[i] = static_cast<uint8_t>(i * 7 + 3);
    auto mr_src = a.reg(a_src.data(), kSize, urnic::mr_flag::kAllowLocalWrite);
    auto mr_win = b.reg(b_window.data(), kSize, urnic::mr_flag::kAllowRemoteWrite);
    auto mr_recv = b.reg(b_recv.data(), kSize, urnic::mr_flag::kAllowLocalWrite);

    // B posts its receive before A can send, and listens.
    const urnic::Sge recv_sge{reinterpret_cast<uint64_t>(b_recv.data()), kSize,
                              mr_recv->get_local_token()};
    check(b.qp->receive(&b_recv, {&recv_sge, 1}), "Qp::receive");
    Passive passive;
    passive.b = &b;
    passive.window = {reinterpret_cast<uint64_t>(b_window.data()), mr_win->get_remote_token()};
    urnic::Handle<urnic::Listener> listener;
    check(urnic::create_listener(*b.adapter, &Passive::on_connect, &passive, nullptr, nullptr,
                                 &listener),
          "create_listener");
    const sockaddr_in any = v4(0, kPort);
    check(listener->listen(reinterpret_cast<const sockaddr*>(&any), sizeof(any), nullptr, nullptr),
          "Listener::listen");

    // 3. A connects, reads B's window from the REP's private data, and completes.
    urnic::Handle<urnic::Connector> conn;
    check(urnic::create_connector(*a.adapter, nullptr, nullptr, &conn), "create_connector");
    const sockaddr_in dst = v4(kIpB, kPort);
    Completion connected;
    check(conn->connect(*a.qp, nullptr, 0, reinterpret_cast<const sockaddr*>(&dst), sizeof(dst), 1,
                        1, nullptr, 0, &Completion::on_request, &connected),
          "Connector::connect", Status::kPending);
    wait_for([&] { return connected.done.load(); }, "the connection (REQ/REP)");
    check(connected.status.load(), "the connect completion");
    uint8_t pdata[196] = {};
    uint32_t plen = sizeof(pdata);
    check(conn->get_connection_data(nullptr, nullptr, pdata, &plen),
          "Connector::get_connection_data");
    Window w{};
    std::memcpy(&w, pdata, sizeof(w));
    check(conn->complete_connect(nullptr, nullptr, nullptr, nullptr), "complete_connect");
    wait_for([&] { return passive.accepted.done.load(); }, "B's accept to complete (RTU)");
    check(passive.accepted.status.load(), "the accept completion");
    urnic::Handle<urnic::Connector> b_conn(passive.connector.load());

    // 4. One RDMA WRITE into B's window, then one SEND into B's receive.
    const urnic::Sge src{reinterpret_cast<uint64_t>(a_src.data()), kSize,
                         mr_src->get_local_token()};
    int write_ctx = 0, send_ctx = 0;
    check(a.qp->write(&write_ctx, {&src, 1}, w.address, w.token, 0), "Qp::write");
    a.wait_completion(&write_ctx, "the WRITE's completion");
    if (b_window != a_src) die("the WRITE's bytes differ in B's window");
    const urnic::Sge hello{reinterpret_cast<uint64_t>(a_src.data()), 64, mr_src->get_local_token()};
    check(a.qp->send(&send_ctx, {&hello, 1}, 0), "Qp::send");
    a.wait_completion(&send_ctx, "the SEND's completion");
    const urnic::ResultEx r = b.wait_completion(&b_recv, "B's receive completion");
    if (r.bytes_transferred != 64)
      die("B received " + std::to_string(r.bytes_transferred) + " bytes, expected 64");
    if (std::memcmp(b_recv.data(), a_src.data(), 64) != 0) die("the SEND's bytes differ");

    // 5. Disconnect, then close everything before the adapters (Handles close on reset).
    Completion disconnected;
    check(conn->disconnect(&Completion::on_request, &disconnected), "Connector::disconnect",
          Status::kPending);
    wait_for([&] { return disconnected.done.load(); }, "the disconnect (DREQ/DREP)");
    check(disconnected.status.load(), "the disconnect completion");
    conn.reset();
    b_conn.reset();
    listener.reset();
    for (Side* s : {&a, &b}) s->qp.reset();
    mr_src.reset();
    mr_win.reset();
    mr_recv.reset();
    for (Side* s : {&a, &b}) {
      s->cq.reset();
      s->pd.reset();
      s->adapter.reset();  // blocks until every object of the adapter is gone
    }
  }
  engine.stop();
  std::printf("hello_rdma: OK: %zu-byte RDMA WRITE and 64-byte SEND over a net_ring pair\n", kSize);
  return 0;
}
