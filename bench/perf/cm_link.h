// perftest's -R (rdma_cm) for urnic-perf, through the public API's Listener and Connector (the IB
// CM as rdma_cm speaks it), as perftest 4.5 does it (src/perftest_communication.c):
//   - the exchange runs over RDMA instead of TCP (create_comm_struct, rdma_client_connect,
//     rdma_server_connect): one RC QP connected through the CM on the test's port, each
//     exchange step one SEND into the one receive the peer keeps posted (rdma_write_data,
//     rdma_read_data; a connection record is the binary struct pingpong_dest, rdma_write_keys);
//   - the test's QPs are connected through the CM too (create_rdma_cm_connection): after a
//     record exchange the server listens on the same port and accepts the requests in the order
//     they arrive, the client connects its QPs one after the other, and another record exchange
//     follows; the records still carry the buffers' addresses and keys. At the end the server
//     disconnects every test QP and both sides wait for the disconnects (rdma_cm_disconnect_nodes).
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench/perf/oob.h"
#include "urnic/urnic.h"

namespace urnic::perf {

// A request's completion (RequestCompletion), read by the waiting thread.
struct CmDone {
  std::atomic<bool> done{false};
  std::atomic<Status> status{Status::kPending};
  static void on(void* c, Status s) {
    auto* d = static_cast<CmDone*>(c);
    d->status.store(s);
    d->done.store(true);
  }
};

// A listener whose connect events queue their connectors for the waiting thread (the callbacks
// run on the adapter's control thread).
class CmInbox {
 public:
  explicit CmInbox(Adapter& a) : a_(a) {}
  ~CmInbox();
  // Listens on the wildcard address of `family` at `port`.
  Status listen(int family, uint16_t port);
  // The oldest request not yet taken (owned by the caller), or null.
  Connector* take();
  void close();

 private:
  static void on_connect(void* ctx, Connector* c);
  Adapter& a_;
  Handle<Listener> listener_;
  std::mutex mu_;
  std::deque<Connector*> queue_;
};

// One connection through the CM, either side, its waits made by `oob` (timeouts, the engine's
// steps, cancellation).
struct CmConn {
  Handle<Connector> conn;
  std::atomic<bool> peer_gone{false};  // the peer's disconnect (DisconnectEventCallback)
  static void on_disconnect(void* c) { static_cast<CmConn*>(c)->peer_gone.store(true); }
  // Client: connects `qp` to `dst`, retrying a refused or unanswered request for `retry_s`
  // seconds (perftest's server listens only after its side of the record exchange).
  bool connect(Adapter& a, Oob& oob, Qp& qp, const sockaddr* dst, socklen_t dst_len, uint32_t reads,
               double retry_s);
  // Server: accepts `c` (from a CmInbox) with `qp`.
  bool accept(Oob& oob, Connector* c, Qp& qp, uint32_t reads);
  // Disconnects and waits for the answer (a peer that disconnected first: at once).
  bool disconnect(Oob& oob);
  void close(Oob& oob);
};

// The exchange over RDMA: an OobLink (oob.h) for Oob::use_link.
class CmLink final : public OobLink {
 public:
  CmLink(Adapter& a, Oob& oob) : a_(a), oob_(oob) {}
  ~CmLink() override { close(); }
  // The PD, CQs, QP, buffer and its receives.
  bool create(std::string* err);
  // Server: listens on `port`, accepts the first request (perftest's rdma_server_connect).
  bool accept(int family, uint16_t port);
  // Client: connects to `dst` (rdma_client_connect), retrying for `retry_s` seconds.
  bool connect(const sockaddr* dst, socklen_t len, double retry_s);
  void close();

  bool send(const void* p, size_t n, std::string* err) override;
  int send_done(std::string* err) override;
  int recv(void* p, size_t n, std::string* err) override;
  bool has_message() override;
  bool closed() override;

 private:
  static constexpr uint32_t kSlots = 8;  // receives kept posted
  static constexpr uint32_t kSlot = 256;
  bool post_receive(uint32_t slot);
  void poll_receives();

  Adapter& a_;
  Oob& oob_;
  Handle<Pd> pd_;
  Handle<Cq> scq_, rcq_;
  Handle<Qp> qp_;
  Handle<Mr> mr_;
  std::unique_ptr<uint8_t[]> mem_;
  CmConn conn_;
  bool connected_ = false;
  bool broken_ = false;  // a receive completed with an error (the QP was flushed)
  int sending_ = 0;      // sends posted and not yet completed
  std::deque<ResultEx> arrived_;
  uint8_t slot_ids_[kSlots] = {};
};

// The test's QPs connected through the CM.
class CmTestConns {
 public:
  CmTestConns(Adapter& a, Oob& oob) : a_(a), oob_(oob), inbox_(a) {}
  ~CmTestConns() { close(); }
  // Server, before the record exchange that precedes the connections.
  bool listen(int family, uint16_t port);
  // Server: accepts one request per QP, in arrival order.
  bool accept_all(const std::vector<Qp*>& qps, uint32_t reads);
  // Client: connects each QP in turn.
  bool connect_all(const std::vector<Qp*>& qps, const sockaddr* dst, socklen_t len, uint32_t reads,
                   double retry_s);
  // The end (rdma_cm_disconnect_nodes): the server disconnects every connection; the client
  // waits up to kServerDreqWait seconds for the server's disconnects, then disconnects those
  // itself (and says so).
  bool finish(bool server);
  static constexpr int kServerDreqWait = 5;
  void close();

 private:
  Adapter& a_;
  Oob& oob_;
  CmInbox inbox_;
  std::vector<std::unique_ptr<CmConn>> conns_;
};

// The server's address for the CM: `host` (a name or address) of the adapter's IP version.
bool cm_resolve(const std::string& host, uint16_t port, bool ipv4, sockaddr_storage* out,
                socklen_t* len, std::string* err);

}  // namespace urnic::perf
