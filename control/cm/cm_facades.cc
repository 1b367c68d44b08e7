// The CM's objects (cm.h): CmConnector, CmListener and CmAgent over the core (cm_core.h).
#include "control/cm/cm_core.h"

#include <rte_cycles.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <unordered_map>

#include "control/cm/cma.h"
#include "urnic/config.h"

namespace urnic::ctl {

// ---- Public objects
// --------------------------------------------------------------------------------

using cm_detail::Conn;
using cm_detail::Core;

CmConnector::CmConnector(std::shared_ptr<Core> core, std::shared_ptr<Conn> conn)
    : core_(std::move(core)), conn_(std::move(conn)) {}

CmConnector::~CmConnector() { close(); }

Status CmConnector::connect(dp::Qp* qp, const cm::Gid& dst, uint16_t port, const ReadLimits& limits,
                            std::span<const uint8_t> private_data, Completion done) {
  return core_->connect(conn_, qp, dst, port, limits, private_data, std::move(done));
}

Status CmConnector::complete_connect(DisconnectEvent on_disconnect) {
  return core_->complete_connect(*conn_, std::move(on_disconnect));
}

Status CmConnector::accept(dp::Qp* qp, const ReadLimits& limits,
                           std::span<const uint8_t> private_data, DisconnectEvent on_disconnect,
                           Completion done) {
  return core_->accept(*conn_, qp, limits, private_data, std::move(on_disconnect), std::move(done));
}

Status CmConnector::reject(std::span<const uint8_t> private_data) {
  return core_->reject(*conn_, private_data);
}

Status CmConnector::get_connection_data(ReadLimits* limits, void* pdata, uint32_t* len) const {
  std::lock_guard lock(core_->mu_);
  const Conn& c = *conn_;
  if (!c.have_peer_data) return Status::kConnectionInvalid;
  if (limits != nullptr) {
    // Before accept(): the peer's request seen from our side (what it wants to read from us is
    // our inbound). After a REP: the negotiated limits.
    *limits = c.active ? c.effective : ReadLimits{c.peer.outbound, c.peer.inbound};
    if (!c.active && (c.state == CmState::kRepSent || c.state == CmState::kEstablished))
      *limits = c.effective;
  }
  if (len == nullptr) return Status::kSuccess;
  const auto rds = static_cast<uint32_t>(c.peer_pdata.size());
  if (pdata == nullptr) {
    if (*len != 0) return Status::kInvalidParameter;
    *len = rds;
    return Status::kSuccess;
  }
  const uint32_t n = std::min(*len, rds);
  std::memcpy(pdata, c.peer_pdata.data(), n);
  const bool enough = *len >= rds;
  *len = rds;
  return enough ? Status::kSuccess : Status::kBufferTooSmall;
}

Status CmConnector::disconnect(Completion done) {
  return core_->disconnect(*conn_, std::move(done));
}

void CmConnector::close() {
  if (conn_) core_->close(*conn_);
}

CmState CmConnector::state() const {
  std::lock_guard lock(core_->mu_);
  return conn_->state;
}
bool CmConnector::is_active() const {
  std::lock_guard lock(core_->mu_);
  return conn_->active;
}
uint32_t CmConnector::local_qpn() const {
  std::lock_guard lock(core_->mu_);
  return conn_->local_qpn;
}
uint32_t CmConnector::remote_qpn() const {
  std::lock_guard lock(core_->mu_);
  return conn_->remote_qpn;
}
cm::Gid CmConnector::local_gid() const {
  std::lock_guard lock(core_->mu_);
  return conn_->local_gid;
}
cm::Gid CmConnector::peer_gid() const {
  std::lock_guard lock(core_->mu_);
  return conn_->remote_gid;
}
uint16_t CmConnector::local_port() const {
  std::lock_guard lock(core_->mu_);
  return conn_->local_port;
}
uint16_t CmConnector::peer_port() const {
  std::lock_guard lock(core_->mu_);
  return conn_->remote_port;
}
uint32_t CmConnector::mtu() const {
  std::lock_guard lock(core_->mu_);
  return conn_->mtu;
}
uint16_t CmConnector::reject_reason() const {
  std::lock_guard lock(core_->mu_);
  return conn_->reject_reason;
}

CmListener::CmListener(std::shared_ptr<Core> core)
    : core_(std::move(core)), l_(std::make_shared<cm_detail::Listen>()) {}

CmListener::~CmListener() { close(); }

Status CmListener::listen(uint16_t port, RequestHandler on_request) {
  return core_->listen(l_, port, std::move(on_request));
}

void CmListener::pause(bool paused) {
  std::lock_guard lock(core_->mu_);
  l_->paused = paused;
}

uint16_t CmListener::port() const {
  std::lock_guard lock(core_->mu_);
  return l_->port;
}

void CmListener::close() { core_->close_listener(*l_); }

CmAgent::CmAgent(Adapter& adapter, const CmConfig& cfg)
    : core_(std::make_shared<Core>(adapter, cfg)) {
  // The handler and the poller keep the core alive; after ~CmAgent they find it dead.
  adapter.control().set_mad_handler([core = core_](const MadIn& in) { core->on_mad(in); });
  poller_ = adapter.control().add_poller([core = core_] { return core->poll(); });
}

CmAgent::~CmAgent() {
  core_->adapter_.control().set_mad_handler(nullptr);
  // Without this an adapter that outlives several agents would keep every dead core alive.
  core_->adapter_.control().remove_poller(poller_);
  core_->shutdown();
}

std::unique_ptr<CmConnector> CmAgent::create_connector() {
  return std::unique_ptr<CmConnector>(new CmConnector(core_, std::make_shared<Conn>()));
}

std::unique_ptr<CmListener> CmAgent::create_listener() {
  return std::unique_ptr<CmListener>(new CmListener(core_));
}

uint64_t CmAgent::ca_guid() const noexcept { return core_->guid_; }
const CmConfig& CmAgent::config() const noexcept { return core_->cfg_; }

CmCounters CmAgent::counters() const {
  std::lock_guard lock(core_->mu_);
  return core_->counters_;
}

size_t CmAgent::connections() const { return core_->connections(); }

}  // namespace urnic::ctl
