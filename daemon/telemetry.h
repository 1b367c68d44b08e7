// urnicd's own telemetry commands (docs/daemon.md "Operating it"), beside the library's
// /urnic/... ones, on the socket of DPDK's runtime directory /var/run/dpdk/<file_prefix>/
// (`dpdk-telemetry.py -f urnicd`):
//   /urnicd/clients   every attached client: id, pid, uid, gid, name, requests, errors, and the
//                     objects it holds (pds, cqs, qps, mrs, shared, shared_bytes)
//   /urnicd/adapters  every served adapter: name -> its /urnic/adapter id, addresses, engines
//   /urnicd/server    the socket's counters (accepted, refused, closed, malformed ...) and the
//                     shared rings' (ring_sends, ring_receives, ring_completions, and
//                     ring_client_errors: QPs and CQs failed for what their client wrote)
#pragma once

namespace urnic::daemon {

class Server;

// Registers the commands (once) and points them at `s`; nullptr detaches them (they then
// answer with empty lists) before the server goes away.
void telemetry_publish(const Server* s);

}  // namespace urnic::daemon
