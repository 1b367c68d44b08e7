#!/usr/bin/env bash
# ctest label "perf": urnic-perf as server and client in two network namespaces.
#
#   urnicA<pid>: roce0 ==veth== roce1 :urnicB<pid>   RoCEv2, net_af_packet on each end, MTU 4200,
#                                                    no kernel addresses (198.18.1.1 / .2 are
#                                                    urnic's own, answered by its ARP)
#                oob0  ==veth== oob1                 perftest's TCP exchange, 198.18.0.1/30 - .2
#
# (198.18.0.0/15 is the benchmarking range of RFC 2544.) Every test type runs briefly, plus a few
# variants (several QPs, all sizes, a duration run); each pair must exit 0, print its result
# rows and "result: PASS" (completions all successful, last message's data verified).
#
# Usage: perf_veth_test.sh path/to/urnic-perf. Exits 77 (ctest SKIP_RETURN_CODE) without root
# or without network namespaces / veth.
set -u
perf=${1:?usage: perf_veth_test.sh path/to/urnic-perf}
# shellcheck source=tests/perf/netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
netns_need "$perf"
netns_pair_setup
netns_oob_setup

passed=0
failed=0
# run NAME TEST ARGS...: server in A (lcore 0), client in B (lcore 1); each drives its own engine.
run() {
  local name=$1 t=$2
  shift 2
  local common=(--no-progress --idle-yield=64 "$@")
  timeout 90 ip netns exec "$A" "$perf" "$t" --vdev=net_af_packet0,iface=roce0 --ip=198.18.1.1 \
    --lcores=0 "${common[@]}" >"$tmp/$name.srv" 2>&1 &
  local spid=$!
  timeout 90 ip netns exec "$B" "$perf" "$t" --vdev=net_af_packet0,iface=roce1 --ip=198.18.1.2 \
    --lcores=1 --connect-retry=30 "${common[@]}" 198.18.0.1 >"$tmp/$name.cli" 2>&1
  local crc=$?
  wait "$spid"
  local src=$?
  # Result rows: a size, then the iteration count (perftest's formats).
  local rows
  rows=$(grep -cE '^ [0-9]+ +[0-9]+ ' "$tmp/$name.cli")
  local want_rows=1
  case " $* " in *" -a "*) want_rows=23 ;; esac
  local why=""
  [ $crc -eq 0 ] || why="client exit $crc"
  [ $src -eq 0 ] || why="$why server exit $src"
  grep -q '#bytes' "$tmp/$name.cli" || why="$why no table header"
  [ "$rows" -eq "$want_rows" ] || why="$why $rows result rows (want $want_rows)"
  grep -q 'result: PASS' "$tmp/$name.cli" || why="$why client did not PASS"
  grep -q 'result: PASS' "$tmp/$name.srv" || why="$why server did not PASS"
  if [ -z "$why" ]; then
    passed=$((passed + 1))
    printf 'ok   %-22s %s\n' "$name" "$(grep -E '^ [0-9]+ +[0-9]+ ' "$tmp/$name.cli" | tail -1)"
  else
    failed=$((failed + 1))
    echo "FAIL $name:$why"
    echo "---- server ($t ${common[*]})"
    cat "$tmp/$name.srv"
    echo "---- client"
    cat "$tmp/$name.cli"
  fi
}

run write_bw write_bw -n 200
run read_bw read_bw -n 200
run send_bw send_bw -n 200
run atomic_bw atomic_bw -n 200
run write_lat write_lat -n 200
run read_lat read_lat -n 200
run send_lat send_lat -n 200
run atomic_lat atomic_lat -n 200
run write_bw_q4_s100 write_bw -q 4 -s 100 -n 500
run send_bw_all_sizes send_bw -a -n 5
run read_bw_q2_duration read_bw -q 2 -t 16 -D 1
run write_lat_duration write_lat -D 1 -s 64
# Two engines a side (issue 14 items 1, 2): two af_packet queue pairs, which the kernel's fanout
# hash fills by flow (our QPs pick their own UDP source ports), so frames reach the engine that
# does not own their QP and are handed over, between the processes' own engines. Each side's
# endpoint lines count them.
run write_bw_engines2 write_bw -q 8 -s 1024 -n 500 --engines=2 --verbose
handoffs=$(cat "$tmp/write_bw_engines2.srv" "$tmp/write_bw_engines2.cli" 2>/dev/null |
  awk '/ endpoint: / { for (i = 1; i < NF; i++) if ($i == "out") n += $(i + 1) } END { print n + 0 }')
if [ "$handoffs" -gt 0 ]; then
  echo "ok   two engines a side: $handoffs frames handed to the engine owning their QP"
  passed=$((passed + 1))
else
  echo "FAIL two engines a side: no frame was handed over (af_packet's fanout spread nothing?)"
  grep ' endpoint: ' "$tmp/write_bw_engines2.srv" "$tmp/write_bw_engines2.cli"
  failed=$((failed + 1))
fi

# -b (issue 17 item 4): both sides send, so the server completes its own messages too, and both
# print the same summed row.
bidir() {
  local name=$1 want=$2
  shift 2
  run "$name" "$@"
  local srow crow
  srow=$(grep -E '^ [0-9]+ +[0-9]+ ' "$tmp/$name.srv")
  crow=$(grep -E '^ [0-9]+ +[0-9]+ ' "$tmp/$name.cli")
  if ! grep -q "urnic: $want completions" "$tmp/$name.srv" || [ "$srow" != "$crow" ]; then
    failed=$((failed + 1))
    echo "FAIL $name: the server did not send ($(grep completions "$tmp/$name.srv")) or its row"
    echo "  '$srow' is not the client's '$crow'"
  fi
}
bidir write_bw_bidir 200 write_bw -b -n 200
bidir send_bw_bidir 400 send_bw -b -n 200

# A client without -b against a server with it: both refuse (exit 2) instead of hanging.
timeout 60 ip netns exec "$A" "$perf" write_bw -b -n 50 --vdev=net_af_packet0,iface=roce0 \
  --ip=198.18.1.1 --lcores=0 --no-progress --idle-yield=64 >"$tmp/mismatch.srv" 2>&1 &
spid=$!
timeout 60 ip netns exec "$B" "$perf" write_bw -n 50 --vdev=net_af_packet0,iface=roce1 \
  --ip=198.18.1.2 --lcores=1 --connect-retry=30 --no-progress --idle-yield=64 198.18.0.1 \
  >"$tmp/mismatch.cli" 2>&1
crc=$?
wait "$spid"
src=$?
if [ $crc -eq 2 ] && [ $src -eq 2 ] && grep -q 'symmetric' "$tmp/mismatch.cli"; then
  passed=$((passed + 1))
  echo "ok   -b mismatch refused   $(head -1 "$tmp/mismatch.cli")"
else
  failed=$((failed + 1))
  echo "FAIL -b mismatch: client exit $crc, server exit $src"
  cat "$tmp/mismatch.cli" "$tmp/mismatch.srv"
fi

# --run_infinitely: the client prints a row every -D seconds; SIGINT ends it with a last row and
# the usual report exchange, and both sides exit 0. The client's rows say when to interrupt.
timeout 90 ip netns exec "$A" "$perf" write_bw --run_infinitely -D 0.3 \
  --vdev=net_af_packet0,iface=roce0 --ip=198.18.1.1 --lcores=0 --no-progress --idle-yield=64 \
  >"$tmp/inf.srv" 2>&1 &
spid=$!
ip netns exec "$B" "$perf" write_bw --run_infinitely -D 0.3 --vdev=net_af_packet0,iface=roce1 \
  --ip=198.18.1.2 --lcores=1 --connect-retry=30 --no-progress --idle-yield=64 198.18.0.1 \
  >"$tmp/inf.cli" 2>&1 &
cpid=$!
for _ in $(seq 600); do
  [ "$(grep -cE '^ [0-9]+ +[0-9]+ ' "$tmp/inf.cli")" -ge 3 ] && break
  kill -0 "$cpid" 2>/dev/null || break
  sleep 0.1
done
kill -INT "$cpid"
wait "$cpid"
crc=$?
wait "$spid"
src=$?
rows=$(grep -cE '^ [0-9]+ +[0-9]+ ' "$tmp/inf.cli")
if [ $crc -eq 0 ] && [ $src -eq 0 ] && [ "$rows" -ge 4 ] && grep -q 'result: PASS' "$tmp/inf.srv"; then
  passed=$((passed + 1))
  echo "ok   run_infinitely        $rows rows, SIGINT, both exit 0"
else
  failed=$((failed + 1))
  echo "FAIL run_infinitely: client exit $crc ($rows rows), server exit $src"
  cat "$tmp/inf.cli" "$tmp/inf.srv"
fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
