#include "bench/perf/cm_link.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace urnic::perf {
namespace {

std::string what(const std::string& step, Status s) {
  return step + ": " + std::string(to_string(s));
}

// Closes `h` and waits (bounded by the exchange's timeout) until the object is gone: a QP's
// close pends while its work is flushed, a connector's while a request of it runs.
template <class T>
void close_wait(Handle<T>& h, Oob& oob) {
  std::atomic<bool> gone{false};
  auto on_closed = [](void* c) { static_cast<std::atomic<bool>*>(c)->store(true); };
  if (h.close(on_closed, &gone) != Status::kPending) return;
  (void)oob.wait_until([&] { return gone.load(); }, "closing");
}

// Waits for `d`; false (the exchange's error set) unless it completed with kSuccess.
bool wait_done(Oob& oob, CmDone& d, const std::string& step) {
  if (!oob.wait_until([&] { return d.done.load(); }, step)) return false;
  const Status s = d.status.load();
  if (s == Status::kSuccess) return true;
  return oob.fail(what(step, s),
                  s == Status::kConnectionRefused ? OobFailure::kNoPeer : OobFailure::kOther);
}

const char* hint(Status s) {
  switch (s) {
    case Status::kConnectionRefused:
      return " (rejected, or nobody listens on the port: is the server running with -R?)";
    case Status::kIoTimeout:
      return " (the server's CM did not answer)";
    case Status::kHostUnreachable:
      return " (no ARP / ND answer from the server's address, or no route to it)";
    default:
      return "";
  }
}

bool retryable(Status s) {
  return s == Status::kConnectionRefused || s == Status::kIoTimeout ||
         s == Status::kHostUnreachable;
}

}  // namespace

CmInbox::~CmInbox() { close(); }

Status CmInbox::listen(int family, uint16_t port) {
  if (Status s = create_listener(a_, &CmInbox::on_connect, this, nullptr, nullptr, &listener_);
      s != Status::kSuccess)
    return s;
  sockaddr_storage any{};
  socklen_t len = 0;
  if (family == AF_INET6) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&any);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&any);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    len = sizeof(sockaddr_in);
  }
  return listener_->listen(reinterpret_cast<const sockaddr*>(&any), len, nullptr, nullptr);
}

void CmInbox::on_connect(void* ctx, Connector* c) {
  auto* self = static_cast<CmInbox*>(ctx);
  std::lock_guard lock(self->mu_);
  self->queue_.push_back(c);
}

Connector* CmInbox::take() {
  std::lock_guard lock(mu_);
  if (queue_.empty()) return nullptr;
  Connector* c = queue_.front();
  queue_.pop_front();
  return c;
}

void CmInbox::close() {
  listener_.reset();
  // Requests nobody took are refused by closing their connectors.
  while (Connector* c = take()) Handle<Connector> refuse(c);
}

bool CmConn::connect(Adapter& a, Oob& oob, Qp& qp, const sockaddr* dst, socklen_t dst_len,
                     uint32_t reads, double retry_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(retry_s);
  for (;;) {
    if (Status s = create_connector(a, nullptr, nullptr, &conn); s != Status::kSuccess)
      return oob.fail(what("create_connector", s));
    CmDone d;
    Status s =
        conn->connect(qp, nullptr, 0, dst, dst_len, reads, reads, nullptr, 0, &CmDone::on, &d);
    if (s != Status::kPending) return oob.fail(what("Connector::connect", s));
    if (!oob.wait_until([&] { return d.done.load(); }, "the connection (REQ / REP)")) return false;
    s = d.status.load();
    if (s == Status::kSuccess) break;
    close_wait(conn, oob);
    if (!retryable(s) || std::chrono::steady_clock::now() >= until)
      return oob.fail(what("the connection (rdma_cm)", s) + hint(s), OobFailure::kNoPeer);
    // The server listens only once its side of the record exchange is done: try again soon.
    const auto resume = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    (void)oob.wait_until([&] { return std::chrono::steady_clock::now() >= resume; }, "");
  }
  if (Status s = conn->complete_connect(&CmConn::on_disconnect, this, nullptr, nullptr);
      s != Status::kSuccess)
    return oob.fail(what("Connector::complete_connect (RTU)", s));
  return true;
}

bool CmConn::accept(Oob& oob, Connector* c, Qp& qp, uint32_t reads) {
  conn = Handle<Connector>(c);
  uint32_t in = 0, out = 0, len = 0;
  (void)conn->get_connection_data(&in, &out, nullptr, &len);
  CmDone d;
  // What the peer asked for, and no more than this side offers
  // (rdma_cm_connection_request_handler).
  const Status s = conn->accept(qp, std::min(in, reads), std::min(out, reads), nullptr, 0,
                                &CmConn::on_disconnect, this, &CmDone::on, &d);
  if (s != Status::kPending) return oob.fail(what("Connector::accept", s));
  return wait_done(oob, d, "the accept (REP / RTU)");
}

bool CmConn::disconnect(Oob& oob) {
  if (!conn) return true;
  CmDone d;
  const Status s = conn->disconnect(&CmDone::on, &d);
  if (s == Status::kSuccess) return true;  // the peer disconnected first
  if (s != Status::kPending) return oob.fail(what("Connector::disconnect", s));
  return wait_done(oob, d, "the disconnect (DREQ / DREP)");
}

void CmConn::close(Oob& oob) { close_wait(conn, oob); }

bool CmLink::create(std::string* err) {
  if (Status s = a_.create_pd(nullptr, nullptr, &pd_); s != Status::kSuccess) {
    *err = what("rdma_cm exchange: PD", s);
    return false;
  }
  const uint64_t engine0 = 1;  // the exchange's QP runs on the first engine
  if (Status s = a_.create_cq(32, nullptr, nullptr, engine0, nullptr, nullptr, &scq_);
      s != Status::kSuccess) {
    *err = what("rdma_cm exchange: CQ", s);
    return false;
  }
  if (Status s = a_.create_cq(32, nullptr, nullptr, engine0, nullptr, nullptr, &rcq_);
      s != Status::kSuccess) {
    *err = what("rdma_cm exchange: CQ", s);
    return false;
  }
  if (Status s = pd_->create_qp(*rcq_, *scq_, nullptr, kSlots, 4, 1, 1, 0, nullptr, nullptr, &qp_);
      s != Status::kSuccess) {
    *err = what("rdma_cm exchange: QP", s);
    return false;
  }
  mem_ = std::make_unique<uint8_t[]>((kSlots + 1) * kSlot);
  if (Status s = pd_->create_mr(false, nullptr, nullptr, &mr_); s != Status::kSuccess) {
    *err = what("rdma_cm exchange: MR", s);
    return false;
  }
  if (Status s = mr_->register_mr(mem_.get(), (kSlots + 1) * kSlot, mr_flag::kAllowLocalWrite,
                                  nullptr, nullptr);
      s != Status::kSuccess) {
    *err = what("rdma_cm exchange: registration", s);
    return false;
  }
  for (uint32_t i = 0; i < kSlots; ++i) {
    slot_ids_[i] = static_cast<uint8_t>(i);
    if (!post_receive(i)) {
      *err = "rdma_cm exchange: cannot post its receives";
      return false;
    }
  }
  return true;
}

bool CmLink::post_receive(uint32_t slot) {
  const Sge sge{reinterpret_cast<uint64_t>(mem_.get() + slot * kSlot), kSlot,
                mr_->get_local_token()};
  return qp_->receive(&slot_ids_[slot], {&sge, 1}) == Status::kSuccess;
}

bool CmLink::accept(int family, uint16_t port) {
  CmInbox inbox(a_);
  if (Status s = inbox.listen(family, port); s != Status::kSuccess)
    return oob_.fail(what("cannot listen (rdma_cm) on port " + std::to_string(port), s));
  Connector* c = nullptr;
  if (!oob_.wait_until([&] { return (c = inbox.take()) != nullptr; }, "")) {
    if (oob_.failure() != OobFailure::kTimeout) return false;
    oob_.clear_failure();  // as accept_one: no client is "no peer", not a silent one
    char b[128];
    std::snprintf(b, sizeof(b),
                  "no client connected (rdma_cm) to port %u within %.0f s (--timeout)", port,
                  oob_.timeout_s());
    return oob_.fail(b, OobFailure::kNoPeer);
  }
  if (!conn_.accept(oob_, c, *qp_, 0)) return false;
  connected_ = true;
  return true;
}

bool CmLink::connect(const sockaddr* dst, socklen_t len, double retry_s) {
  if (!conn_.connect(a_, oob_, *qp_, dst, len, 0, retry_s)) return false;
  connected_ = true;
  return true;
}

bool CmLink::send(const void* p, size_t n, std::string* err) {
  if (n > kSlot) {
    *err = "an exchange message of " + std::to_string(n) + " bytes";
    return false;
  }
  uint8_t* buf = mem_.get() + kSlots * kSlot;
  std::memcpy(buf, p, n);
  const Sge sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(n), mr_->get_local_token()};
  if (Status s = qp_->send(buf, {&sge, 1}, 0); s != Status::kSuccess) {
    *err = what("rdma_cm exchange: send", s);
    return false;
  }
  ++sending_;
  return true;
}

int CmLink::send_done(std::string* err) {
  ResultEx r;
  while (sending_ > 0 && scq_->get_results_ex({&r, 1}) == 1) {
    --sending_;
    if (r.status != Status::kSuccess) {
      *err = "rdma_cm exchange: a send completed with " + std::string(to_string(r.status)) +
             (conn_.peer_gone.load() ? " (the peer disconnected)" : "");
      broken_ = true;
      return -1;
    }
  }
  return sending_ == 0 ? 1 : 0;
}

void CmLink::poll_receives() {
  ResultEx r;
  while (rcq_ && rcq_->get_results_ex({&r, 1}) == 1) arrived_.push_back(r);
}

int CmLink::recv(void* p, size_t n, std::string* err) {
  poll_receives();
  if (arrived_.empty()) return 0;
  const ResultEx r = arrived_.front();
  arrived_.pop_front();
  if (r.status != Status::kSuccess) {
    broken_ = true;
    *err = "rdma_cm exchange: a receive completed with " + std::string(to_string(r.status));
    return -1;
  }
  const uint32_t slot = *static_cast<uint8_t*>(r.request_context);
  if (r.bytes_transferred != n) {
    *err = "the peer sent an exchange message of " + std::to_string(r.bytes_transferred) +
           " bytes where " + std::to_string(n) + " were due (a different perftest version?)";
    return -1;
  }
  std::memcpy(p, mem_.get() + slot * kSlot, n);
  if (!post_receive(slot)) {
    *err = "rdma_cm exchange: cannot post a receive";
    return -1;
  }
  return 1;
}

bool CmLink::has_message() {
  poll_receives();
  return !arrived_.empty() && arrived_.front().status == Status::kSuccess;
}

bool CmLink::closed() {
  poll_receives();
  return broken_ || conn_.peer_gone.load() ||
         (!arrived_.empty() && arrived_.front().status != Status::kSuccess);
}

void CmLink::close() {
  // The exchange is over: a disconnect that fails changes nothing; a peer that left already
  // needs none.
  if (connected_ && !closed()) (void)conn_.disconnect(oob_);
  connected_ = false;
  conn_.close(oob_);
  close_wait(qp_, oob_);
  close_wait(mr_, oob_);
  scq_.reset();
  rcq_.reset();
  pd_.reset();
}

bool CmTestConns::listen(int family, uint16_t port) {
  if (Status s = inbox_.listen(family, port); s != Status::kSuccess)
    return oob_.fail(what("cannot listen (rdma_cm) on port " + std::to_string(port), s));
  return true;
}

bool CmTestConns::accept_all(const std::vector<Qp*>& qps, uint32_t reads) {
  for (size_t i = 0; i < qps.size(); ++i) {
    Connector* c = nullptr;
    if (!oob_.wait_until([&] { return (c = inbox_.take()) != nullptr; },
                         "waiting for the connection request of QP " + std::to_string(i)))
      return false;
    conns_.push_back(std::make_unique<CmConn>());
    if (!conns_.back()->accept(oob_, c, *qps[i], reads)) return false;
  }
  inbox_.close();  // perftest's server destroys its listening id here
  return true;
}

bool CmTestConns::connect_all(const std::vector<Qp*>& qps, const sockaddr* dst, socklen_t len,
                              uint32_t reads, double retry_s) {
  for (Qp* qp : qps) {
    conns_.push_back(std::make_unique<CmConn>());
    if (!conns_.back()->connect(a_, oob_, *qp, dst, len, reads, retry_s)) return false;
  }
  return true;
}

bool CmTestConns::finish(bool server) {
  bool ok = true;
  uint32_t undisconnected = 0;
  // perftest's server disconnects right after the last record; one that exits without it
  // (ib_atomic_lat) leaves it to its kernel, which sends the DREQ as the process ends.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(kServerDreqWait);
  for (auto& c : conns_) {
    if (server) {
      ok = c->disconnect(oob_) && ok;
      continue;
    }
    if (!oob_.wait_until(
            [&] { return c->peer_gone.load() || std::chrono::steady_clock::now() >= until; },
            "waiting for the server's disconnect (DREQ)"))
      return false;
    if (c->peer_gone.load()) continue;
    ++undisconnected;
    (void)c->disconnect(oob_);  // the run is over: whether the server answers changes nothing
  }
  if (undisconnected > 0)
    std::fprintf(stderr,
                 "urnic-perf: the server did not disconnect %u of the test's QPs within %d s "
                 "(rdma_cm); disconnected them from this side\n",
                 undisconnected, kServerDreqWait);
  return ok;
}

void CmTestConns::close() {
  for (auto& c : conns_) c->close(oob_);
  conns_.clear();
  inbox_.close();
}

bool cm_resolve(const std::string& host, uint16_t port, bool ipv4, sockaddr_storage* out,
                socklen_t* len, std::string* err) {
  addrinfo hints{};
  hints.ai_family = ipv4 ? AF_INET : AF_INET6;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    *err = "cannot resolve " + host + " as an IPv" + (ipv4 ? "4" : "6") +
           " address (the adapter's GID -x decides): " + ::gai_strerror(rc);
    return false;
  }
  std::memcpy(out, res->ai_addr, res->ai_addrlen);
  *len = static_cast<socklen_t>(res->ai_addrlen);
  ::freeaddrinfo(res);
  return true;
}

}  // namespace urnic::perf
