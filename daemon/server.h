// urnicd's client socket (docs/daemon.md): a SOCK_SEQPACKET Unix socket, one connection per
// client process, served by the daemon's main thread from one epoll loop. Every message is
// decoded by ipc::decode_request before anything else looks at it; every client is known by its
// SO_PEERCRED (pid, uid, gid) from the moment it connects, and everything it holds is released
// when its socket closes, whatever the reason (exit, crash, kill -9).
//
// The daemon never blocks on a client: replies are sent without waiting, and a client whose
// receive queue is full (it does not read its replies) is disconnected. The client table is
// read by the telemetry thread (/urnicd/clients) under `mu_`; nothing here is on a data path.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/bridge.h"
#include "daemon/objects.h"
#include "daemon/protocol.h"
#include "urnic/adapter.h"

namespace urnic::daemon {

struct ServedAdapter {
  ipc::AdapterEntry entry{};
  Adapter* adapter = nullptr;  // owned by the daemon (urnicd.cc), outlives the server
};

struct ServerOptions {
  std::string socket_path;
  uint32_t socket_mode = 0660;
  gid_t socket_group = static_cast<gid_t>(-1);  // -1: leave the daemon's group
  uint32_t max_clients = 256;
  Quotas quotas;  // per client
};

struct ServerCounters {
  uint64_t accepted = 0;   // connections taken
  uint64_t refused = 0;    // over max_clients
  uint64_t closed = 0;     // connections gone (by the client or by the daemon)
  uint64_t dropped = 0;    // of them closed by the daemon (not reading, or refused)
  uint64_t requests = 0;   // messages received
  uint64_t malformed = 0;  // of them refused by decode_request or out of order
};

class Server {
 public:
  // `bridges[i]` moves client rings for the daemon's engine i (they outlive the server).
  Server(ServerOptions opts, std::vector<ServedAdapter> adapters, std::vector<Bridge*> bridges);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens (the socket's mode and group applied before anyone may connect). A stale
  // socket file is replaced: the caller holds the socket's lock, so no live daemon owns it.
  // false with *err.
  bool listen(std::string* err);
  // Serves clients until `sigfd` (a signalfd) becomes readable; returns the signal's number.
  int run(int sigfd);
  // Closes every client connection (they see the daemon gone) and the listening socket, and
  // removes the socket file.
  void shutdown();

  // For telemetry and urnicctl (any thread).
  std::vector<ipc::ClientEntry> clients() const;
  ServerCounters counters() const;
  const std::vector<ServedAdapter>& adapters() const noexcept { return adapters_; }
  const std::vector<Bridge*>& bridges() const noexcept { return bridges_; }

 private:
  struct Client;
  void accept_all();
  // Reads and answers what client `c` sent; false when it is to be closed.
  bool serve(Client& c);
  bool answer(Client& c, const ipc::Request& r);
  bool reply(Client& c, const void* msg, size_t size);
  bool reply_status(Client& c, const ipc::Header& h, Status s);
  bool on_hello(Client& c, const ipc::HelloReq& r);
  bool on_query_adapter(Client& c, const ipc::QueryAdapterReq& r);
  bool on_list_clients(Client& c, const ipc::ListClientsReq& r);
  bool on_object(Client& c, const ipc::Request& r);
  // After an object request: its refusal logged when the environment caused it, the client's
  // entry counts (ListClients, telemetry) updated.
  void after_object(Client& c, const ipc::Request& r, Status s);
  bool reply_fd(Client& c, const void* msg, size_t size, int fd);
  void close_client(Client* c, bool by_daemon);
  // CreateAh that must find a MAC (ARP / ND, up to 2 s when nobody answers): resolved on a thread
  // of its own so that this thread keeps serving the other clients; the client's socket is not
  // read meanwhile (it waits for this reply anyway). The result comes back through resolve_fd_.
  bool resolve_ah(Client& c, const ipc::CreateAhReq& r);
  void on_resolved();

  struct Resolved {
    uint32_t client = 0;  // ClientEntry::id
    ipc::Header h{};
    AddressHandle ah;
    Status status = Status::kSuccess;
  };
  int resolve_fd_ = -1;    // an eventfd: results wait in resolved_
  std::mutex resolve_mu_;  // resolved_
  std::vector<Resolved> resolved_;
  std::vector<std::pair<uint32_t, std::thread>> resolvers_;  // by client id; this thread's

  const ServerOptions opts_;
  const std::vector<ServedAdapter> adapters_;
  const std::vector<Bridge*> bridges_;
  int epfd_ = -1, lfd_ = -1;
  uint32_t next_id_ = 1;
  mutable std::mutex mu_;  // clients_ and counters_ for readers on other threads
  std::vector<std::unique_ptr<Client>> clients_;
  ServerCounters counters_;
};

}  // namespace urnic::daemon
