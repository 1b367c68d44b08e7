// Test-only handles over the connection manager's core (control/cm/cm_core.h), for the tests
// and the fuzz harness that drive the CM directly, below the public Connector / Listener: a
// CmConnector owns one connection (closing it on destruction, as the NDK object does on
// close), a CmListener one listener. Production code has no such layer: ndk_connector.cc holds
// the core and the connection itself.
#pragma once

#include <memory>
#include <span>
#include <utility>

#include "control/cm/cm_core.h"

namespace urnic::cmtest {

using ctl::CmState;
using ctl::ReadLimits;
using ctl::cm_detail::Conn;
using ctl::cm_detail::Core;

class CmConnector {
 public:
  CmConnector(std::shared_ptr<Core> core, std::shared_ptr<Conn> conn)
      : core_(std::move(core)), conn_(std::move(conn)) {}
  ~CmConnector() { close(); }
  CmConnector(const CmConnector&) = delete;
  CmConnector& operator=(const CmConnector&) = delete;

  Status connect(dp::Qp* qp, const ctl::cm::Gid& dst, uint16_t port, const ReadLimits& limits,
                 std::span<const uint8_t> pdata, ctl::CmCompletion done) {
    return core_->connect(conn_, qp, dst, port, limits, pdata, std::move(done));
  }
  Status complete_connect(ctl::CmDisconnectEvent on_disconnect) {
    return core_->complete_connect(*conn_, std::move(on_disconnect));
  }
  Status accept(dp::Qp* qp, const ReadLimits& limits, std::span<const uint8_t> pdata,
                ctl::CmDisconnectEvent on_disconnect, ctl::CmCompletion done) {
    return core_->accept(*conn_, qp, limits, pdata, std::move(on_disconnect), std::move(done));
  }
  Status reject(std::span<const uint8_t> pdata) { return core_->reject(*conn_, pdata); }
  Status resolve(const ctl::cm::Gid& dst, uint16_t port, std::span<const uint8_t> pdata,
                 ctl::CmCompletion done) {
    return core_->resolve(conn_, dst, port, pdata, std::move(done));
  }
  Status accept_datagram(uint32_t qpn, uint32_t qkey, std::span<const uint8_t> pdata) {
    return core_->accept_datagram(*conn_, qpn, qkey, pdata);
  }
  Status datagram_peer(uint32_t* qpn, uint32_t* qkey) const {
    return core_->datagram_peer(*conn_, qpn, qkey);
  }
  Status get_connection_data(ReadLimits* limits, void* pdata, uint32_t* len) const {
    return core_->get_connection_data(*conn_, limits, pdata, len);
  }
  Status disconnect(ctl::CmCompletion done) { return core_->disconnect(*conn_, std::move(done)); }
  void close() { core_->close(*conn_); }

  ctl::CmConnInfo info() const { return core_->info(*conn_); }
  CmState state() const { return info().state; }
  bool is_active() const { return info().active; }
  uint32_t local_qpn() const { return info().local_qpn; }
  uint32_t remote_qpn() const { return info().remote_qpn; }
  ctl::cm::Gid local_gid() const { return info().local_gid; }
  ctl::cm::Gid peer_gid() const { return info().peer_gid; }
  uint16_t local_port() const { return info().local_port; }
  uint16_t peer_port() const { return info().peer_port; }
  uint32_t mtu() const { return info().mtu; }
  uint16_t reject_reason() const { return info().reject_reason; }

 private:
  std::shared_ptr<Core> core_;
  std::shared_ptr<Conn> conn_;
};

class CmListener {
 public:
  using RequestHandler = std::function<void(std::unique_ptr<CmConnector>)>;

  explicit CmListener(std::shared_ptr<Core> core)
      : core_(std::move(core)), l_(std::make_shared<ctl::cm_detail::Listen>()) {}
  ~CmListener() { close(); }
  CmListener(const CmListener&) = delete;
  CmListener& operator=(const CmListener&) = delete;

  // Each request becomes a CmConnector of the handler's; one it drops is rejected.
  // `port_space`: ctl::cm::kPsTcp (REQs) or kPsUdp (SIDR_REQs).
  Status listen(uint16_t port, RequestHandler on_request, uint16_t port_space = ctl::cm::kPsTcp) {
    return core_->listen(
        l_, port,
        [core = core_, h = std::move(on_request)](auto c) {
          h(std::make_unique<CmConnector>(core, std::move(c)));
        },
        port_space);
  }
  void pause(bool paused) { core_->pause(*l_, paused); }
  uint16_t port() const { return core_->port(*l_); }
  void close() { core_->close_listener(*l_); }

 private:
  std::shared_ptr<Core> core_;
  std::shared_ptr<ctl::cm_detail::Listen> l_;
};

inline std::unique_ptr<CmConnector> create_connector(const ctl::CmAgent& agent) {
  return std::make_unique<CmConnector>(agent.core(), std::make_shared<Conn>());
}
inline std::unique_ptr<CmListener> create_listener(const ctl::CmAgent& agent) {
  return std::make_unique<CmListener>(agent.core());
}

}  // namespace urnic::cmtest
