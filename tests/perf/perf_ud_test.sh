#!/usr/bin/env bash
# ctest label "perf": urnic-perf -c UD (issue 44 item 1) in two network namespaces, against
# urnic-perf and against stock perftest on urnic's libibverbs (urnic-run), in both roles.
#
#   urnicA<pid>: roce0 ==veth== roce1 :urnicB<pid>   RoCEv2 over net_af_packet, 198.18.1.1 / .2
#                oob0  ==veth== oob1                 perftest's TCP exchange, 198.18.0.1/30 - .2
#
# Each pair must exit 0 with its result rows; an urnic-perf side must print "result: PASS" and
# "Connection type : UD"; between two urnic-perfs the last message's data is verified. Then what
# perftest refuses too: a UD test other than SEND (exit 2 with perftest's reason).
#
# Usage: perf_ud_test.sh path/to/urnic-perf path/to/urnic-run. Exits 77 (ctest SKIP_RETURN_CODE)
# without root or network namespaces; the perftest pairs are skipped (and said so) without
# perftest.
set -u
perf=${1:?usage: perf_ud_test.sh path/to/urnic-perf path/to/urnic-run}
urun=${2:?usage: perf_ud_test.sh path/to/urnic-perf path/to/urnic-run}
# shellcheck source=tests/perf/netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
netns_need "$perf"
netns_pair_setup
netns_oob_setup

PAIR_FLAGS=(-c UD)
PAIR_ADDR=198.18.0.1 # the server's TCP address (perftest's exchange)
PAIR_MARK='Connection type : UD'
PAIR_ALL_ROWS=12 # 2 B .. 4096 B, the path MTU
PAIR_REFUSED="Couldn't connect to"

peer_pair send_bw perf perf send_bw -n 1000
peer_pair send_bw_all perf perf send_bw -a -n 20
peer_pair send_bw_q4 perf perf send_bw -q 4 -s 512 -n 1000
peer_pair send_lat perf perf send_lat -n 500
peer_pair send_bw_bidir perf perf send_bw -b -n 500
# 5 % of the client's datagrams dropped by its own fault injector: nothing is sent again, so the
# server stops when the client says it is done and reports what was lost (it waited for ever
# before).
peer_pair send_bw_lossy perf perf send_bw -q 2 -n 1000 --inject=drop=5%
if [ -f "$tmp/send_bw_lossy.srv" ]; then
  lost=$(grep -oE '[0-9]+ of 2000 datagrams lost' "$tmp/send_bw_lossy.srv" | cut -d' ' -f1)
  rows=$(grep -E '^ [0-9]+ +[0-9]+ ' "$tmp/send_bw_lossy.srv" | awk '{ print $2 }')
  if [ -n "$lost" ] && [ "$lost" -gt 0 ] && [ "$((rows + lost))" -eq 2000 ]; then
    passed=$((passed + 1))
    echo "ok   send_bw_lossy: the server received $rows and counted $lost of 2000 lost"
  else
    failed=$((failed + 1))
    echo "FAIL send_bw_lossy: no loss reported, or received ($rows) + lost ($lost) is not 2000"
  fi
fi
peer_pair pt_send_bw perf pt send_bw -n 1000
peer_pair pt_send_lat perf pt send_lat -n 500
# perftest's UD receiver waits for every datagram (one lost, it never ends): 300 of them fit the
# 512 slots of its af_packet ring even if it does not run while they arrive.
peer_pair send_bw_to_pt pt perf send_bw -s 1024 -n 300
peer_pair send_lat_to_pt pt perf send_lat -n 500

# What perftest refuses: UD is SEND only.
"$perf" write_bw -c UD >"$tmp/refuse.out" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q 'UD connection only possible in SEND verb' "$tmp/refuse.out"; then
  passed=$((passed + 1))
  echo "ok   write_bw -c UD refused: $(cat "$tmp/refuse.out")"
else
  failed=$((failed + 1))
  echo "FAIL write_bw -c UD: exit $rc (want 2)"
  cat "$tmp/refuse.out"
fi

echo "perf_ud: $passed passed, $failed failed"
[ $failed -eq 0 ]
