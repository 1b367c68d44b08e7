// The CM's agent (cm.h) and what a connection's owner reads of its connection (cm_core.h).
#include <algorithm>
#include <cstring>
#include <mutex>

#include "control/cm/cm_core.h"

namespace urnic::ctl {

using cm_detail::Conn;
using cm_detail::Core;

Status Core::get_connection_data(const Conn& c, ReadLimits* limits, void* pdata,
                                 uint32_t* len) const {
  std::lock_guard lock(mu_);
  if (!c.have_peer_data) return Status::kConnectionInvalid;
  if (limits != nullptr && c.datagram) {
    *limits = {0, 0};  // SIDR: no connection, no RDMA READs
  } else if (limits != nullptr) {
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

CmConnInfo Core::info(const Conn& c) const {
  std::lock_guard lock(mu_);
  return CmConnInfo{c.state,     c.active,        c.local_qpn,  c.remote_qpn,
                    c.local_gid, c.remote_gid,    c.local_port, c.remote_port,
                    c.mtu,       c.reject_reason, c.datagram};
}

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

uint64_t CmAgent::ca_guid() const noexcept { return core_->guid_; }
const CmConfig& CmAgent::config() const noexcept { return core_->cfg_; }

CmCounters CmAgent::counters() const {
  std::lock_guard lock(core_->mu_);
  return core_->counters_;
}

size_t CmAgent::connections() const { return core_->connections(); }

}  // namespace urnic::ctl
