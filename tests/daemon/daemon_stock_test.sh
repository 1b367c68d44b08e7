#!/usr/bin/env bash
# ctest daemon_stock (issue 38, "the same with Debian's stock ib_write_bw, ibv_rc_pingpong --chk
# ... in attach mode"): Debian's own perftest and ibverbs-utils binaries, never recompiled, on
# urnic's libibverbs.so.1 in attach mode (urnic-run --daemon): one urnicd owns the in-memory pair
# urnic0 / urnic1 (192.0.2.1 / .2); each case runs a server process on urnic1 and a client
# process on urnic0, which find each other over TCP on localhost (the tools' own exchange), their
# RC traffic going through the daemon's engine.
#
# Every case checks both exit codes, the tool's result lines and that no error line was printed;
# ibv_rc_pingpong runs with --chk, which checks every received buffer byte for byte. Afterwards
# the daemon must hold no client and no object (every process's objects were freed), and what
# attach mode does not offer yet (SRQs) must fail with a clear message rather than hang.
#
# Usage: daemon_stock_test.sh path/to/urnicd path/to/urnic-run path/to/urnicctl [CASE-REGEX].
# Exits 77 (ctest SKIP_RETURN_CODE) without the stock tools.
set -u
urnicd=${1:?usage: daemon_stock_test.sh urnicd urnic-run urnicctl [case-regex]}
run_wrapper=${2:?}
urnicctl=${3:?}
only=${4:-.}
SKIP=77
for t in ibv_devinfo ibv_rc_pingpong ib_write_bw ib_read_lat ss; do
  command -v $t >/dev/null || { echo "SKIP: $t is not installed (scripts/install-deps.sh)"; exit $SKIP; }
done

tmp=$(mktemp -d)
sock=$tmp/urnicd.sock
prefix=urnicd-stock$$
daemon_pid=
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  rm -rf "/var/run/dpdk/$prefix"
  [ -n "${KEEP_TMP:-}" ] && echo "logs kept in $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT

"$urnicd" --foreground --socket "$sock" --set "daemon.lock_dir=$tmp/locks" \
  --set "daemon.file_prefix=$prefix" --set daemon.memory=nohuge --set daemon.memory_mb=512 \
  >"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 300); do
  grep -q 'urnicd: ready' "$tmp/daemon.log" && break
  kill -0 "$daemon_pid" 2>/dev/null || break
  sleep 0.1  # polls the condition above; it is not the synchronisation itself
done
grep -q 'urnicd: ready' "$tmp/daemon.log" || { echo "FAIL: urnicd did not start"; cat "$tmp/daemon.log"; exit 1; }

run() { timeout 120 "$run_wrapper" --daemon="$sock" "$@"; }

# Waits (up to 30 s) until the server listens on its TCP port, or has exited.
wait_listen() {
  local port=$1 pid=$2
  for _ in $(seq 300); do
    ss -Hltn "sport = :$port" 2>/dev/null | grep -q LISTEN && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1  # polls the condition above; it is not the synchronisation itself
  done
  return 1
}

passed=0
failed=0
record() {  # NAME WHY(empty = pass) SUMMARY
  if [ -z "$2" ]; then
    passed=$((passed + 1))
    printf 'ok   %-22s %s\n' "$1" "$3"
  else
    failed=$((failed + 1))
    echo "FAIL $1:$2"
    echo "---- server"
    cat "$tmp/$1.srv" 2>/dev/null
    echo "---- client"
    cat "$tmp/$1.cli"
  fi
}

# pair NAME ROWS-REGEX WANT-ROWS PORT CMD ARGS...: the server on urnic1, the client on urnic0;
# both exit 0, the client prints WANT-ROWS lines matching ROWS-REGEX, neither an error line.
port=18600
pair() {
  local name=$1 rows_re=$2 want=$3
  shift 3
  [[ $name =~ $only ]] || return 0
  port=$((port + 1))
  local cmd=$1
  shift
  run "$cmd" -d urnic1 -p "$port" "$@" >"$tmp/$name.srv" 2>&1 &
  local spid=$! why=""
  if wait_listen "$port" "$spid"; then
    run "$cmd" -d urnic0 -p "$port" "$@" localhost >"$tmp/$name.cli" 2>&1 || why="$why client exit $?"
  else
    why=" the server never listened on port $port"
    : >"$tmp/$name.cli"
  fi
  wait "$spid" || why="$why server exit $?"
  local f
  for f in "$tmp/$name.srv" "$tmp/$name.cli"; do
    if grep -qiE 'error|fail|couldn|unable|not supported|timeout' "$f"; then
      why="$why error line in ${f##*.}: $(grep -iE 'error|fail|couldn|unable|not supported|timeout' "$f" | head -1)"
    fi
  done
  local rows
  rows=$(grep -cE "$rows_re" "$tmp/$name.cli")
  [ "$rows" -eq "$want" ] || why="$why $rows result rows (want $want)"
  record "$name" "$why" "$(grep -E "$rows_re" "$tmp/$name.cli" | tail -1 | tr -s ' \t' ' ')"
}

# ---- the devices are the daemon's adapters ------------------------------------------------------
if [[ devinfo =~ $only ]]; then
  run ibv_devinfo >"$tmp/devinfo.cli" 2>&1
  why=""
  for d in urnic0 urnic1; do grep -q "hca_id:.*$d" "$tmp/devinfo.cli" || why="$why no $d"; done
  [ "$(grep -c 'PORT_ACTIVE' "$tmp/devinfo.cli")" -eq 2 ] || why="$why ports not active"
  record devinfo "$why" "$(grep -c hca_id "$tmp/devinfo.cli") devices"
fi

# ---- ibverbs-utils: every buffer checked (--chk), polling and event-driven ---------------------
# (Polling on this 2-core machine, the two spinning clients and the daemon's lcore take turns on
# the scheduler's time slices: a few ms a round trip, so few iterations.)
ping_re='^[0-9]+ iters in'
pair rc_pingpong "$ping_re" 1 ibv_rc_pingpong -g 1 -n 100 -c
pair rc_pingpong_events "$ping_re" 1 ibv_rc_pingpong -g 1 -n 300 -c -e
pair rc_pingpong_64k "$ping_re" 1 ibv_rc_pingpong -g 1 -n 50 -s 65536 -c -e

# ---- perftest --------------------------------------------------------------------------------------
row_re='^ [0-9]+ +[0-9]+ +[0-9.]+'
pair write_bw "$row_re" 1 ib_write_bw -x 1 -F -n 2000
pair read_bw "$row_re" 1 ib_read_bw -x 1 -F -n 1000
pair send_bw "$row_re" 1 ib_send_bw -x 1 -F -n 1000
pair send_bw_events "$row_re" 1 ib_send_bw -x 1 -F -e -n 1000
pair write_bw_q4_inline "$row_re" 1 ib_write_bw -x 1 -F -q 4 -s 32 -I 64 -n 1000
pair read_lat "$row_re" 1 ib_read_lat -x 1 -F -n 100

pair atomic_bw "$row_re" 1 ib_atomic_bw -x 1 -F -n 1000
pair atomic_lat "$row_re" 1 ib_atomic_lat -x 1 -F -n 100

# ---- what attach mode does not offer yet (SRQs): a clear refusal, no hang --------------------------
if [[ srq_refused =~ $only ]]; then
  port=$((port + 1))
  run ibv_srq_pingpong -d urnic1 -p "$port" -g 1 -n 10 >"$tmp/srq_refused.srv" 2>&1
  src=$?
  why=""
  [ $src -ne 0 ] || why=" the server exited 0"
  grep -qiE "couldn't create SRQ" "$tmp/srq_refused.srv" || why="$why no error message"
  record srq_refused "$why" "exit $src: $(grep -iE 'couldn' "$tmp/srq_refused.srv" | head -1)"
fi

# ---- every client gone, every object freed ---------------------------------------------------------
# (urnicctl lists itself.)
others() { grep -E '^ *[0-9]+ ' "$tmp/clients" | grep -v ' urnicctl '; }
for _ in $(seq 100); do
  URNIC_DAEMON=$sock "$urnicctl" clients >"$tmp/clients" 2>&1
  others >/dev/null || break
  sleep 0.1  # polls until the daemon has seen every connection close
done
if others >/dev/null; then
  record clients_gone " clients left: $(cat "$tmp/clients")" ""
else
  record clients_gone "" "no client left"
fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
