#!/usr/bin/env bash
# ctest perf_attach: urnic-perf's loopback as a client of urnicd (--daemon=SOCKET: the daemon's
# in-memory pair urnic0 / urnic1 in attach mode, no EAL in urnic-perf). WRITE, READ, SEND and
# FETCH_ADD each must pass (every completion counted, the last message's data checked by
# urnic-perf), and the daemon must hold no client afterwards.
#
# Usage: perf_attach_test.sh path/to/urnicd path/to/urnic-perf path/to/urnicctl
set -u
urnicd=${1:?usage: perf_attach_test.sh urnicd urnic-perf urnicctl}
perf=${2:?}
urnicctl=${3:?}
tmp=$(mktemp -d)
dpid=""
cleanup() {
  [ -z "$dpid" ] || { kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null; }
  rm -rf /var/run/dpdk/urnicd-pa$$ "$tmp"
}
trap cleanup EXIT
"$urnicd" --foreground --socket "$tmp/d.sock" --set "daemon.lock_dir=$tmp/locks" \
  --set "daemon.file_prefix=urnicd-pa$$" --set daemon.memory=nohuge --set daemon.memory_mb=256 \
  >"$tmp/d.log" 2>&1 &
dpid=$!
for _ in $(seq 300); do
  grep -q 'urnicd: ready' "$tmp/d.log" && break
  kill -0 "$dpid" 2>/dev/null || break
  sleep 0.1  # polls the condition above; it is not the synchronisation itself
done
grep -q 'urnicd: ready' "$tmp/d.log" || { echo "FAIL: urnicd did not start"; cat "$tmp/d.log"; exit 1; }

failed=0
for t in "write_bw -s 64" "read_bw -s 4096" "send_bw -s 1024" "atomic_bw" "write_lat -s 8"; do
  n=2000
  [[ $t == *lat* ]] && n=200
  # shellcheck disable=SC2086
  if timeout 120 "$perf" $t -n $n --daemon="$tmp/d.sock" --no-progress >"$tmp/run.log" 2>&1 &&
      grep -q 'result: PASS' "$tmp/run.log"; then
    echo "ok   $t: $(grep -E '^ [0-9]+ +[0-9]+' "$tmp/run.log" | tail -1 | tr -s ' ')"
  else
    failed=$((failed + 1))
    echo "FAIL $t"
    cat "$tmp/run.log"
  fi
done
# Every client gone (urnicctl lists itself).
for _ in $(seq 100); do
  URNIC_DAEMON=$tmp/d.sock "$urnicctl" clients >"$tmp/clients" 2>&1
  grep -E '^ *[0-9]+ ' "$tmp/clients" | grep -qv ' urnicctl ' || break
  sleep 0.1  # polls until the daemon has seen every connection close
done
if grep -E '^ *[0-9]+ ' "$tmp/clients" | grep -qv ' urnicctl '; then
  failed=$((failed + 1))
  echo "FAIL clients left:"
  cat "$tmp/clients"
fi
[ $failed -eq 0 ]
