#!/usr/bin/env bash
# ctest label "perf": urnic-perf -R (rdma_cm, issue 44 item 1) in two network namespaces, against
# urnic-perf and against stock perftest run on urnic's libibverbs / librdmacm (urnic-run), in
# both roles.
#
#   urnicA<pid>: roce0 ==veth== roce1 :urnicB<pid>   RoCEv2 over net_af_packet, 198.18.1.1 / .2
#                                                    (urnic's own addresses). No TCP link: the
#                                                    exchange itself runs over an RC QP that
#                                                    the IB CM connected, as perftest's -R does.
#
# Each pair must exit 0 and print its result rows; an urnic-perf side must print "result: PASS"
# (every completion successful; between two urnic-perfs the last message's data verified) and
# "rdma_cm QPs : ON". Then the failures a user meets: a -R client whose server listens on
# another port (refused: exit 3 with the reason), and a -R server nobody connects to (exit 3).
#
# Usage: perf_rdma_cm_test.sh path/to/urnic-perf path/to/urnic-run. Exits 77 (ctest
# SKIP_RETURN_CODE) without root or network namespaces; the perftest pairs are skipped (and said
# so) without perftest.
set -u
perf=${1:?usage: perf_rdma_cm_test.sh path/to/urnic-perf path/to/urnic-run}
urun=${2:?usage: perf_rdma_cm_test.sh path/to/urnic-perf path/to/urnic-run}
# shellcheck source=tests/perf/netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
netns_need "$perf"
netns_pair_setup

PAIR_FLAGS=(-R)
PAIR_ADDR=198.18.1.1 # the server's RoCE address: no TCP link
PAIR_MARK='rdma_cm QPs.*: ON'
PAIR_ALL_ROWS=23
PAIR_REFUSED='CM event bl blka [78]$|REJECTED|UNREACHABLE'
srv_perf=("$perf" --vdev=net_af_packet0,iface=roce0 --ip=198.18.1.1 --lcores=0 --no-progress
  --idle-yield=64 --timeout=30)
cli_perf=("$perf" --vdev=net_af_packet0,iface=roce1 --ip=198.18.1.2 --lcores=1 --no-progress
  --idle-yield=64 --timeout=30 --connect-retry=20)

# urnic-perf to urnic-perf: every test, several QPs, all sizes, both directions at once.
peer_pair write_bw perf perf write_bw -q 2 -n 300
peer_pair read_bw perf perf read_bw -q 2 -n 300
peer_pair send_bw_all perf perf send_bw -a -n 5
peer_pair atomic_bw perf perf atomic_bw -n 300
peer_pair write_lat perf perf write_lat -n 300
peer_pair read_lat perf perf read_lat -n 300
peer_pair send_lat perf perf send_lat -n 300
peer_pair atomic_lat perf perf atomic_lat -n 300
peer_pair write_bw_bidir perf perf write_bw -b -n 300
# Stock perftest as the client, urnic-perf serving; and the other way round.
peer_pair pt_write_bw_q4 perf pt write_bw -q 4 -n 300
peer_pair pt_read_lat perf pt read_lat -n 300
peer_pair pt_send_bw perf pt send_bw -n 300
peer_pair pt_atomic_bw perf pt atomic_bw -n 300
peer_pair write_bw_to_pt pt perf write_bw -q 4 -n 300
peer_pair read_bw_to_pt pt perf read_bw -n 300
peer_pair send_lat_to_pt pt perf send_lat -n 300
peer_pair atomic_lat_to_pt pt perf atomic_lat -n 300

# A -R client whose server listens on another port: refused (REJ), exit 3 (no peer) with the
# reason, once its --connect-retry has run out.
timeout 90 ip netns exec "$A" "${srv_perf[@]}" write_bw -R -p 18600 --timeout=15 >"$tmp/port.srv" 2>&1 &
spid=$!
timeout 60 ip netns exec "$B" "${cli_perf[@]/--connect-retry=20/--connect-retry=2}" write_bw -R \
  198.18.1.1 >"$tmp/port.cli" 2>&1
crc=$?
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
if [ $crc -eq 3 ] && grep -q 'the connection (rdma_cm): STATUS_CONNECTION_REFUSED' "$tmp/port.cli"; then
  passed=$((passed + 1))
  echo "ok   -R client, server on another port: $(grep -o 'the connection (rdma_cm).*' "$tmp/port.cli")"
else
  failed=$((failed + 1))
  echo "FAIL -R client, server on another port: exit $crc (want 3, refused)"
  cat "$tmp/port.cli"
fi

# A -R server nobody connects to: exit 3 at its --timeout with the reason.
timeout 60 ip netns exec "$A" "${srv_perf[@]}" write_bw -R --timeout=2 >"$tmp/lone.srv" 2>&1
src=$?
if [ $src -eq 3 ] && grep -q 'no client connected (rdma_cm) to port 18515 within 2 s' "$tmp/lone.srv"; then
  passed=$((passed + 1))
  echo "ok   -R server without a client: exit 3"
else
  failed=$((failed + 1))
  echo "FAIL -R server without a client: exit $src (want 3)"
  cat "$tmp/lone.srv"
fi

echo "perf_rdma_cm: $passed passed, $failed failed"
[ $failed -eq 0 ]
