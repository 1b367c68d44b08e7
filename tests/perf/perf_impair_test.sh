#!/usr/bin/env bash
# ctest perf_impair (issue 18): faults applied outside the endpoint. Two urnic-perf processes in
# their own network namespaces talk through a forwarding hop (urnic-hop) that impairs the RoCE
# path (see impair_lib.sh for the topology). Every run must end with both sides exiting 0 and
# printing "result: PASS" (every completion successful, the data of the last message checked, the
# FETCH_ADD totals exact), and both sides print every counter (-v).
#
#   1. write_lat whose last ACK is lost: the two sides synchronise before they tear down.
#   2. Failure detection: a refused TCP connection, a TCP peer that accepts and never answers, a
#      client killed during a send_bw run: each reported within seconds, with its exit code.
#   3. 64 QPs through a hop with finite buffers: WRITEs, and READs that overrun it.
#   4. The soak: write / read / send / atomic, 64 B and 64 KiB, through loss of 1 % and 5 %,
#      duplication, corruption, reordering and delay; for 64 KiB WRITE and 64 B SEND the goodput
#      is printed as a ratio of a clean run through the same hop right before. 64 QPs (see 3.)
#      under loss; under the other faults, which each QP meets alone, one QP.
#
# Usage: perf_impair_test.sh path/to/urnic-perf path/to/urnic-hop [--quick]. Exits 77 (ctest
# SKIP_RETURN_CODE) without root or network namespaces. Run alone: three processes poll.
set -u
perf=${1:?usage: perf_impair_test.sh path/to/urnic-perf path/to/urnic-hop}
hop=${2:?usage: perf_impair_test.sh path/to/urnic-perf path/to/urnic-hop}
quick=${3:-}
. "$(dirname "$0")/impair_lib.sh"
need_built "$perf" "$hop"
impair_setup

# check NAME TEST ARGS...: one run through the hop as it is configured now.
check() {
  local name=$1
  if perf_pair "$@"; then
    pass "$(printf '%-28s %s' "$name" "$PAIR_ROW")"
  else
    fail "$name:$PAIR_WHY"
    pair_dump "$name"
  fi
}

# ---- 1. write_lat with its ACKs lost: every second ACK dropped, so that (depending on where the
# count falls) the last one of a side is lost. Before the end-of-test sync, the side that
# finished first left and the other's last WRITE failed with "retry counter exceeded".
hop_start --opcode=17 --drop-every=2
for i in 1 2 3; do
  check "write_lat_last_ack_lost_$i" write_lat -n 30
done

# ---- 2. Failure detection. No hop needed; each must be quick and say what happened.
hop_start
# elapsed CMD...: runs CMD, sets RC and SECS.
elapsed() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$tmp/fd.out" 2>&1
  RC=$?
  t1=$(date +%s.%N)
  SECS=$(echo "$t1 - $t0" | bc)
}
expect_exit() {  # NAME WANT_RC MAX_SECONDS MESSAGE_REGEX
  if [ "$RC" -eq "$2" ] && [ "$(echo "$SECS < $3" | bc)" -eq 1 ] && grep -qE "$4" "$tmp/fd.out"; then
    pass "$(printf '%-28s exit %d after %.1f s' "$1" "$RC" "$SECS")"
  else
    fail "$1: exit $RC after $SECS s (want exit $2 within $3 s, output matching '$4')"
    cat "$tmp/fd.out"
  fi
}
client=(ip netns exec "$B" "$perf" --vdev=net_af_packet0,iface=roce1 --ip=198.18.1.2 --lcores=1
  --no-progress --idle-yield=64)
elapsed timeout 60 "${client[@]}" write_bw -n 10 198.18.0.1
expect_exit connection_refused 3 5 "couldn't connect to 198.18.0.1:18515: Connection refused"

# A TCP peer that accepts and then says nothing.
ip netns exec "$A" python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("198.18.0.1", 18515)); s.listen(1); print("listening", flush=True)
c, _ = s.accept(); time.sleep(60)' >"$tmp/silent.out" 2>&1 &
silent=$!
for _ in $(seq 100); do grep -q listening "$tmp/silent.out" && break; sleep 0.05; done
elapsed timeout 60 "${client[@]}" --timeout=3 write_bw -n 10 198.18.0.1
kill "$silent" 2>/dev/null
wait "$silent" 2>/dev/null
expect_exit silent_tcp_peer 4 10 "did not answer within 3 s"

# A send_bw client killed in the middle of its run: the server notices at once.
ip netns exec "$A" "$perf" send_bw --vdev=net_af_packet0,iface=roce0 --ip=198.18.1.1 --lcores=0 \
  --no-progress --idle-yield=64 -n 50000000 >"$tmp/srv_kill.out" 2>&1 &
srv=$!
"${client[@]}" --connect-retry=30 send_bw -n 50000000 198.18.0.1 >"$tmp/cli_kill.out" 2>&1 &
cli=$!
for _ in $(seq 600); do grep -q '#bytes' "$tmp/cli_kill.out" && break; sleep 0.05; done
t0=$(date +%s.%N)
kill -9 "$cli" 2>/dev/null
wait "$cli" 2>/dev/null
timeout 20 tail --pid="$srv" -f /dev/null
wait "$srv"
RC=$?
SECS=$(echo "$(date +%s.%N) - $t0" | bc)
cp "$tmp/srv_kill.out" "$tmp/fd.out"
expect_exit send_bw_client_killed 5 5 "the peer closed its TCP connection"

# ---- 3. Many QPs through a hop whose buffers overflow (issue 18 item 2): 64 QPs of 64 KiB READs
# through 1 MiB hop buffers lose about a third of their responses in overruns, most of them
# tails that nothing behind them reveals. With plain go-back-N (--retransmit=gbn) only the local
# ACK timer found those: about 10 timeouts per QP, every QP that lost in one overrun resending its
# whole window at the same moment, and 10 of 12 runs ended with "transport retry counter
# exceeded" when one QP lost its resent responses eight times in a row. The default (adaptive)
# probes after two round trips without progress (requester.cc): every run must pass, and the probe,
# not the timer, must be what finds the tails: at most one timeout per QP. Without the probe the
# adaptive backoff alone passed 4 of 6 runs with about 800 timeouts each, and no run came near 64.
# With it, how much the hop overruns depends on how much CPU the three polling processes leave
# it on 2 cores: on a quiet host most runs see 0-30 timeouts, but in some periods half of the
# runs (of this build and of the one before it alike: 22 runs, 2026-11-27) saw 130-2000, the QPs
# having fallen into the timer's backoff together. So up to four runs: every one must pass, and
# one of them must stay at 64 timeouts or fewer (each run's count is printed). IMPAIR_KNOWN_FAILING=1
# also runs plain go-back-N, which still fails most runs.
hop_start --rcvbuf=1048576
check write_bw_q64_64k_finite_hop write_bw -q 64 -s 65536 -n 640 --report_gbits
probe_ok=0
for i in 1 2 3 4; do
  check "read_bw_q64_64k_finite_hop_$i" read_bw -q 64 -s 65536 -n 640 --report_gbits
  t=$(grep -oE 'timeouts [0-9]+' "$tmp/read_bw_q64_64k_finite_hop_$i.cli" | awk '{s += $2} END {print s + 0}')
  echo "     read_bw_q64_64k_finite_hop_$i: $t local ACK timeouts on the client"
  if [ "$t" -le 64 ]; then
    probe_ok=1
    break
  fi
done
if [ "$probe_ok" = 1 ]; then
  pass "read_bw_q64_64k_finite_hop: a run with at most 64 local ACK timeouts (the probe finds lost tails)"
else
  fail "read_bw_q64_64k_finite_hop: every run had more than 64 local ACK timeouts (the probe does not find lost tails)"
fi
if [ "${IMPAIR_KNOWN_FAILING:-0}" = 1 ]; then
  check read_bw_q64_64k_finite_hop_gbn read_bw -q 64 -s 65536 -n 640 --report_gbits --retransmit=gbn
fi
hop_stop
grep hop "$tmp/hop.out"

# ---- 4. Kernel drops on the sending veth (issue 18 item 3). The client's frames meet its veth's
# qdisc (af_packet with qdisc_bypass=0), which refuses a random share of them. The kernel then
# stops sending from the socket's TX ring at the refused frame, which stays in the ring with the
# frames behind it until the next kick: before urnic re-kicked the ring from idle steps
# (dataplane/tx_kick.h), every refusal parked the rest of its burst until the requester's next
# local ACK timeout, so at 5 % a 1 000-message 64 KiB write_bw did not finish in 100 s and a 64 B
# send_bw ran out of retries (URNIC_AF_PACKET_KICK=0 still shows it: 200 of 1 000 WRITEs, then
# "retry counter exceeded"). All must now pass, and the client must show the extra kicks; the
# goodput at 1 % is printed against the same 1 % lost in the hop.
kdrop_runs() {
  local pct=$1
  VDEV_OPTS=,qdisc_bypass=0
  check "kdrop${pct}_write_64k" write_bw -s 65536 -n 1000 --report_gbits
  kdrop_w=$PAIR_GBPS
  local kicks
  kicks=$(grep -oE 'tx kicks [0-9]+' "$tmp/kdrop${pct}_write_64k.cli" | awk '{s += $3} END {print s + 0}')
  if [ "$kicks" -gt 0 ]; then
    pass "kdrop${pct}_write_64k: $kicks extra TX kicks, $(kdrop_count "$B" roce1) frames dropped by the kernel"
  else
    fail "kdrop${pct}_write_64k: no extra TX kicks counted (dataplane/tx_kick.h not engaged)"
  fi
  check "kdrop${pct}_send_64b" send_bw -s 64 -n 5000 --report_gbits
  check "kdrop${pct}_read_64k" read_bw -s 65536 -n 300 --report_gbits
  unset VDEV_OPTS
}
if kdrop_start "$B" roce1 5 2>"$tmp/kdrop.err"; then
  hop_start --rcvbuf=33554432
  kdrop_runs 5
  kdrop_start "$B" roce1 1
  kdrop_runs 1
  kdrop1_w=$kdrop_w
  kdrop_stop "$B" roce1
  hop_start --loss=1 --seed=7 --rcvbuf=33554432
  perf_pair hop1_write_64k write_bw -s 65536 -n 1000 --report_gbits && hop1_w=$PAIR_GBPS || hop1_w=""
  hop_stop
  if [ -n "$kdrop1_w" ] && [ -n "$hop1_w" ]; then
    echo "1 % loss, 64 KiB WRITE: kernel drop $kdrop1_w Gb/s, hop drop $hop1_w Gb/s, ratio $(echo "$kdrop1_w / $hop1_w" | bc -l | cut -c1-5)"
  fi
else
  echo "SKIP kernel drops: tc cannot set up the drop filter here: $(cat "$tmp/kdrop.err")"
fi

# ---- 5. The soak.
runs=(
  "write_64k_q1:write_bw -s 65536 -n 300 --report_gbits"
  "write_64b_q1:write_bw -s 64 -n 5000 --report_gbits"
  "read_64k_q1:read_bw -s 65536 -n 300 --report_gbits"
  "read_64b_q1:read_bw -s 64 -n 3000 --report_gbits"
  "send_64b_q1:send_bw -s 64 -n 5000 --report_gbits"
  "send_64k_q1:send_bw -s 65536 -n 300 --report_gbits"
  "atomic_q1:atomic_bw -n 3000 --report_gbits"
)
# 64 QPs through the hop's bottleneck (see 3.), under the loss faults only (below).
runs+=(
  "write_64b_q64:write_bw -s 64 -q 64 -n 6400 --report_gbits"
  "read_64k_q64:read_bw -s 65536 -q 64 -n 640 --report_gbits"
  "send_64k_q64:send_bw -s 65536 -q 64 -n 640 --report_gbits"
  "atomic_q64:atomic_bw -q 64 -n 6400 --report_gbits"
)
faults=("loss1:--loss=1" "loss5:--loss=5" "dup:--dup=2" "corrupt:--corrupt=1" "reorder:--reorder=2"
  "delay:--delay=300")
[ "$quick" = --quick ] && faults=("loss1:--loss=1")
ratios=""
# 32 MiB socket buffers in the hop: the soak is about the impairments, not about overrunning it.
big=--rcvbuf=33554432
for f in "${faults[@]}"; do
  fname=${f%%:*}
  # A clean run right before, for the goodput ratios.
  hop_start $big
  perf_pair "clean_w_$fname" write_bw -s 65536 -n 300 --report_gbits && clean_w=$PAIR_GBPS || clean_w=""
  perf_pair "clean_s_$fname" send_bw -s 64 -n 5000 --report_gbits && clean_s=$PAIR_MPPS || clean_s=""
  hop_start ${f#*:} --seed=7 $big
  for r in "${runs[@]}"; do
    rname=${r%%:*}
    # 64 QPs under loss (1 % and 5 %: where many QPs recover at once); the other faults, which
    # each QP meets on its own, with one (CI time: 16 runs of about 3.5 s each).
    case $rname:$fname in *_q64:loss*) ;; *_q64:*) continue ;; esac
    # shellcheck disable=SC2086
    check "${fname}_$rname" ${r#*:}
    case $rname in
      write_64k_q1) [ -n "$clean_w" ] && [ -n "$PAIR_GBPS" ] &&
        ratios="$ratios$(printf '%-8s 64 KiB WRITE %8s / %8s Gb/s = %.3f\n' "$fname" "$PAIR_GBPS" "$clean_w" "$(echo "$PAIR_GBPS / $clean_w" | bc -l)")\n" ;;
      send_64b_q1) [ -n "$clean_s" ] && [ -n "$PAIR_MPPS" ] &&
        ratios="$ratios$(printf '%-8s 64 B SEND    %8s / %8s Mpps = %.3f\n' "$fname" "$PAIR_MPPS" "$clean_s" "$(echo "$PAIR_MPPS / $clean_s" | bc -l)")\n" ;;
    esac
  done
  hop_stop
  grep hop "$tmp/hop.out"
done
echo "goodput against a clean run through the hop right before:"
printf "%b" "$ratios"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
