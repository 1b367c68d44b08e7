// urnicd's telemetry commands (telemetry.h). They run on DPDK's telemetry thread: the server
// they read is published under a mutex and read through its own locked accessors.
#include "daemon/telemetry.h"

#include <rte_telemetry.h>

#include <arpa/inet.h>

#include <mutex>
#include <string>

#include "daemon/server.h"
#include "urnic/extensions.h"

namespace urnic::daemon {
namespace {

std::mutex g_mu;
const Server* g_server = nullptr;

int clients_cmd(const char*, const char*, rte_tel_data* d) {
  std::lock_guard lock(g_mu);
  rte_tel_data_start_dict(d);
  if (g_server == nullptr) return 0;
  for (const ipc::ClientEntry& e : g_server->clients()) {
    rte_tel_data* c = rte_tel_data_alloc();
    if (c == nullptr) return -1;
    rte_tel_data_start_dict(c);
    rte_tel_data_add_dict_u64(c, "pid", e.pid);
    rte_tel_data_add_dict_u64(c, "uid", e.uid);
    rte_tel_data_add_dict_u64(c, "gid", e.gid);
    rte_tel_data_add_dict_string(c, "name", std::string(ipc::name_of(e.name)).c_str());
    rte_tel_data_add_dict_u64(c, "requests", e.requests);
    rte_tel_data_add_dict_u64(c, "errors", e.errors);
    rte_tel_data_add_dict_u64(c, "pds", e.pds);
    rte_tel_data_add_dict_u64(c, "cqs", e.cqs);
    rte_tel_data_add_dict_u64(c, "qps", e.qps);
    rte_tel_data_add_dict_u64(c, "mrs", e.mrs);
    rte_tel_data_add_dict_u64(c, "srqs", e.srqs);
    rte_tel_data_add_dict_u64(c, "shared", e.shared);
    rte_tel_data_add_dict_u64(c, "shared_bytes", e.shared_bytes);
    if (rte_tel_data_add_dict_container(d, std::to_string(e.id).c_str(), c, 0) != 0)
      rte_tel_data_free(c);
  }
  return 0;
}

int adapters_cmd(const char*, const char*, rte_tel_data* d) {
  std::lock_guard lock(g_mu);
  rte_tel_data_start_dict(d);
  if (g_server == nullptr) return 0;
  for (const ServedAdapter& a : g_server->adapters()) {
    rte_tel_data* c = rte_tel_data_alloc();
    if (c == nullptr) return -1;
    rte_tel_data_start_dict(c);
    auto* ext = a.adapter->query_extension<AdapterExtension>();
    rte_tel_data_add_dict_u64(c, "telemetry_id", ext != nullptr ? ext->telemetry_id() : 0);
    char ip[INET6_ADDRSTRLEN] = {};
    const uint32_t v4 = htonl(a.entry.ipv4);
    if (a.entry.ipv4 != 0 && inet_ntop(AF_INET, &v4, ip, sizeof ip) != nullptr)
      rte_tel_data_add_dict_string(c, "ipv4", ip);
    if (a.entry.has_ipv6 != 0 && inet_ntop(AF_INET6, a.entry.ipv6, ip, sizeof ip) != nullptr)
      rte_tel_data_add_dict_string(c, "ipv6", ip);
    rte_tel_data_add_dict_u64(c, "engines", a.entry.engines);
    rte_tel_data_add_dict_u64(c, "mtu", a.entry.mtu);
    if (rte_tel_data_add_dict_container(d, std::string(ipc::name_of(a.entry.name)).c_str(), c, 0) !=
        0)
      rte_tel_data_free(c);
  }
  return 0;
}

int server_cmd(const char*, const char*, rte_tel_data* d) {
  std::lock_guard lock(g_mu);
  rte_tel_data_start_dict(d);
  if (g_server == nullptr) return 0;
  const ServerCounters c = g_server->counters();
  rte_tel_data_add_dict_u64(d, "clients", g_server->clients().size());
  rte_tel_data_add_dict_u64(d, "accepted", c.accepted);
  rte_tel_data_add_dict_u64(d, "refused", c.refused);
  rte_tel_data_add_dict_u64(d, "closed", c.closed);
  rte_tel_data_add_dict_u64(d, "dropped", c.dropped);
  rte_tel_data_add_dict_u64(d, "requests", c.requests);
  rte_tel_data_add_dict_u64(d, "malformed", c.malformed);
  BridgeCounters b;
  for (const Bridge* br : g_server->bridges()) {
    const BridgeCounters x = br->counters();
    b.sends += x.sends;
    b.receives += x.receives;
    b.completions += x.completions;
    b.cq_events += x.cq_events;
    b.client_errors += x.client_errors;
    b.sleeps += x.sleeps;
    b.wakeups += x.wakeups;
  }
  rte_tel_data_add_dict_u64(d, "ring_sends", b.sends);
  rte_tel_data_add_dict_u64(d, "ring_receives", b.receives);
  rte_tel_data_add_dict_u64(d, "ring_completions", b.completions);
  rte_tel_data_add_dict_u64(d, "ring_cq_events", b.cq_events);
  rte_tel_data_add_dict_u64(d, "ring_client_errors", b.client_errors);
  rte_tel_data_add_dict_u64(d, "engine_sleeps", b.sleeps);
  rte_tel_data_add_dict_u64(d, "engine_doorbell_wakeups", b.wakeups);
  return 0;
}

}  // namespace

void telemetry_publish(const Server* s) {
  static std::once_flag once;
  std::call_once(once, [] {
    rte_telemetry_register_cmd("/urnicd/clients", clients_cmd,
                               "urnicd's attached clients. No parameters");
    rte_telemetry_register_cmd("/urnicd/adapters", adapters_cmd,
                               "urnicd's adapters by name. No parameters");
    rte_telemetry_register_cmd("/urnicd/server", server_cmd,
                               "urnicd's client socket counters. No parameters");
  });
  std::lock_guard lock(g_mu);
  g_server = s;
}

}  // namespace urnic::daemon
