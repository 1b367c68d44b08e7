// rte_flow steering by destination QP (issue 14 item 2; dataplane/steering.h): where the port can
// match a RoCEv2 frame's BTH DestQP, each QP's frames are sent by the port itself to the queue of
// the engine that owns it, and the software hand-off only catches what slips past (a rule not yet
// installed, a PMD that refused one). DPDK 22.11 has no BTH item, so the match is a RAW item: the
// three DestQP bytes at offset 5 past the UDP header (IBTA §9.2: OpCode, flags, P_Key, a
// reserved byte, then DestQP), after UDP destination port 4791 (Annex A17.2.1). Whether the
// port takes such a rule is asked once, at open, with rte_flow_validate; none of the virtual
// PMDs here (net_ring, net_af_packet, net_tap) does, so they use RSS or the software path.
#include <rte_byteorder.h>
#include <rte_flow.h>

#include "dataplane/log.h"
#include "dataplane/port.h"

namespace urnic::dp {
namespace {

constexpr uint16_t kRoceV2Port = 4791;

// One rule: IPv4 or IPv6, UDP 4791, DestQP `qpn` -> queue `q`. validate only when `out` is null.
int qpn_rule(uint16_t port, uint32_t qpn, uint16_t q, bool ipv6, rte_flow** out,
             rte_flow_error* err) {
  rte_flow_attr attr{};
  attr.ingress = 1;
  rte_flow_item_udp udp_spec{}, udp_mask{};
  udp_spec.hdr.dst_port = rte_cpu_to_be_16(kRoceV2Port);
  udp_mask.hdr.dst_port = 0xFFFF;
  const uint8_t qpn_bytes[3] = {static_cast<uint8_t>(qpn >> 16), static_cast<uint8_t>(qpn >> 8),
                                static_cast<uint8_t>(qpn)};
  const uint8_t qpn_mask[3] = {0xFF, 0xFF, 0xFF};
  rte_flow_item_raw raw_spec{}, raw_mask{};
  raw_spec.relative = 1;  // from the end of the UDP header
  raw_spec.offset = 5;
  raw_spec.length = sizeof(qpn_bytes);
  raw_spec.pattern = qpn_bytes;
  raw_mask.relative = 1;
  raw_mask.offset = -1;  // every bit of the offset matters
  raw_mask.length = 0xFFFF;
  raw_mask.pattern = qpn_mask;
  const rte_flow_item items[] = {
      {RTE_FLOW_ITEM_TYPE_ETH, nullptr, nullptr, nullptr},
      {ipv6 ? RTE_FLOW_ITEM_TYPE_IPV6 : RTE_FLOW_ITEM_TYPE_IPV4, nullptr, nullptr, nullptr},
      {RTE_FLOW_ITEM_TYPE_UDP, &udp_spec, nullptr, &udp_mask},
      {RTE_FLOW_ITEM_TYPE_RAW, &raw_spec, nullptr, &raw_mask},
      {RTE_FLOW_ITEM_TYPE_END, nullptr, nullptr, nullptr},
  };
  rte_flow_action_queue queue{};
  queue.index = q;
  const rte_flow_action actions[] = {
      {RTE_FLOW_ACTION_TYPE_QUEUE, &queue},
      {RTE_FLOW_ACTION_TYPE_END, nullptr},
  };
  if (out == nullptr) return rte_flow_validate(port, &attr, items, actions, err);
  *out = rte_flow_create(port, &attr, items, actions, err);
  return *out != nullptr ? 0 : -1;
}

}  // namespace

bool Port::probe_qpn_flow() noexcept {
  rte_flow_error err{};
  // QPN 2 (the first a consumer gets) to the last queue, IPv4 and IPv6 both.
  const uint16_t q = static_cast<uint16_t>(cfg_.queues - 1);
  const bool ok = qpn_rule(cfg_.port_id, 2, q, false, nullptr, &err) == 0 &&
                  qpn_rule(cfg_.port_id, 2, q, true, nullptr, &err) == 0;
  if (!ok)
    log_line(LogType::kCtl, RTE_LOG_DEBUG,
             "port %u: no rte_flow steering by destination QP (%s); RSS or software hand-off",
             cfg_.port_id, err.message != nullptr ? err.message : "refused");
  return ok;
}

Port::QpnRules Port::steer_qpn(uint32_t qpn, uint16_t q) noexcept {
  QpnRules r;
  if (!qpn_flow_ || q >= cfg_.queues) return r;
  rte_flow_error err{};
  if (qpn_rule(cfg_.port_id, qpn, q, false, &r.v4, &err) != 0 ||
      qpn_rule(cfg_.port_id, qpn, q, true, &r.v6, &err) != 0) {
    // The software hand-off still delivers this QP's frames; a rule table that fills up is
    // worth a line.
    log_line(LogType::kCtl, RTE_LOG_NOTICE, "port %u: no rte_flow rule for QP 0x%06x (%s)",
             cfg_.port_id, qpn, err.message != nullptr ? err.message : "refused");
    unsteer_qpn(r);
  }
  return r;
}

void Port::unsteer_qpn(QpnRules& r) noexcept {
  rte_flow_error err{};
  for (rte_flow** f : {&r.v4, &r.v6}) {
    if (*f != nullptr) (void)rte_flow_destroy(cfg_.port_id, *f, &err);
    *f = nullptr;
  }
}

}  // namespace urnic::dp
