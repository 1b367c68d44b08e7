// The client side of attach mode (include/urnic/daemon.h): one SOCK_SEQPACKET connection to
// urnicd per process, one request and its reply at a time under a mutex (control path only:
// nothing here is on a post or poll path). Every reply is checked by ipc::decode_reply before
// a field of it is used, and every wait has kDaemonReplyTimeoutMs.
#include "urnic/daemon.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "control/attach.h"
#include "control/last_error.h"
#include "daemon/fdpass.h"
#include "daemon/protocol.h"

namespace urnic {
namespace {

struct Connection {
  std::mutex mu;
  int fd = -1;
  bool gone = false;  // the daemon closed the connection (or it broke): kDeviceRemoved from now
  uint32_t seq = 0;
  DaemonInfo info;
};

Connection& conn() {
  static Connection* c = new Connection;  // never destroyed: usable from atexit handlers
  return *c;
}

Status fail(Status s, std::string why) { return detail::fail_with(s, std::move(why)); }

std::string program_name() {
  const char* p = ::program_invocation_short_name;
  std::string n;
  for (const char* c = p; c != nullptr && *c != '\0' && n.size() < ipc::kNameSize - 1; ++c) {
    const bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                    (*c >= '0' && *c <= '9') || *c == '_' || *c == '.' || *c == '-';
    n.push_back(ok ? *c : '_');
  }
  return n.empty() ? std::string("client") : n;
}

Status connect_status(int e, const std::string& path) {
  switch (e) {
    case EACCES:
    case EPERM:
      return fail(Status::kAccessDenied, "attach: permission denied on the daemon socket " + path +
                                             " (its owner, group and mode decide who may attach)");
    case ENOENT:
    case ECONNREFUSED:
    case ENOTSOCK:
      return fail(Status::kDeviceNotReady, "attach: no urnicd listening at " + path + " (" +
                                               std::strerror(e) +
                                               "); start it, or set URNIC_DAEMON to its socket");
    default:
      return fail(Status::kDeviceNotReady,
                  "attach: cannot connect to " + path + ": " + std::strerror(e));
  }
}

// The daemon went away: every call from now on fails with kDeviceRemoved (mu held).
Status daemon_gone(Connection& c, const char* what) {
  c.gone = true;
  return fail(Status::kDeviceRemoved, std::string(what) + ": the daemon at " + c.info.socket_path +
                                          " closed the connection (it exited or was killed)");
}

// Sends `req` (a request struct of `type`) and receives its reply into `rep` (mu held), and the
// descriptor that comes with it into *fd when `fd` is not null.
Status transact(Connection& c, ipc::MsgType type, void* req, size_t req_size, void* rep,
                size_t rep_size, const char* what, int* fd = nullptr, int send_fd = -1) {
  if (fd != nullptr) *fd = -1;
  if (c.fd < 0) return fail(Status::kInvalidDeviceState, std::string(what) + ": not attached");
  if (c.gone) return daemon_gone(c, what);
  auto* h = static_cast<ipc::Header*>(req);
  *h = ipc::make_header(type, static_cast<uint32_t>(req_size), ++c.seq);
  if (ipc::send_with_fd(c.fd, req, req_size, send_fd, 0) != static_cast<ssize_t>(req_size))
    return daemon_gone(c, what);
  pollfd p{c.fd, POLLIN, 0};
  const int r = ::poll(&p, 1, static_cast<int>(kDaemonReplyTimeoutMs));
  if (r == 0)
    return fail(Status::kIoTimeout, std::string(what) + ": the daemon did not answer within " +
                                        std::to_string(kDaemonReplyTimeoutMs) + " ms");
  alignas(8) uint8_t buf[ipc::kMaxMessage];
  int got = -1;
  const ssize_t n = r < 0 ? -1 : ipc::recv_with_fd(c.fd, buf, sizeof buf, &got, 0);
  if (fd != nullptr) {
    *fd = got;
  } else if (got >= 0) {
    ::close(got);  // nothing was asked for
  }
  if (n <= 0) return daemon_gone(c, what);
  if (static_cast<size_t>(n) > sizeof buf)
    return fail(Status::kInternalError, std::string(what) + ": a reply longer than any message");
  const ipc::Decoded d =
      ipc::decode_reply({buf, static_cast<size_t>(n)}, type, h->seq, rep, rep_size);
  if (d.status != Status::kSuccess)
    return fail(Status::kInternalError,
                std::string(what) + ": the daemon's reply is malformed (" + d.why + ")");
  const auto s = static_cast<Status>(static_cast<const ipc::ReplyHead*>(rep)->status);
  if (s == Status::kPending) return s;  // a CM call accepted: its outcome comes as an event
  if (s != Status::kSuccess) {
    if (fd != nullptr && *fd >= 0) ::close(*fd);
    if (fd != nullptr) *fd = -1;
    return fail(s,
                std::string(what) + ": the daemon refused it (" + std::string(to_string(s)) + ")");
  }
  return detail::succeed();
}

DaemonAdapter to_public(const ipc::AdapterEntry& e) {
  DaemonAdapter a;
  a.name = std::string(ipc::name_of(e.name));
  a.ipv4 = e.ipv4;
  if (e.has_ipv6 != 0) {
    a.ipv6.emplace();
    std::memcpy(a.ipv6->data(), e.ipv6, 16);
  }
  std::memcpy(a.mac.data(), e.mac, 6);
  a.engines = e.engines;
  a.mtu = e.mtu;
  return a;
}

template <class F>
Status guarded(F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return fail(Status::kInsufficientResources, "out of memory");
  }
}

Status connect_to(Connection& c, const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path || path.find('\0') != std::string::npos)
    return fail(Status::kInvalidParameter, "attach: the socket path must be 1 .. 107 bytes, not " +
                                               std::to_string(path.size()));
  std::memcpy(a.sun_path, path.data(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return fail(Status::kInsufficientResources,
                "attach: socket: " + std::string(std::strerror(errno)));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    return connect_status(e, path);
  }
  c.fd = fd;
  c.gone = false;
  c.info = DaemonInfo{};
  c.info.socket_path = path;
  return Status::kSuccess;
}

void close_locked(Connection& c) {
  if (c.fd >= 0) ::close(c.fd);
  c.fd = -1;
  c.gone = false;
}

}  // namespace

namespace detail {
Status daemon_transact(ipc::MsgType type, void* req, size_t req_size, void* rep, size_t rep_size,
                       const char* what, int* fd, int send_fd) noexcept {
  return guarded([&]() -> Status {
    Connection& c = conn();
    std::lock_guard lock(c.mu);
    return transact(c, type, req, req_size, rep, rep_size, what, fd, send_fd);
  });
}
}  // namespace detail

std::string daemon_socket_path() {
  const char* e = std::getenv("URNIC_DAEMON");
  return e != nullptr && *e != '\0' ? std::string(e) : std::string(kDefaultDaemonSocket);
}

bool daemon_configured() noexcept {
  const char* e = std::getenv("URNIC_DAEMON");
  return e != nullptr && *e != '\0';
}

Status attach(std::string_view socket_path, std::string_view client_name) noexcept {
  return guarded([&]() -> Status {
    Connection& c = conn();
    std::lock_guard lock(c.mu);
    if (c.fd >= 0)
      return fail(Status::kInvalidDeviceState,
                  "attach: attached already to " + c.info.socket_path + " (detach first)");
    ipc::HelloReq req{};
    req.major = ipc::kVersionMajor;
    req.minor = ipc::kVersionMinor;
    const std::string name = client_name.empty() ? program_name() : std::string(client_name);
    if (!ipc::set_name(req.name, name))
      return fail(Status::kInvalidParameter,
                  "attach: the client name must be 1 .. 31 characters of [A-Za-z0-9_.-]");
    const std::string path = socket_path.empty() ? daemon_socket_path() : std::string(socket_path);
    if (Status s = connect_to(c, path); s != Status::kSuccess) return s;
    ipc::HelloRep rep{};
    const Status s =
        transact(c, ipc::MsgType::kHello, &req, sizeof req, &rep, sizeof rep, "attach");
    if (s != Status::kSuccess) {
      close_locked(c);
      return s;
    }
    c.info.pid = rep.daemon_pid;
    c.info.version_major = rep.major;
    c.info.version_minor = rep.minor;
    c.info.client_id = rep.client_id;
    return detail::succeed();
  });
}

void detach() noexcept {
  Connection& c = conn();
  std::lock_guard lock(c.mu);
  close_locked(c);
}

bool attached() noexcept {
  Connection& c = conn();
  std::lock_guard lock(c.mu);
  return c.fd >= 0;
}

bool daemon_alive() noexcept {
  Connection& c = conn();
  std::lock_guard lock(c.mu);
  if (c.fd < 0 || c.gone) return false;
  pollfd p{c.fd, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0) {
    c.gone = true;  // every call from now on: kDeviceRemoved
    return false;
  }
  return true;
}

Status daemon_info(DaemonInfo* out) noexcept {
  return guarded([&]() -> Status {
    if (out == nullptr) return fail(Status::kInvalidParameter, "daemon_info: null out");
    Connection& c = conn();
    std::lock_guard lock(c.mu);
    if (c.fd < 0) return fail(Status::kInvalidDeviceState, "daemon_info: not attached");
    *out = c.info;
    return detail::succeed();
  });
}

Status daemon_adapters(std::vector<DaemonAdapter>* out) noexcept {
  return guarded([&]() -> Status {
    if (out == nullptr) return fail(Status::kInvalidParameter, "daemon_adapters: null out");
    Connection& c = conn();
    std::lock_guard lock(c.mu);
    ipc::ListAdaptersReq req{};
    auto rep = std::make_unique<ipc::ListAdaptersRep>();
    const Status s = transact(c, ipc::MsgType::kListAdapters, &req, sizeof req, rep.get(),
                              sizeof *rep, "daemon_adapters");
    if (s != Status::kSuccess) return s;
    out->clear();
    for (uint32_t i = 0; i < rep->count; ++i) out->push_back(to_public(rep->entries[i]));
    return s;
  });
}

Status daemon_query_adapter(std::string_view name, AdapterInfo* info, PortCounters* port) noexcept {
  return guarded([&]() -> Status {
    ipc::QueryAdapterReq req{};
    if (!ipc::set_name(req.name, name))
      return fail(Status::kInvalidParameter,
                  "daemon_query_adapter: an adapter name is 1 .. 31 characters of [A-Za-z0-9_.-]");
    Connection& c = conn();
    std::lock_guard lock(c.mu);
    auto rep = std::make_unique<ipc::QueryAdapterRep>();
    const Status s = transact(c, ipc::MsgType::kQueryAdapter, &req, sizeof req, rep.get(),
                              sizeof *rep, "daemon_query_adapter");
    if (s != Status::kSuccess) return s;
    if (info != nullptr) *info = rep->info;
    if (port != nullptr) *port = rep->port;
    return s;
  });
}

Status daemon_clients(std::vector<DaemonClient>* out) noexcept {
  return guarded([&]() -> Status {
    if (out == nullptr) return fail(Status::kInvalidParameter, "daemon_clients: null out");
    Connection& c = conn();
    std::lock_guard lock(c.mu);
    out->clear();
    auto rep = std::make_unique<ipc::ListClientsRep>();
    // Page by page; clients that come and go meanwhile may be missed or seen twice.
    for (uint32_t first = 0;;) {
      ipc::ListClientsReq req{};
      req.first = first;
      const Status s = transact(c, ipc::MsgType::kListClients, &req, sizeof req, rep.get(),
                                sizeof *rep, "daemon_clients");
      if (s != Status::kSuccess) return s;
      for (uint32_t i = 0; i < rep->count; ++i) {
        const ipc::ClientEntry& e = rep->entries[i];
        out->push_back(DaemonClient{e.id, e.pid, e.uid, e.gid, std::string(ipc::name_of(e.name)),
                                    e.requests, e.errors, e.shared, e.pds, e.cqs, e.qps, e.mrs,
                                    e.srqs, e.shared_bytes});
      }
      first += rep->count;
      if (rep->count == 0 || first >= rep->total) return s;
    }
  });
}

}  // namespace urnic
