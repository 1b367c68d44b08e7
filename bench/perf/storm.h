// urnic-perf --connect-storm (issue 44 item 3): the acceptance test of a peer's connection
// manager. The client opens N RC connections through the IB CM as rdma_cm speaks it (service ID
// of RDMA_PS_TCP and the -p port; any rdma_cm listener will do: urnic-perf's server, cmtime,
// ib_write_bw -R, a storage target), either as fast as the peer answers (a window of requests
// outstanding) or at a set rate (each request's latency then runs from when it fell due, so a
// slow peer is not hidden by a late request), holds every connection it got, and then
// disconnects them. It reports the setup and teardown rates, latency percentiles (REQ -> REP,
// DREQ -> DREP), every refusal by its REJ reason (Connector::get_reject_reason), requests left
// unanswered, and where the peer first refused (how many connections it held then). Each QP is
// created before the storm starts, as cmtime does, so that only the connection manager is
// measured.
//
// The server accepts N requests with a QP each (a peer for the tests and for stock clients such
// as cmtime), optionally refusing beyond --storm-limit connections held, as a peer at its QP limit
// does, and ends when all N have come and gone.
#pragma once

#include "bench/perf/perf.h"

namespace urnic::perf {

// The storm against a real port (o.storm != 0), client or server; returns the exit code.
int run_storm(const Options& o);

}  // namespace urnic::perf
