// urnicctl: what a running urnicd serves, as `rdma resource show` shows the kernel's (docs/
// daemon.md "Operating it"). A client of the daemon like any other, through the public API
// (urnic/daemon.h).
//
//   urnicctl [--socket PATH] [status | adapters | adapter NAME | clients]
//
// Exit status: 0 on success, 1 when the daemon cannot be reached or refuses, 2 for a bad
// command line.
#include <arpa/inet.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "urnic/urnic.h"

namespace {

using namespace urnic;

int failed(const char*) {
  std::fprintf(stderr, "urnicctl: %s\n", last_error());
  return 1;
}

std::string ipv4_text(uint32_t v) {
  if (v == 0) return "-";
  char b[INET_ADDRSTRLEN] = {};
  const uint32_t n = htonl(v);
  return inet_ntop(AF_INET, &n, b, sizeof b) != nullptr ? b : "?";
}

std::string ipv6_text(const std::optional<std::array<uint8_t, 16>>& v) {
  if (!v) return "-";
  char b[INET6_ADDRSTRLEN] = {};
  return inet_ntop(AF_INET6, v->data(), b, sizeof b) != nullptr ? b : "?";
}

int show_adapters() {
  std::vector<DaemonAdapter> as;
  if (daemon_adapters(&as) != Status::kSuccess) return failed("adapters");
  std::printf("%-12s %-17s %-15s %-26s %7s %5s\n", "ADAPTER", "MAC", "IPV4", "IPV6", "ENGINES",
              "MTU");
  for (const auto& a : as)
    std::printf("%-12s %02x:%02x:%02x:%02x:%02x:%02x %-15s %-26s %7u %5u\n", a.name.c_str(),
                a.mac[0], a.mac[1], a.mac[2], a.mac[3], a.mac[4], a.mac[5],
                ipv4_text(a.ipv4).c_str(), ipv6_text(a.ipv6).c_str(), a.engines, a.mtu);
  return 0;
}

int show_adapter(const char* name) {
  AdapterInfo info{};
  PortCounters port{};
  if (daemon_query_adapter(name, &info, &port) != Status::kSuccess) return failed(name);
  std::printf(
      "%s: max_cq_depth %u, max_initiator_queue_depth %u, max_receive_queue_depth %u, "
      "max_inline %u, max_transfer %u\n",
      name, info.max_cq_depth, info.max_initiator_queue_depth, info.max_receive_queue_depth,
      info.max_inline_data_size, info.max_transfer_length);
  std::printf("  rx %" PRIu64 " packets %" PRIu64 " bytes, tx %" PRIu64 " packets %" PRIu64
              " bytes, rx drops %" PRIu64 "\n",
              port.rx_packets, port.rx_bytes, port.tx_packets, port.tx_bytes,
              port.rx_drops_total());
  return 0;
}

int show_clients() {
  std::vector<DaemonClient> cs;
  if (daemon_clients(&cs) != Status::kSuccess) return failed("clients");
  std::printf("%6s %8s %6s %-20s %9s %7s %4s %4s %4s %4s %5s %12s\n", "ID", "PID", "UID", "NAME",
              "REQUESTS", "ERRORS", "PDS", "CQS", "QPS", "SRQS", "MRS", "SHARED");
  for (const auto& c : cs)
    std::printf("%6u %8u %6u %-20s %9" PRIu64 " %7" PRIu64 " %4u %4u %4u %4u %5u %12" PRIu64 "\n",
                c.id, c.pid, c.uid, c.name.c_str(), c.requests, c.errors, c.pds, c.cqs, c.qps,
                c.srqs, c.mrs, c.shared_bytes);
  return 0;
}

int show_status() {
  DaemonInfo d;
  if (daemon_info(&d) != Status::kSuccess) return failed("status");
  std::printf("urnicd pid %u at %s, protocol %u.%u; this is client %u\n", d.pid,
              d.socket_path.c_str(), d.version_major, d.version_minor, d.client_id);
  return show_adapters();
}

void usage(FILE* f) {
  std::fprintf(f,
               "usage: urnicctl [--socket PATH] [status | adapters | adapter NAME | clients]\n"
               "  --socket  the daemon's socket (default: $URNIC_DAEMON, else %s)\n",
               std::string(kDefaultDaemonSocket).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket;
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
      socket = argv[++i];
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (argv[i][0] == '-') {
      usage(stderr);
      return 2;
    } else {
      words.emplace_back(argv[i]);
    }
  }
  const std::string cmd = words.empty() ? "status" : words[0];
  const bool known = cmd == "status" || cmd == "adapters" || cmd == "clients" ||
                     (cmd == "adapter" && words.size() == 2);
  if (!known || (cmd != "adapter" && words.size() > 1)) {
    usage(stderr);
    return 2;
  }
  if (attach(socket, "urnicctl") != Status::kSuccess) return failed("attach");
  int rc = 0;
  if (cmd == "status") rc = show_status();
  if (cmd == "adapters") rc = show_adapters();
  if (cmd == "adapter") rc = show_adapter(words[1].c_str());
  if (cmd == "clients") rc = show_clients();
  detach();
  return rc;
}
