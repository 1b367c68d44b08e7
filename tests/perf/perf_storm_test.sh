#!/usr/bin/env bash
# ctest label "perf": urnic-perf --connect-storm (issue 44 item 3) in two network namespaces,
# against urnic-perf's storm server and against stock cmtime (rdmacm-utils) on urnic's
# librdmacm (urnic-run), in both roles.
#
#   urnicA<pid>: roce0 ==veth== roce1 :urnicB<pid>   RoCEv2 over net_af_packet, 198.18.1.1 / .2
#
# Every count is checked on both sides: connections established, refused by REJ reason, torn
# down, where the peer first refused. Cases: a plain storm; a server at its limit (--storm-limit:
# the client's exit 9, the refusals with reason 28 and the point of the first one); an offered
# rate; nobody listening on the port (reason 8); cmtime serving urnic-perf and urnic-perf serving
# cmtime (whose client waits for a DISCONNECTED event after destroying its QP); cmtime refused
# (REJECTED with status 8, as the kernel's rdma_cm reports it); and the usage errors.
#
# Usage: perf_storm_test.sh path/to/urnic-perf path/to/urnic-run. Exits 77 (ctest
# SKIP_RETURN_CODE) without root or network namespaces; the cmtime cases are skipped (and said
# so) without rdmacm-utils.
set -u
perf=${1:?usage: perf_storm_test.sh path/to/urnic-perf path/to/urnic-run}
urun=${2:?usage: perf_storm_test.sh path/to/urnic-perf path/to/urnic-run}
# shellcheck source=tests/perf/netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
netns_need "$perf"
netns_pair_setup

srv=("$perf" --vdev=net_af_packet0,iface=roce0 --ip=198.18.1.1 --lcores=0 --no-progress
  --idle-yield=64 --timeout=30)
cli=("$perf" --vdev=net_af_packet0,iface=roce1 --ip=198.18.1.2 --lcores=1 --no-progress
  --idle-yield=64 --timeout=30)
cmt_srv=("$urun" --devargs=net_af_packet0,iface=roce0 --ip=198.18.1.1 --lcores=0 stdbuf -oL
  cmtime)
cmt_cli=("$urun" --devargs=net_af_packet0,iface=roce1 --ip=198.18.1.2 --lcores=1 stdbuf -oL
  cmtime)
have_cmtime=1
command -v cmtime >/dev/null && command -v stdbuf >/dev/null && [ -x "$urun" ] || have_cmtime=0

why=""
spid=""
# serve NAME ARGS...: urnic-perf's storm server in A in the background ($spid), output in
# $tmp/NAME.srv; returns once it listens (its "waiting for" line), 1 if it never does.
serve() {
  local name=$1
  shift
  timeout 120 ip netns exec "$A" "${srv[@]}" "$@" >"$tmp/$name.srv" 2>&1 &
  spid=$!
  for _ in $(seq 300); do
    grep -q 'waiting for .* connection requests' "$tmp/$name.srv" && return 0
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1 # polls for the line above; the wait is for that condition
  done
  why="$why server never listened"
  return 1
}
# client NAME ARGS...: urnic-perf's storm client in B; its exit status in $crc.
client() {
  local name=$1
  shift
  timeout 120 ip netns exec "$B" "${cli[@]}" "$@" >"$tmp/$name.cli" 2>&1
  crc=$?
}
# server_exit NAME WANT: waits for the server and checks its exit status.
server_exit() {
  wait "$spid"
  local src=$?
  [ "$src" -eq "$2" ] || why="$why server exit $src (want $2)"
}
# want FILE REGEX: FILE has a line matching REGEX.
want() {
  grep -qE "$2" "$1" || why="$why [${1##*/}: no '$2']"
}
verdict() {
  if [ -z "$why" ]; then
    passed=$((passed + 1))
    printf 'ok   %-22s %s\n' "$1" "$(grep -hE "$2" "$tmp/$1".* | head -1)"
  else
    failed=$((failed + 1))
    echo "FAIL $1:$why"
    for f in "$tmp/$1".*; do
      echo "---- ${f##*/}"
      cat "$f"
    done
  fi
  why=""
}

# A storm of 500 between two urnic-perfs: every connection set up and torn down, on both sides.
if serve plain --connect-storm=500; then
  client plain --connect-storm=500 --json="$tmp/plain.json" 198.18.1.1
  [ $crc -eq 0 ] || why="$why client exit $crc (want 0)"
  server_exit plain 0
  want "$tmp/plain.cli" '^ setup: 500 of 500 established in '
  want "$tmp/plain.cli" '^ refused: 0$'
  want "$tmp/plain.cli" '^ teardown: 500 disconnected in '
  want "$tmp/plain.cli" 'PASS: every connection set up and torn down'
  want "$tmp/plain.srv" '^ requests: 500; accepted: 500; rejected at --storm-limit: 0; failed: 0$'
  want "$tmp/plain.srv" '^ disconnected by the client: 500;'
  want "$tmp/plain.json" '"established": 500,'
  want "$tmp/plain.json" '"torn_down": 500,'
  want "$tmp/plain.json" '"setup_us": \{"count": 500,'
fi
verdict plain '^ setup:'

# A server that holds at most 100: the client is refused 300 times with reason 28 (the
# consumer's REJ), first at request 101 while it held 100, and exits 9.
if serve limit --connect-storm=400 --storm-limit=100; then
  client limit --connect-storm=400 198.18.1.1
  [ $crc -eq 9 ] || why="$why client exit $crc (want 9)"
  server_exit limit 0
  want "$tmp/limit.cli" '^ setup: 100 of 400 established in .*; every request answered in '
  want "$tmp/limit.cli" '^ refused: 300; 300 with reason 28 \(consumer defined\)$'
  want "$tmp/limit.cli" '^ the peer first refused request 101, holding 100 connections of ours$'
  want "$tmp/limit.cli" '^ teardown: 100 disconnected in '
  want "$tmp/limit.srv" '^ requests: 400; accepted: 100; rejected at --storm-limit: 300; failed: 0$'
  want "$tmp/limit.srv" '^ disconnected by the client: 100;'
fi
verdict limit 'first refused'

# An offered rate: 300 requests at 2000 per second take at least 0.149 s to set up.
if serve rate --connect-storm=300; then
  client rate --connect-storm=300 --storm-rate=2000 --json="$tmp/rate.json" 198.18.1.1
  [ $crc -eq 0 ] || why="$why client exit $crc (want 0)"
  server_exit rate 0
  want "$tmp/rate.cli" '300 RC connections .* 2000 requests per second'
  want "$tmp/rate.cli" '^ setup: 300 of 300 established in '
  setup_s=$(grep -oE '"setup_s": [0-9.e-]+' "$tmp/rate.json" | awk '{ print $2 }')
  awk -v s="${setup_s:-0}" 'BEGIN { exit !(s >= 0.149) }' || why="$why setup took ${setup_s:-?} s"
fi
verdict rate '^ setup:'

# Nobody listens on port 18516 (the peer's CM answers REJ 8, invalid service ID): exit 9, every
# refusal counted with its reason; then one connection ends the server on 18515.
if serve nolisten --connect-storm=1; then
  client nolisten -p 18516 --connect-storm=10 198.18.1.1
  [ $crc -eq 9 ] || why="$why client exit $crc (want 9)"
  want "$tmp/nolisten.cli" '^ refused: 10; 10 with reason 8 \(invalid service ID\)$'
  want "$tmp/nolisten.cli" '^ the peer first refused request 1, holding 0 connections of ours$'
  client nolisten_end --connect-storm=1 198.18.1.1
  [ $crc -eq 0 ] || why="$why last client exit $crc (want 0)"
  server_exit nolisten 0
fi
verdict nolisten 'refused'

if [ $have_cmtime -eq 1 ]; then
  # Stock cmtime serving (it accepts every request for ever; killed at the end): the client's
  # first request is retried while cmtime is not listening yet (--connect-retry). A probe that
  # connected and disconnected first would break cmtime's server: it creates every later QP on
  # the CQs of its first connection, destroyed with that connection (so it does on the kernel).
  timeout 120 ip netns exec "$A" "${cmt_srv[@]}" -b 198.18.1.1 -p 18515 >"$tmp/cmt_srv.srv" 2>&1 &
  cpid=$!
  client cmt_srv --connect-storm=300 --connect-retry=20 198.18.1.1
  [ $crc -eq 0 ] || why="$why client exit $crc (want 0)"
  want "$tmp/cmt_srv.cli" '^ setup: 300 of 300 established in '
  want "$tmp/cmt_srv.cli" '^ teardown: 300 disconnected in '
  kill "$cpid" 2>/dev/null
  wait "$cpid" 2>/dev/null
  verdict cmt_srv '^ setup:'

  # Stock cmtime's client storming urnic-perf's server: 300 connected and disconnected (cmtime
  # waits for each DISCONNECTED event after destroying the QP: it hung before 2026-11-30).
  if serve cmt_cli --connect-storm=300; then
    timeout 120 ip netns exec "$B" "${cmt_cli[@]}" -s 198.18.1.1 -p 18515 -c 300 \
      >"$tmp/cmt_cli.cli" 2>&1
    crc=$?
    [ $crc -eq 0 ] || why="$why cmtime exit $crc (want 0)"
    server_exit cmt_cli 0
    want "$tmp/cmt_cli.cli" '^connect +:'
    want "$tmp/cmt_cli.cli" '^disconnect +:'
    want "$tmp/cmt_cli.srv" '^ requests: 300; accepted: 300; rejected at --storm-limit: 0; failed: 0$'
    want "$tmp/cmt_cli.srv" '^ disconnected by the client: 300;'
  fi
  verdict cmt_cli '^connect +:'

  # cmtime refused (nobody on 18516): REJECTED with the REJ's reason, 8, as the kernel reports it.
  if serve cmt_rej --connect-storm=1; then
    timeout 60 ip netns exec "$B" "${cmt_cli[@]}" -s 198.18.1.1 -p 18516 -c 2 \
      >"$tmp/cmt_rej.cli" 2>&1
    crc=$?
    [ $crc -ne 124 ] || why="$why cmtime hung"
    want "$tmp/cmt_rej.cli" 'RDMA_CM_EVENT_REJECTED, error: 8$'
    client cmt_rej_end --connect-storm=1 198.18.1.1
    server_exit cmt_rej 0
  fi
  verdict cmt_rej 'REJECTED'
else
  echo "skip cmtime cases: cmtime (rdmacm-utils), stdbuf or urnic-run missing"
fi

# Usage errors: exit 2 with the reason.
"$perf" --connect-storm=5 >"$tmp/usage.out" 2>&1
rc1=$?
"$perf" --vdev=net_null0 --ip=198.18.1.9 -R --connect-storm=5 198.18.1.1 >>"$tmp/usage.out" 2>&1
rc2=$?
"$perf" --vdev=net_null0 --ip=198.18.1.9 --connect-storm=0 198.18.1.1 >>"$tmp/usage.out" 2>&1
rc3=$?
[ $rc1 -eq 2 ] && [ $rc2 -eq 2 ] && [ $rc3 -eq 2 ] || why="$why exits $rc1 $rc2 $rc3 (want 2 2 2)"
want "$tmp/usage.out" 'connect-storm runs against a real port'
want "$tmp/usage.out" 'connect-storm connects through the IB CM already \(no -R\)'
want "$tmp/usage.out" "bad value '0' for --connect-storm"
verdict usage 'connect-storm runs'

echo "perf_storm: $passed passed, $failed failed"
[ $failed -eq 0 ]
