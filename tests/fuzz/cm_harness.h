// Fuzz harness of the IB connection manager (issue 8, target (c)): shared by the libFuzzer target
// tests/fuzz/fuzz_cm.cc and by the regression replay test tests/unit/fuzz_regressions_test.cc.
//
// CmWorld is one ctl::Adapter on a net_ring port whose engine never runs on an lcore and whose
// control thread is not started: the fuzz thread is the only thread, so an input replays
// deterministically. Every input gets a fresh CmAgent with a listener in rdma_cm's TCP port space
// and one in its UDP port space (SIDR), on the same port, and is a sequence of
// records: MADs from the peer the fuzzer plays, and consumer actions (connect, complete,
// accept, reject, disconnect, close). A MAD travels the real receive path: it is wrapped in a
// RoCEv2 UD SEND ONLY to QP1 (DETH with the GSI Q_Key, valid ICRC), handed to
// Engine::deliver_lc(), demultiplexed to the control plane's ring, and handled by
// ControlPlane::poll_once() (UD checks, then the CM's MAD handler).
//
// Checked after every input (an empty string means all held):
//  - cm::decode() reads nothing past a MAD held in a heap buffer of exactly its size; a MAD it
//    accepts re-encodes to one that decodes to the same message;
//  - every MAD the CM sends decodes back to the message it was encoded from;
//  - the CM's counters add up: every MAD handed to it is counted once, as a decode error or
//    under its attribute;
//  - each consumer callback (connect / accept / disconnect completion, disconnect event) runs at
//    most once, and none runs after its connector was closed;
//  - after the input every connector is closed, the agent destroyed, the QPs destroyed, and every
//    mbuf the harness allocated is back in its pool.
//
// Record format: op (1 byte), then per op (a missing byte reads as 0):
//   op % 10 == 0  MAD: fix (1), len (1; 0 means 256), then `len` MAD bytes (zero-padded).
//                fix bit 0: write a valid CM MAD header (base 1, class 7, version 2, Send),
//                keeping the attribute ID; bit 1: set the message's remote comm ID (bytes 4-7
//                of the body; a SIDR_REP's request ID, bytes 0-3) to one of ours (bits 5-7 pick
//                which); bit 2: make a REQ or SIDR_REQ address its listener (service ID, GIDs, a
//                valid rdma_cm header); bit 3: send from the peer's IPv6 address instead of IPv4.
//   op % 10 == 1  connect: a new QP and active connector, REQ to the peer (port = 1 byte); with
//                 bit 6 of the port byte a datagram connector's SIDR_REQ instead (no QP).
//   op % 10 == 2  complete_connect on connector (1 byte index).
//   op % 10 == 3  accept on connector (1 byte index), with a new QP (a datagram request:
//                 accept_datagram).
//   op % 10 == 4  reject connector (1 byte index).
//   op % 10 == 5  disconnect connector (1 byte index).
//   op % 10 == 6  close connector (1 byte index).
//   op % 10 == 7  one more control-plane iteration (timers, pollers).
//   op % 10 == 8  a raw frame from the wire: len (2, little-endian, at most 2048), then the bytes
//                 (zero-padded), through Engine::deliver_lc() and the control plane: ARP, IPv6
//                 ND, UD to QP1 or anything else the control plane must refuse without harm.
//   op % 10 == 9  the same, handed to the control plane directly (what the engine would pass
//                 on), so the control plane's own parsing sees frames the engine would drop.
// Connectors are numbered in creation order (active ones by connect, passive ones by the
// listener's request handler); an index is taken modulo their number.
#pragma once

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "control/adapter.h"
#include "control/cm/cm.h"
#include "control/cm/cma.h"
#include "control/cm/mad.h"
#include "control/control_plane.h"
#include "control/eal.h"
#include "dataplane/cq.h"
#include "dataplane/engine.h"
#include "dataplane/wire/frame.h"
#include "tests/common/cm_handles.h"
#include "tests/fuzz/harness.h"

namespace urnic::fuzz {

namespace cmf {

inline constexpr uint32_t kCmLocalIp = 0xC0000201;  // 192.0.2.1: the adapter
inline constexpr uint32_t kCmPeerIp = 0xC0000202;   // 192.0.2.2: the peer the fuzzer plays
inline constexpr wire::Ipv6Addr kCmLocalIp6{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
                                            0,    0,    0,    0,    0, 0, 0, 1};
inline constexpr wire::Ipv6Addr kCmPeerIp6{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
                                           0,    0,    0,    0,    0, 0, 0, 2};
inline constexpr wire::MacAddr kCmLocalMac{2, 0, 0, 0, 0, 0x11};
inline constexpr wire::MacAddr kCmPeerMac{2, 0, 0, 0, 0, 0x12};
inline constexpr uint16_t kListenPort = 18515;
inline constexpr size_t kMaxConnectors = 16;  // bounds the QPs one input creates
inline constexpr uint32_t kGsiQkey = ctl::ControlPlane::kGsiQkey;

// The engine and the net_ring port, once per process (EAL comes up with adapter_pool()). The
// adapter is opened anew for every input, so that QP numbers, keys and comm IDs do not depend on
// the inputs run before: a crashing input replays alone exactly as it ran.
struct CmStatic {
  dp::Engine engine{[] {
    dp::EngineConfig c;
    c.idle_yield_after = 0;
    return c;
  }()};
  rte_ring* rx = nullptr;  // what the port receives (nothing: MADs go in via deliver_lc)
  rte_ring* tx = nullptr;  // what it sends; drained after every input
};

inline CmStatic* cm_static() {
  static CmStatic* const s = []() -> CmStatic* {
    if (adapter_pool() == nullptr) return nullptr;  // brings EAL up
    auto* st = new CmStatic;
    st->rx = rte_ring_create("fuzzcm_rx", 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    st->tx = rte_ring_create("fuzzcm_tx", 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (st->rx == nullptr || st->tx == nullptr) return nullptr;
    return st;
  }();
  return s;
}

// `mad` as the peer's QP1 sends it: a RoCEv2 UD SEND ONLY to QP1 with DETH (Q_Key `qkey`,
// source QP 1) and a valid ICRC, from the peer's IPv4 or IPv6 address. Empty if it cannot be
// built.
inline std::vector<uint8_t> ud_mad_frame(std::span<const uint8_t> mad, bool v6, uint32_t qkey) {
  wire::NetHeaders net;
  net.src_mac = kCmPeerMac;
  net.dst_mac = kCmLocalMac;
  net.ipv6 = v6;
  net.src_ip4 = kCmPeerIp;
  net.dst_ip4 = kCmLocalIp;
  net.src_ip6 = kCmPeerIp6;
  net.dst_ip6 = kCmLocalIp6;
  net.udp_sport = wire::udp_sport_for(1, 1);
  wire::TransportHeaders th;
  th.bth.opcode = wire::opc::kUdSendOnly;
  th.bth.pkey = wire::Be16::of(wire::kDefaultPkey);
  wire::Bth::DestQp::set(th.bth, 1);
  th.deth.qkey = wire::Be32::of(qkey);
  wire::Deth::SrcQp::set(th.deth, 1);
  std::vector<uint8_t> f(wire::frame_length(net, th.bth.opcode, static_cast<uint32_t>(mad.size())));
  if (wire::build_frame(f, net, th, mad) != f.size()) f.clear();
  return f;
}

// Stateless checks of one MAD: decode() on exactly `size` heap bytes, and the round trip.
inline std::string check_mad_codec(const uint8_t* data, size_t size) {
  std::unique_ptr<uint8_t[]> buf(new uint8_t[size == 0 ? 1 : size]);
  if (size != 0) std::memcpy(buf.get(), data, size);
  ctl::cm::Message m;
  const ctl::cm::MadError e = ctl::cm::decode({buf.get(), size}, &m);
  if (e >= ctl::cm::MadError::kCount) return "bad MadError value";
  if (e != ctl::cm::MadError::kOk) return {};
  const auto again = ctl::cm::encode(m);
  ctl::cm::Message m2;
  if (ctl::cm::decode(again, &m2) != ctl::cm::MadError::kOk) return "re-encoded MAD not decodable";
  if (!(m2 == m)) return "re-encoded MAD decodes differently";
  if (const auto* req = std::get_if<ctl::cm::Req>(&m.body)) {
    ctl::cm::CmaHdr h;
    if (ctl::cm::decode(std::span<const uint8_t, ctl::cm::kCmaHdrSize>(req->private_data.data(),
                                                                       ctl::cm::kCmaHdrSize),
                        &h)) {
      std::array<uint8_t, ctl::cm::kCmaHdrSize> out{};
      ctl::cm::encode(h, out);
      ctl::cm::CmaHdr h2;
      if (!ctl::cm::decode(out, &h2) || !(h2 == h)) return "rdma_cm header round trip differs";
    }
  }
  return {};
}

class CmWorld {
 public:
  explicit CmWorld(CmStatic* st) : st_(st) {
    pool_avail_ = rte_mempool_avail_count(adapter_pool());
    // A net_ring port over the process's two rings; closing the adapter releases it, so every
    // input gets one of its own.
    port_ = rte_eth_from_rings("fuzzcm", &st->rx, 1, &st->tx, 1, 0);
    if (port_ < 0) {
      fail("net_ring port creation failed");
      return;
    }
    ctl::AdapterConfig c;
    c.port_id = static_cast<uint16_t>(port_);
    c.port.mbufs = 127;
    c.port.mbuf_cache = 0;
    c.port.rx_desc = c.port.tx_desc = 32;
    c.ipv4 = kCmLocalIp;
    c.ipv6 = kCmLocalIp6;
    c.mac = kCmLocalMac;
    c.max_qps = 64;
    c.key_seed = 0x5eed;
    c.start_control = false;  // the fuzz thread runs ControlPlane::poll_once()
    if (ctl::Adapter::open(c, &st->engine, &adapter_) != Status::kSuccess) {
      fail("adapter setup failed");
      return;
    }
    // The CM core is fuzzed on its own: its QPs are dataplane QPs on the internal adapter, set
    // up here directly (the public objects need a control thread this harness does not run).
    cq_ = std::make_unique<dp::Cq>(1024);
    pd_ = adapter_->alloc_pd();
    adapter_->control().add_static(ctl::gid_from_ipv4(kCmPeerIp), kCmPeerMac);
    adapter_->control().add_static(kCmPeerIp6, kCmPeerMac);
    ctl::CmConfig cfg;
    cfg.testing_drop_tx = [this](const ctl::cm::Message& m) {
      on_tx(m);
      return true;  // nothing goes on the wire: the harness reads what would have
    };
    agent_ = std::make_unique<ctl::CmAgent>(*adapter_, cfg);
    listener_ = cmtest::create_listener(*agent_);
    if (listener_->listen(kListenPort, [this](std::unique_ptr<cmtest::CmConnector> c) {
          add_conn(std::move(c), false);
        }) != Status::kSuccess)
      fail("listen failed");
    dlistener_ = cmtest::create_listener(*agent_);
    if (dlistener_->listen(
            kListenPort,
            [this](std::unique_ptr<cmtest::CmConnector> c) { add_conn(std::move(c), false); },
            ctl::cm::kPsUdp) != Status::kSuccess)
      fail("listen_datagram failed");
  }

  ~CmWorld() { teardown(); }

  std::string run(const uint8_t* data, size_t size) {
    if (!err_.empty()) return err_;
    Reader r{data, size};
    for (size_t n = 0; n < kMaxRecords && !r.done(); ++n) {
      const uint8_t op = r.byte();
      switch (op % 10) {
        case 0:
          mad(r);
          break;
        case 1:
          connect(r.byte());
          break;
        case 2:
          if (Conn* c = pick(r.byte())) (void)c->cm->complete_connect(disconnect_event(c));
          break;
        case 3:
          accept(r.byte());
          break;
        case 4:
          if (Conn* c = pick(r.byte())) (void)c->cm->reject({});
          break;
        case 5:
          if (Conn* c = pick(r.byte())) (void)c->cm->disconnect(completion(c, &Conn::disc_done));
          break;
        case 6:
          if (Conn* c = pick(r.byte())) close(*c);
          break;
        case 8:
        case 9:
          raw(r, op % 10 == 9);
          break;
        default:
          adapter_->control().poll_once();
          break;
      }
      if (!err_.empty()) return err_;
    }
    teardown();
    return err_;
  }

 private:
  struct Reader {
    const uint8_t* d;
    size_t n;
    size_t i = 0;
    bool done() const { return i >= n; }
    uint8_t byte() { return i < n ? d[i++] : 0; }
  };

  struct Conn {
    std::unique_ptr<cmtest::CmConnector> cm;
    dp::Qp* qp = nullptr;
    bool active = false;
    bool closed = false;
    int conn_done = 0, accept_done = 0, disc_done = 0, disc_event = 0;
  };

  void fail(const std::string& why) {
    if (err_.empty()) err_ = why;
  }

  // ---- Records -------------------------------------------------------------------------------

  void mad(Reader& r) {
    const uint8_t fix = r.byte();
    const uint8_t l = r.byte();
    const size_t len = l == 0 ? ctl::cm::kMadSize : l;
    std::vector<uint8_t> mad(len, 0);
    for (auto& b : mad) b = r.byte();
    if (const std::string e = check_mad_codec(mad.data(), mad.size()); !e.empty()) fail(e);
    if (mad.size() == ctl::cm::kMadSize) fixup(mad, fix);
    deliver(mad, (fix & 0x08) != 0);
  }

  void raw(Reader& r, bool to_control) {
    const size_t lo = r.byte();
    const size_t len = std::min<size_t>(lo | size_t{r.byte()} << 8, 2048);
    rte_mbuf* m = rte_pktmbuf_alloc(adapter_pool());
    if (m == nullptr) return fail("harness pool empty");
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
    if (p == nullptr) {
      rte_pktmbuf_free(m);
      return fail("frame too long for the harness pool");
    }
    for (size_t i = 0; i < len; ++i) p[i] = r.byte();
    const uint64_t before = adapter_->control().counters().mads_in;
    if (to_control) {
      if (!adapter_->control().take(m)) rte_pktmbuf_free(m);
    } else {
      st_->engine.deliver_lc(adapter_->endpoint(), m, rte_rdtsc());
    }
    adapter_->control().poll_once();
    mads_handed_ += adapter_->control().counters().mads_in - before;
  }

  void fixup(std::vector<uint8_t>& mad, uint8_t fix) {
    namespace cm = ctl::cm;
    auto& h = *reinterpret_cast<cm::MadHdr*>(mad.data());
    if (fix & 0x01) {
      h.base_version = cm::kBaseVersion;
      h.mgmt_class = cm::kMgmtClassCm;
      h.class_version = cm::kCmClassVersion;
      h.method = wire::Be8::of(cm::kMethodSend);
    }
    uint8_t* body = mad.data() + cm::kMadHdrSize;
    if ((fix & 0x02) && !our_ids_.empty()) {
      const uint32_t id = our_ids_[(fix >> 5) % our_ids_.size()];
      const auto be = wire::Be32::of(id);
      // Remote comm ID of MRA, REJ, REP, RTU, DREQ, DREP; a SIDR_REP's request ID.
      const bool sidr = h.attr_id.get() == static_cast<uint16_t>(cm::AttrId::kSidrRep);
      std::memcpy(body + (sidr ? 0 : 4), be.b.data(), 4);
    }
    if ((fix & 0x04) && h.attr_id.get() == static_cast<uint16_t>(cm::AttrId::kSidrReq)) {
      auto& req = *reinterpret_cast<cm::SidrReqWire*>(body);
      const bool v6 = (fix & 0x08) != 0;
      req.service_id = wire::Be64::of(cm::service_id_for(kListenPort, cm::kPsUdp));
      cm::CmaHdr c;
      c.ip_version = v6 ? 6 : 4;
      c.src_port = 40000;
      c.src = peer_gid(v6);
      c.dst = local_gid(v6);
      cm::encode(c, std::span<uint8_t, cm::kCmaHdrSize>(req.private_data.data(), cm::kCmaHdrSize));
    }
    if ((fix & 0x04) && h.attr_id.get() == static_cast<uint16_t>(cm::AttrId::kReq)) {
      auto& req = *reinterpret_cast<cm::ReqWire*>(body);
      const bool v6 = (fix & 0x08) != 0;
      req.service_id = wire::Be64::of(cm::service_id_for(kListenPort));
      req.primary.local_gid = peer_gid(v6);
      req.primary.remote_gid = local_gid(v6);
      cm::CmaHdr c;
      c.ip_version = v6 ? 6 : 4;
      c.src_port = 40000;
      c.src = peer_gid(v6);
      c.dst = local_gid(v6);
      cm::encode(c, std::span<uint8_t, cm::kCmaHdrSize>(req.private_data.data(), cm::kCmaHdrSize));
    }
  }

  static ctl::cm::Gid peer_gid(bool v6) { return v6 ? kCmPeerIp6 : ctl::gid_from_ipv4(kCmPeerIp); }
  static ctl::cm::Gid local_gid(bool v6) {
    return v6 ? kCmLocalIp6 : ctl::gid_from_ipv4(kCmLocalIp);
  }

  // The MAD as the peer's QP1 sends it, through the engine's RX path to the control plane.
  void deliver(const std::vector<uint8_t>& mad, bool v6) {
    const std::vector<uint8_t> frame = ud_mad_frame(mad, v6, kGsiQkey);
    rte_mbuf* m = rte_pktmbuf_alloc(adapter_pool());
    if (m == nullptr) return fail("harness pool empty");
    auto* p =
        reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())));
    if (frame.empty() || p == nullptr) {
      rte_pktmbuf_free(m);
      return fail("could not build the UD frame");
    }
    std::memcpy(p, frame.data(), frame.size());
    const uint64_t before = adapter_->control().counters().mads_in;
    st_->engine.deliver_lc(adapter_->endpoint(), m, rte_rdtsc());
    adapter_->control().poll_once();
    if (adapter_->control().counters().mads_in == before + 1) ++mads_handed_;
  }

  void connect(uint8_t port) {
    if (conns_.size() >= kMaxConnectors) return;
    if (port & 0x40) {
      Conn& c = add_conn(cmtest::create_connector(*agent_), true);
      (void)c.cm->resolve(peer_gid(port & 0x80), static_cast<uint16_t>(kListenPort + (port & 3)),
                          {}, completion(&c, &Conn::conn_done));
      adapter_->control().poll_once();
      return;
    }
    dp::Qp* qp = new_qp();
    if (qp == nullptr) return;
    Conn& c = add_conn(cmtest::create_connector(*agent_), true);
    c.qp = qp;
    (void)c.cm->connect(qp, peer_gid(port & 0x80), static_cast<uint16_t>(kListenPort + (port & 3)),
                        {2, 2}, {}, completion(&c, &Conn::conn_done));
    adapter_->control().poll_once();
  }

  void accept(uint8_t idx) {
    Conn* c = pick(idx);
    if (c == nullptr || c->active || c->qp != nullptr) return;
    if (c->cm->info().datagram) {
      const uint8_t pd[] = {1, 2, 3};
      (void)c->cm->accept_datagram(0x42, 0, pd);
      adapter_->control().poll_once();
      return;
    }
    c->qp = new_qp();
    if (c->qp == nullptr) return;
    (void)c->cm->accept(c->qp, {2, 2}, {}, disconnect_event(c), completion(c, &Conn::accept_done));
    adapter_->control().poll_once();
  }

  dp::Qp* new_qp() {
    dp::QpConfig qc;
    qc.qpn = adapter_->alloc_qpn();
    if (qc.qpn == 0) return nullptr;
    qc.pd = pd_;
    qc.send_cq = qc.recv_cq = cq_.get();
    qc.sq_depth = qc.rq_depth = 4;
    auto qp = std::make_unique<dp::Qp>(qc);
    if (engine_op(dp::MailboxMsg::Kind::kAddQp, qp.get()) != Status::kSuccess) {
      adapter_->free_qpn(qc.qpn);
      return nullptr;
    }
    qps_.push_back(std::move(qp));
    return qps_.back().get();
  }
  Status engine_op(dp::MailboxMsg::Kind kind, dp::Qp* qp) {
    dp::MailboxMsg m;
    m.kind = kind;
    m.ep = &adapter_->endpoint();
    m.qp = qp;
    return adapter_->engine().call(m);
  }

  Conn& add_conn(std::unique_ptr<cmtest::CmConnector> cm, bool active) {
    conns_.push_back(std::make_unique<Conn>());
    Conn& c = *conns_.back();
    c.cm = std::move(cm);
    c.active = active;
    return c;
  }

  Conn* pick(uint8_t idx) {
    if (conns_.empty()) return nullptr;
    Conn* c = conns_[idx % conns_.size()].get();
    return c->closed ? nullptr : c;
  }

  // A callback that counts its calls: more than one, or one after close(), is a finding.
  std::function<void(Status)> completion(Conn* c, int Conn::*field) {
    return [this, c, field](Status) { once(c, field); };
  }
  std::function<void()> disconnect_event(Conn* c) {
    return [this, c] { once(c, &Conn::disc_event); };
  }
  void once(Conn* c, int Conn::*field) {
    if (c->closed) fail("a callback ran after its connector was closed");
    if (++(c->*field) > 1) fail("a connector callback ran twice");
  }

  void close(Conn& c) {
    c.cm->close();
    c.closed = true;
  }

  void on_tx(const ctl::cm::Message& m) {
    const auto mad = ctl::cm::encode(m);
    ctl::cm::Message back;
    if (ctl::cm::decode(mad, &back) != ctl::cm::MadError::kOk || !(back == m))
      fail("a MAD the CM sent does not decode to what it encoded");
    if (const auto* rej = std::get_if<ctl::cm::Rej>(&m.body);
        rej != nullptr && std::getenv("URNIC_FUZZ_VERBOSE") != nullptr)
      std::fprintf(stderr, "cm: REJ sent, reason %s\n", ctl::cm::to_string(rej->reason));
    std::visit(
        [this](const auto& b) {
          uint32_t id = 0;
          if constexpr (requires { b.local_comm_id; })
            id = b.local_comm_id;
          else
            id = b.request_id;  // SIDR
          if (our_ids_.size() < 64) our_ids_.push_back(id);
        },
        m.body);
  }

  // Closing the adapter closes (and releases) its ethdev; the vdev behind it goes too, so the
  // next input can create its port under the same name.
  void close_port() {
    if (port_ < 0) return;
    rte_eth_dev_info info{};
    (void)rte_eth_dev_info_get(static_cast<uint16_t>(port_), &info);
    adapter_.reset();
    if (info.device != nullptr) (void)rte_dev_remove(info.device);
    port_ = -1;
  }

  void drain_tx() {
    void* m = nullptr;
    while (rte_ring_sc_dequeue(st_->tx, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  }

  void teardown() {
    if (agent_ == nullptr) {
      cq_.reset();
      close_port();
      return;
    }
    for (auto& c : conns_)
      if (!c->closed) close(*c);
    listener_->close();
    dlistener_->close();
    const ctl::CmCounters k = agent_->counters();
    uint64_t sum = 0;
    for (uint64_t v : k.decode_errors) sum += v;
    for (uint64_t v : k.in_by_attr) sum += v;
    if (std::getenv("URNIC_FUZZ_VERBOSE") != nullptr) print(k);
    if (k.mads_in != mads_handed_) fail("CM counted a different number of MADs than it got");
    if (sum != k.mads_in) fail("CM decode-error and per-attribute counters do not add up");
    conns_.clear();
    listener_.reset();
    dlistener_.reset();
    agent_.reset();
    for (const auto& qp : qps_) {
      if (engine_op(dp::MailboxMsg::Kind::kDestroyQp, qp.get()) != Status::kSuccess)
        fail("destroy_qp failed");
      adapter_->free_qpn(qp->qpn());
    }
    qps_.clear();
    cq_.reset();
    close_port();
    drain_tx();
    // Frames the CM could not hand to the wire stay nowhere: every harness mbuf is back.
    if (rte_mempool_avail_count(adapter_pool()) != pool_avail_) fail("mbufs leaked");
  }

  // URNIC_FUZZ_VERBOSE=1: what an input did (to check that seeds reach the states they aim at).
  void print(const ctl::CmCounters& k) const {
    static const char* const kNames[ctl::kAttrSlots] = {
        "REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP", "SIDR_REQ", "SIDR_REP", "?"};
    std::fprintf(stderr, "cm: mads_in %llu, in:", static_cast<unsigned long long>(k.mads_in));
    for (size_t i = 0; i < ctl::kAttrSlots; ++i)
      if (k.in_by_attr[i] != 0)
        std::fprintf(stderr, " %s %llu", kNames[i], (unsigned long long)k.in_by_attr[i]);
    std::fprintf(stderr, "; out:");
    for (size_t i = 0; i < ctl::kAttrSlots; ++i)
      if (k.out_by_attr[i] != 0)
        std::fprintf(stderr, " %s %llu", kNames[i], (unsigned long long)k.out_by_attr[i]);
    std::fprintf(stderr, "; no listener %llu stale %llu backlog %llu",
                 (unsigned long long)k.no_listener, (unsigned long long)k.stale,
                 (unsigned long long)k.backlog_full);
    std::fprintf(stderr, "; decode errors %llu unmatched %llu duplicates %llu\n",
                 static_cast<unsigned long long>(std::accumulate(
                     std::begin(k.decode_errors), std::end(k.decode_errors), uint64_t{0})),
                 (unsigned long long)k.unmatched, (unsigned long long)k.duplicates);
    for (const auto& c : conns_)
      std::fprintf(stderr, "  %s conn: state %s, connect %d accept %d disconnect %d event %d\n",
                   c->active ? "active" : "passive", ctl::to_string(c->cm->state()), c->conn_done,
                   c->accept_done, c->disc_done, c->disc_event);
  }

  CmStatic* st_;
  int port_ = -1;
  std::unique_ptr<ctl::Adapter> adapter_;
  std::unique_ptr<dp::Cq> cq_;
  uint32_t pd_ = 0;
  std::unique_ptr<ctl::CmAgent> agent_;
  std::unique_ptr<cmtest::CmListener> listener_;
  std::unique_ptr<cmtest::CmListener> dlistener_;  // rdma_cm's UDP port space (SIDR)
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<std::unique_ptr<dp::Qp>> qps_;
  std::vector<uint32_t> our_ids_;  // local comm IDs of the MADs the CM sent
  uint64_t mads_handed_ = 0;
  unsigned pool_avail_ = 0;
  std::string err_;
};

}  // namespace cmf

inline std::string check_cm(const uint8_t* data, size_t size) {
  cmf::CmStatic* st = cmf::cm_static();
  if (st == nullptr) return "CM harness setup failed";
  cmf::CmWorld w(st);
  return w.run(data, size);
}

}  // namespace urnic::fuzz
