// urnicd's client socket and the requests of the control protocol (server.h).
#include "daemon/server.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "daemon/fdpass.h"
#include "dataplane/log.h"

namespace urnic::daemon {
namespace {

// epoll tags for the two fds that are not clients.
constexpr uint64_t kListenTag = 1;
constexpr uint64_t kSignalTag = 2;
constexpr uint64_t kResolveTag = 3;

bool operator_uid(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

}  // namespace

struct Server::Client {
  int fd = -1;
  ucred cred{};
  ipc::ClientEntry entry{};
  bool hello = false;    // kHello accepted: the other requests are allowed
  bool refused = false;  // over max_clients: its kHello is answered kInsufficientResources
  std::unique_ptr<ClientObjects> objects;  // from its kHello on
  int passed_fd = -1;  // the descriptor of the message being served, if it carried one
};

Server::Server(ServerOptions opts, std::vector<ServedAdapter> adapters,
               std::vector<Bridge*> bridges)
    : opts_(std::move(opts)), adapters_(std::move(adapters)), bridges_(std::move(bridges)) {}

Server::~Server() { shutdown(); }

bool Server::listen(std::string* err) {
  auto fail = [&](const std::string& what) {
    *err = opts_.socket_path + ": " + what + ": " + std::strerror(errno);
    return false;
  };
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (opts_.socket_path.empty() || opts_.socket_path.size() >= sizeof a.sun_path) {
    *err = "socket path must be 1 .. 107 bytes";
    return false;
  }
  std::memcpy(a.sun_path, opts_.socket_path.data(), opts_.socket_path.size());
  lfd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (lfd_ < 0) return fail("socket");
  ::unlink(opts_.socket_path.c_str());  // stale: we hold its lock (urnicd.cc)
  // Bound with no permissions at all, then opened up to the configured mode and group, so that
  // nobody outside them can connect in between.
  const mode_t old = ::umask(0777);
  const int rc = ::bind(lfd_, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  ::umask(old);
  if (rc != 0) return fail("bind");
  if (opts_.socket_group != static_cast<gid_t>(-1) &&
      ::chown(opts_.socket_path.c_str(), static_cast<uid_t>(-1), opts_.socket_group) != 0)
    return fail("chown to the configured group");
  if (::chmod(opts_.socket_path.c_str(), opts_.socket_mode) != 0) return fail("chmod");
  if (::listen(lfd_, 128) != 0) return fail("listen");
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) return fail("epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenTag;
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, lfd_, &ev) != 0) return fail("epoll_ctl");
  resolve_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (resolve_fd_ < 0) return fail("eventfd");
  ev.data.u64 = kResolveTag;
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, resolve_fd_, &ev) != 0) return fail("epoll_ctl");
  return true;
}

int Server::run(int sigfd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kSignalTag;
  ::epoll_ctl(epfd_, EPOLL_CTL_ADD, sigfd, &ev);
  epoll_event evs[64];
  for (;;) {
    const int n = ::epoll_wait(epfd_, evs, 64, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return 0;
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = evs[i].data.u64;
      if (tag == kSignalTag) {
        signalfd_siginfo si{};
        if (::read(sigfd, &si, sizeof si) == sizeof si) return static_cast<int>(si.ssi_signo);
      } else if (tag == kListenTag) {
        accept_all();
      } else if (tag == kResolveTag) {
        on_resolved();
      } else {
        auto* c = reinterpret_cast<Client*>(tag);
        if (!serve(*c)) close_client(c, false);
      }
    }
  }
}

void Server::accept_all() {
  for (;;) {
    const int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: all taken (or a transient error: the next event retries)
    auto c = std::make_unique<Client>();
    c->fd = fd;
    socklen_t len = sizeof c->cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len) != 0) {
      ::close(fd);
      continue;
    }
    c->entry.pid = static_cast<uint32_t>(c->cred.pid);
    c->entry.uid = c->cred.uid;
    c->entry.gid = c->cred.gid;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = reinterpret_cast<uint64_t>(c.get());
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      continue;
    }
    std::lock_guard lock(mu_);
    ++counters_.accepted;
    c->entry.id = next_id_++;
    c->refused = clients_.size() >= opts_.max_clients;
    counters_.refused += c->refused ? 1 : 0;
    dp::log_line(dp::LogType::kDaemon, RTE_LOG_INFO,
                 "urnicd: client %u connected (pid %d, uid %u)%s", c->entry.id, c->cred.pid,
                 c->cred.uid, c->refused ? ": over max_clients, refused" : "");
    clients_.push_back(std::move(c));
  }
}

bool Server::serve(Client& c) {
  alignas(8) uint8_t buf[ipc::kMaxMessage];
  int fd = -1;  // a descriptor that came with it: kShareMemory's, closed for anything else
  const ssize_t n = ipc::recv_with_fd(c.fd, buf, sizeof buf, &fd, MSG_DONTWAIT);
  if (n == 0) return false;  // the client closed (exit, crash, kill -9)
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  {
    std::lock_guard lock(mu_);
    ++counters_.requests;
    ++c.entry.requests;
  }
  ipc::Request r;
  const ipc::Decoded d =
      static_cast<size_t>(n) > sizeof buf
          ? ipc::Decoded{Status::kInvalidParameter, "longer than any message", false}
          : ipc::decode_request({buf, static_cast<size_t>(n)}, &r);
  // A descriptor is kShareMemory's, kCreateCq's or kCmChannel's; on anything else it is closed now,
  // before the reply (a client that sees the reply may count our descriptors).
  const bool takes_fd = d.status == Status::kSuccess &&
                        (r.h.type == static_cast<uint16_t>(ipc::MsgType::kShareMemory) ||
                         r.h.type == static_cast<uint16_t>(ipc::MsgType::kCreateCq) ||
                         r.h.type == static_cast<uint16_t>(ipc::MsgType::kCmChannel));
  if (fd >= 0 && !takes_fd) ::close(fd);
  c.passed_fd = takes_fd ? fd : -1;
  if (d.status == Status::kSuccess) {
    const bool ok = answer(c, r);
    if (c.passed_fd >= 0) ::close(c.passed_fd);  // not taken (refused before it was looked at)
    c.passed_fd = -1;
    return ok;
  }
  {
    std::lock_guard lock(mu_);
    ++counters_.malformed;
    ++c.entry.errors;
  }
  dp::log_line(dp::LogType::kDaemon, RTE_LOG_NOTICE,
               "urnicd: client %u (pid %u): malformed message of %zd bytes (%s)", c.entry.id,
               c.entry.pid, n, d.why);
  if (!d.header_ok) {
    // Unaddressable (not our magic or major version, or a length that lies): the reply names
    // seq 0 and type 0, so that a client of another version still reads a clear refusal.
    ipc::Header h{};
    return reply_status(c, h, d.status);
  }
  ipc::Header h{};
  std::memcpy(&h, buf, sizeof h);
  return reply_status(c, h, d.status);
}

bool Server::answer(Client& c, const ipc::Request& r) {
  const auto type = static_cast<ipc::MsgType>(r.h.type);
  if (type == ipc::MsgType::kHello) return on_hello(c, r.hello);
  if (!c.hello) {
    std::lock_guard lock(mu_);
    ++counters_.malformed;
    ++c.entry.errors;
    return reply_status(c, r.h, Status::kInvalidDeviceState);
  }
  switch (type) {
    case ipc::MsgType::kListAdapters: {
      auto rep = std::make_unique<ipc::ListAdaptersRep>();
      rep->r = ipc::make_reply(r.h, sizeof *rep, Status::kSuccess);
      rep->count = static_cast<uint32_t>(adapters_.size());
      for (size_t i = 0; i < adapters_.size(); ++i) rep->entries[i] = adapters_[i].entry;
      return reply(c, rep.get(), sizeof *rep);
    }
    case ipc::MsgType::kQueryAdapter:
      return on_query_adapter(c, r.query_adapter);
    case ipc::MsgType::kListClients:
      return on_list_clients(c, r.list_clients);
    default:
      return on_object(c, r);
  }
}

bool Server::on_hello(Client& c, const ipc::HelloReq& r) {
  if (c.hello) {
    std::lock_guard lock(mu_);
    ++c.entry.errors;
    return reply_status(c, r.h, Status::kInvalidDeviceState);
  }
  if (c.refused) {
    reply_status(c, r.h, Status::kInsufficientResources);
    return false;  // refused at accept: told why, then closed
  }
  if (r.major != ipc::kVersionMajor || r.minor < ipc::kMinClientMinor)
    return reply_status(c, r.h, Status::kNotSupported);
  c.objects = std::make_unique<ClientObjects>(adapters_, bridges_, opts_.quotas);
  {
    std::lock_guard lock(mu_);
    std::memcpy(c.entry.name, r.name, sizeof c.entry.name);
    c.hello = true;
  }
  ipc::HelloRep rep{};
  rep.r = ipc::make_reply(r.h, sizeof rep, Status::kSuccess);
  rep.major = ipc::kVersionMajor;
  rep.minor = ipc::kVersionMinor;
  rep.client_id = c.entry.id;
  rep.daemon_pid = static_cast<uint32_t>(::getpid());
  rep.adapters = static_cast<uint32_t>(adapters_.size());
  dp::log_line(dp::LogType::kDaemon, RTE_LOG_INFO, "urnicd: client %u is '%s' (pid %u)", c.entry.id,
               c.entry.name, c.entry.pid);
  return reply(c, &rep, sizeof rep);
}

bool Server::on_query_adapter(Client& c, const ipc::QueryAdapterReq& r) {
  const std::string_view want = ipc::name_of(r.name);
  for (const ServedAdapter& a : adapters_) {
    if (ipc::name_of(a.entry.name) != want) continue;
    auto rep = std::make_unique<ipc::QueryAdapterRep>();
    rep->r = ipc::make_reply(r.h, sizeof *rep, Status::kSuccess);
    rep->entry = a.entry;
    rep->info = a.adapter->adapter_info();
    // A client's FastRegister carries its pages through the QP's page list area.
    rep->info.frmr_page_count = std::min(rep->info.frmr_page_count, shm::kAttachFrmrPages);
    AdapterCounters ac;
    if (a.adapter->query_counters(&ac) == Status::kSuccess) rep->port = ac.port;
    {
      std::lock_guard lock(mu_);
      rep->clients = clients_.size();
    }
    return reply(c, rep.get(), sizeof *rep);
  }
  return reply_status(c, r.h, Status::kBadNetworkName);
}

bool Server::on_list_clients(Client& c, const ipc::ListClientsReq& r) {
  // Another client's pid, uid and name are the operator's business only (issue 38 item 6).
  if (!operator_uid(c.cred.uid)) return reply_status(c, r.h, Status::kAccessDenied);
  auto rep = std::make_unique<ipc::ListClientsRep>();
  rep->r = ipc::make_reply(r.h, sizeof *rep, Status::kSuccess);
  {
    std::lock_guard lock(mu_);
    rep->total = static_cast<uint32_t>(clients_.size());
    for (size_t i = r.first; i < clients_.size() && rep->count < ipc::kClientsPerReply; ++i)
      rep->entries[rep->count++] = clients_[i]->entry;
  }
  return reply(c, rep.get(), sizeof *rep);
}

bool Server::on_object(Client& c, const ipc::Request& r) {
  ClientObjects& o = *c.objects;
  alignas(8) uint8_t buf[ipc::kMaxMessage] = {};
  int fd = -1;
  Status s = Status::kInvalidDeviceRequest;
  switch (static_cast<ipc::MsgType>(r.h.type)) {
    case ipc::MsgType::kAllocShared:
      s = o.alloc_shared(r.alloc_shared, reinterpret_cast<ipc::AllocSharedRep*>(buf), &fd);
      break;
    case ipc::MsgType::kCreatePd:
      s = o.create_pd(r.create_pd, reinterpret_cast<ipc::HandleRep*>(buf));
      break;
    case ipc::MsgType::kCreateCq:
      s = o.create_cq(r.create_cq, std::exchange(c.passed_fd, -1),
                      reinterpret_cast<ipc::CreateCqRep*>(buf), &fd);
      break;
    case ipc::MsgType::kCreateQp:
      s = o.create_qp(r.create_qp, reinterpret_cast<ipc::CreateQpRep*>(buf), &fd);
      break;
    case ipc::MsgType::kCreateDatagramQp:
      s = o.create_qp(r.create_datagram_qp.qp, reinterpret_cast<ipc::CreateQpRep*>(buf), &fd,
                      &r.create_datagram_qp.qkey);
      break;
    case ipc::MsgType::kModifySrq:
      s = o.modify_srq(r.modify_srq);
      break;
    case ipc::MsgType::kQueryCounters:
      s = o.query_counters(r.query_counters, reinterpret_cast<ipc::QueryCountersRep*>(buf));
      break;
    case ipc::MsgType::kCreateAh:
      // A MAC to find: off this thread (the reply comes from on_resolved).
      if (std::all_of(std::begin(r.create_ah.dst_mac), std::end(r.create_ah.dst_mac),
                      [](uint8_t b) { return b == 0; }))
        return resolve_ah(c, r.create_ah);
      s = o.create_ah(r.create_ah, reinterpret_cast<ipc::HandleRep*>(buf));
      break;
    case ipc::MsgType::kCreateSrq:
      s = o.create_srq(r.create_srq, reinterpret_cast<ipc::CreateSrqRep*>(buf), &fd);
      break;
    case ipc::MsgType::kModifyQp:
      s = o.modify_qp(r.modify_qp);
      break;
    case ipc::MsgType::kRegisterMr:
      s = o.register_mr(r.register_mr, reinterpret_cast<ipc::RegisterMrRep*>(buf));
      break;
    case ipc::MsgType::kCreateMw:
      s = o.create_mw(r.create_mw, reinterpret_cast<ipc::RegisterMrRep*>(buf));
      break;
    case ipc::MsgType::kInitFrmr:
      s = o.init_frmr(r.init_frmr, reinterpret_cast<ipc::RegisterMrRep*>(buf));
      break;
    case ipc::MsgType::kModerateCq:
      s = o.moderate_cq(r.moderate_cq);
      break;
    case ipc::MsgType::kResizeCq:
      s = o.resize_cq(r.resize_cq, reinterpret_cast<ipc::CreateCqRep*>(buf), &fd);
      break;
    case ipc::MsgType::kDestroy:
      s = o.destroy(r.destroy.handle);
      break;
    case ipc::MsgType::kEngineDoorbell:
      s = r.engine_doorbell.engine < bridges_.size() ? Status::kSuccess : Status::kInvalidParameter;
      if (s == Status::kSuccess) {
        fd = bridges_[r.engine_doorbell.engine]->doorbell_fd(r.engine_doorbell.what);
        s = fd >= 0 ? Status::kSuccess : Status::kInsufficientResources;
        reinterpret_cast<ipc::HandleRep*>(buf)->handle = r.engine_doorbell.engine;
      }
      break;
    case ipc::MsgType::kCmChannel:
      s = o.cm_channel(r.cm_channel, std::exchange(c.passed_fd, -1),
                       reinterpret_cast<ipc::HandleRep*>(buf));
      break;
    case ipc::MsgType::kCmCreate:
      s = o.cm_create(r.cm_create, reinterpret_cast<ipc::HandleRep*>(buf));
      break;
    case ipc::MsgType::kCmCall: {
      auto* rep = reinterpret_cast<ipc::CmCallRep*>(buf);
      s = o.cm_call(r.cm_call, rep);
      if (s == Status::kSuccess && r.cm_call.op == static_cast<uint32_t>(ipc::CmOp::kListen))
        dp::log_line(dp::LogType::kDaemon, RTE_LOG_NOTICE, "urnicd: client %u listens on port %u%s",
                     c.entry.id, rep->local.port, r.cm_call.flag != 0 ? " (datagrams)" : "");
      break;
    }
    case ipc::MsgType::kCmEvents:
      s = o.cm_events(r.cm_events, reinterpret_cast<ipc::CmEventsRep*>(buf));
      break;
    case ipc::MsgType::kShareMemory:
      s = o.share_memory(r.share_memory, std::exchange(c.passed_fd, -1),
                         reinterpret_cast<ipc::HandleRep*>(buf));
      break;
    default:
      break;
  }
  after_object(c, r, s);
  if (s != Status::kSuccess) return reply_status(c, r.h, s);
  const size_t size = ipc::reply_size(static_cast<ipc::MsgType>(r.h.type));
  *reinterpret_cast<ipc::ReplyHead*>(buf) =
      ipc::make_reply(r.h, static_cast<uint32_t>(size), Status::kSuccess);
  const bool ok = fd >= 0 ? reply_fd(c, buf, size, fd) : reply(c, buf, size);
  if (fd >= 0) ::close(fd);  // the client has its own now; our mapping stays
  return ok;
}

void Server::after_object(Client& c, const ipc::Request& r, Status s) {
  // Memory the daemon cannot map or register where the client has it (an address the daemon
  // uses itself, a quota) is the environment's doing, not a malformed request: said once here.
  const auto type = static_cast<ipc::MsgType>(r.h.type);
  if (s != Status::kSuccess &&
      (type == ipc::MsgType::kShareMemory || type == ipc::MsgType::kRegisterMr))
    dp::log_line(dp::LogType::kDaemon, RTE_LOG_NOTICE, "urnicd: client %u: %s refused: %s",
                 c.entry.id, type == ipc::MsgType::kShareMemory ? "ShareMemory" : "RegisterMr",
                 std::string(to_string(s)).c_str());
  {
    // The entry's counts: what ListClients and telemetry (another thread) show of the client.
    const ObjectCounts n = c.objects->counts();
    std::lock_guard lock(mu_);
    c.entry.shared = n.shared;
    c.entry.pds = n.pds;
    c.entry.cqs = n.cqs;
    c.entry.qps = n.qps;
    c.entry.mrs = n.mrs + n.mws;  // windows with MRs, as NDK's max_mrs counts them
    c.entry.srqs = n.srqs;
    c.entry.shared_bytes = n.shared_bytes;
    // kPending is an accepted CM call whose outcome comes as an event.
    c.entry.errors += s != Status::kSuccess && s != Status::kPending ? 1 : 0;
  }
}

bool Server::reply_fd(Client& c, const void* msg, size_t size, int fd) {
  return ipc::send_with_fd(c.fd, msg, size, fd, MSG_DONTWAIT) == static_cast<ssize_t>(size);
}

bool Server::reply(Client& c, const void* msg, size_t size) {
  // Never waits: a client that leaves its replies unread until its queue is full is closed.
  const ssize_t n = ::send(c.fd, msg, size, MSG_DONTWAIT | MSG_NOSIGNAL);
  return n == static_cast<ssize_t>(size);
}

bool Server::reply_status(Client& c, const ipc::Header& h, Status s) {
  const ipc::ReplyHead r = ipc::make_reply(h, sizeof(ipc::ReplyHead), s);
  return reply(c, &r, sizeof r);
}

bool Server::resolve_ah(Client& c, const ipc::CreateAhReq& r) {
  AddressVector av;
  Adapter* adapter = nullptr;
  if (Status s = c.objects->prepare_ah(r, &av, &adapter); s != Status::kSuccess)
    return reply_status(c, r.h, s);
  // Not read until the answer: a client has one request in flight (its library waits for each
  // reply), and one that sends more waits for them to be read.
  epoll_event ev{};
  ev.data.u64 = reinterpret_cast<uint64_t>(&c);
  ::epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &ev);
  Resolved job;
  job.client = c.entry.id;
  job.h = r.h;
  resolvers_.emplace_back(c.entry.id, std::thread([this, job, av, adapter]() mutable {
                            job.status = create_address_handle(*adapter, av, &job.ah);
                            {
                              std::lock_guard lock(resolve_mu_);
                              resolved_.push_back(job);
                            }
                            const uint64_t one = 1;
                            (void)!::write(resolve_fd_, &one, sizeof one);
                          }));
  return true;
}

void Server::on_resolved() {
  uint64_t n = 0;
  (void)!::read(resolve_fd_, &n, sizeof n);
  std::vector<Resolved> done;
  {
    std::lock_guard lock(resolve_mu_);
    done.swap(resolved_);
  }
  for (const Resolved& j : done) {
    // Its thread has finished but for its return.
    for (auto it = resolvers_.begin(); it != resolvers_.end(); ++it) {
      if (it->first != j.client) continue;
      it->second.join();
      resolvers_.erase(it);
      break;
    }
    Client* c = nullptr;
    {
      std::lock_guard lock(mu_);
      for (auto& p : clients_)
        if (p->entry.id == j.client) c = p.get();
    }
    if (c == nullptr) continue;  // gone meanwhile: its handle was never made for it
    ipc::HandleRep rep{};
    Status s = j.status;
    if (s == Status::kSuccess) s = c->objects->add_ah(j.ah, &rep);
    rep.r = ipc::make_reply(j.h, sizeof rep, s);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = reinterpret_cast<uint64_t>(c);
    ::epoll_ctl(epfd_, EPOLL_CTL_MOD, c->fd, &ev);
    const bool ok = s == Status::kSuccess ? reply(*c, &rep, sizeof rep) : reply_status(*c, j.h, s);
    if (!ok) close_client(c, true);
  }
}

void Server::close_client(Client* c, bool by_daemon) {
  ::epoll_ctl(epfd_, EPOLL_CTL_DEL, c->fd, nullptr);
  ::close(c->fd);
  // Everything it held goes with it: QPs flushed (their peers see the connection die), then
  // MRs, CQs, PDs and its shared memory.
  c->objects.reset();
  dp::log_line(dp::LogType::kDaemon, RTE_LOG_INFO,
               "urnicd: client %u (pid %u) gone after %lu requests, %lu refused", c->entry.id,
               c->entry.pid, static_cast<unsigned long>(c->entry.requests),
               static_cast<unsigned long>(c->entry.errors));
  std::lock_guard lock(mu_);
  ++counters_.closed;
  counters_.dropped += by_daemon ? 1 : 0;
  std::erase_if(clients_, [c](const std::unique_ptr<Client>& p) { return p.get() == c; });
}

void Server::shutdown() {
  while (true) {
    Client* c = nullptr;
    {
      std::lock_guard lock(mu_);
      if (clients_.empty()) break;
      c = clients_.front().get();
    }
    close_client(c, true);
  }
  if (lfd_ >= 0) {
    ::close(lfd_);
    ::unlink(opts_.socket_path.c_str());
  }
  // Resolutions in flight end within their timeout; their results go nowhere.
  for (auto& [id, t] : resolvers_) t.join();
  resolvers_.clear();
  if (resolve_fd_ >= 0) ::close(resolve_fd_);
  if (epfd_ >= 0) ::close(epfd_);
  lfd_ = epfd_ = resolve_fd_ = -1;
}

std::vector<ipc::ClientEntry> Server::clients() const {
  std::lock_guard lock(mu_);
  std::vector<ipc::ClientEntry> out;
  for (const auto& c : clients_) out.push_back(c->entry);
  return out;
}

ServerCounters Server::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

}  // namespace urnic::daemon
