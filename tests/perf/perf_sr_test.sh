#!/usr/bin/env bash
# ctest perf_sr (issue 15): selective repeat between two urnic-perf processes (--sr=on on both
# sides) through a forwarding hop (urnic-hop, impair_lib.sh) that loses, reorders, duplicates and
# corrupts frames outside the endpoints. Every run must end with both sides exiting 0 and printing
# "result: PASS" (every completion successful, the data checked, the FETCH_ADD totals exact), and
# the client must have resent packets one by one (selective) where frames were lost. Then 64 KiB
# WRITE goodput at 1 % and 5 % loss, selective repeat against go-back-N, each against a clean run
# through the same hop right before.
#
# Usage: perf_sr_test.sh path/to/urnic-perf path/to/urnic-hop. Exits 77 (ctest SKIP_RETURN_CODE)
# without root or network namespaces. Run alone: three processes poll.
set -u
perf=${1:?usage: perf_sr_test.sh path/to/urnic-perf path/to/urnic-hop}
hop=${2:?usage: perf_sr_test.sh path/to/urnic-perf path/to/urnic-hop}
. "$(dirname "$0")/impair_lib.sh"
need_built "$perf" "$hop"
impair_setup

# selective FILE: the "selective repeat:" counters line of a run's output, as "SEL BULK HELD".
selective() {
  grep -oE 'selective repeat: resent [0-9]+ packets one by one, [0-9]+ in go-back-N passes; held [0-9]+' \
    "$1" | awk '{print $4, $9, $14}' | tail -1
}

# check NAME LOSSY TEST ARGS...: one run with --sr=on; LOSSY=1: some packet must have been resent
# selectively by one side, or held early by one side (reordering alone loses nothing).
check() {
  local name=$1 lossy=$2
  shift 2
  if perf_pair "$name" "$@" --sr=on; then
    local c s
    c=$(selective "$tmp/$name.cli")
    s=$(selective "$tmp/$name.srv")
    if [ "$lossy" = 1 ] && [ "$(echo "$c $s" | awk '{print $1 + $3 + $4 + $6}')" -eq 0 ]; then
      fail "$name: passed, but no side resent or held anything selectively (client $c, server $s)"
    else
      pass "$(printf '%-24s %s  [client resent sel/bulk, held: %s; server: %s]' "$name" "$PAIR_ROW" "$c" "$s")"
    fi
  else
    fail "$name:$PAIR_WHY"
    pair_dump "$name"
  fi
}

runs=(
  "write_64k:write_bw -s 65536 -n 300 --report_gbits"
  "send_64b:send_bw -s 64 -n 5000 --report_gbits"
  "send_64k:send_bw -s 65536 -n 200 --report_gbits"
  "read_64k:read_bw -s 65536 -n 200 --report_gbits"
  "atomic:atomic_bw -n 3000 --report_gbits"
  "write_64k_q8:write_bw -s 65536 -q 8 -n 400 --report_gbits"
)
faults=("loss1:1:--loss=1" "loss5:1:--loss=5" "loss20:1:--loss=20" "reorder:1:--reorder=5"
  "dup:0:--dup=5" "corrupt:1:--corrupt=2" "mix:1:--loss=5 --reorder=3 --dup=3 --corrupt=1")
big=--rcvbuf=33554432
for f in "${faults[@]}"; do
  fname=${f%%:*}
  rest=${f#*:}
  lossy=${rest%%:*}
  # shellcheck disable=SC2086
  hop_start ${rest#*:} --seed=11 $big
  for r in "${runs[@]}"; do
    # 20 % loss: the 64 KiB runs only (a 64 B SEND at 20 % needs minutes of probes for 5 000).
    [ "$fname" = loss20 ] && case ${r%%:*} in send_64b | atomic) continue ;; esac
    # shellcheck disable=SC2086
    check "${fname}_${r%%:*}" "$lossy" ${r#*:}
  done
  hop_stop
  grep hop "$tmp/hop.out"
done

# Negotiation (issue 41 item 3): with --sr=auto both urnic-perfs offer selective repeat in
# perftest's version exchange and use it (the server holds early requests under loss); --sr=off
# on one side is go-back-N on both (nothing held); --sr=on against that side exits 2 saying why.
hop_start --loss=5 --seed=11 $big
held_of() { selective "$1" | awk '{print $3}'; }
if perf_pair sr_auto write_bw -s 65536 -n 100 --report_gbits --sr=auto && [ "$(held_of "$tmp/sr_auto.srv")" -gt 0 ]; then
  pass "sr_auto: selective repeat agreed (server held $(held_of "$tmp/sr_auto.srv") early requests)"
else
  fail "sr_auto:$PAIR_WHY held $(held_of "$tmp/sr_auto.srv")"
  pair_dump sr_auto
fi
if SRV_ARGS=--sr=off perf_pair sr_off_server write_bw -s 65536 -n 100 --report_gbits --sr=auto &&
  [ "$(held_of "$tmp/sr_off_server.srv")" = 0 ] && [ "$(held_of "$tmp/sr_off_server.cli")" = 0 ]; then
  pass "sr_off_server: go-back-N on both sides"
else
  fail "sr_off_server:$PAIR_WHY held $(held_of "$tmp/sr_off_server.srv")"
  pair_dump sr_off_server
fi
SRV_ARGS=--sr=off CLI_ARGS=--sr=on perf_pair sr_on_refused write_bw -s 65536 -n 100
if grep -q "does not offer selective repeat" "$tmp/sr_on_refused.cli" &&
  [[ $PAIR_WHY == *"client exit 2"* ]]; then
  pass "sr_on_refused: --sr=on against --sr=off exits 2"
else
  fail "sr_on_refused: $PAIR_WHY"
  pair_dump sr_on_refused
fi
hop_stop
# Many QPs: each keeps at most 256 KiB in flight with selective repeat too (base_window_lc). With
# 256 PSNs of 4 KiB each, 64 QPs overflowed the sockets with no loss injected and crawled.
hop_start $big
check clean_send_64k_q64 0 send_bw -s 65536 -q 64 -n 256 --report_gbits
hop_stop

# Goodput of 64 KiB WRITE, selective repeat against go-back-N, each as a ratio of a clean run
# through the same hop right before it.
table=""
for pct in 1 5; do
  for mode in on off; do
    hop_start $big
    perf_pair "clean_${pct}_$mode" write_bw -s 65536 -n 600 --report_gbits --sr=$mode && clean=$PAIR_GBPS || clean=""
    hop_start --loss=$pct --seed=11 $big
    if perf_pair "lossy_${pct}_$mode" write_bw -s 65536 -n 600 --report_gbits --sr=$mode; then
      pass "lossy_${pct}_sr_$mode $PAIR_ROW"
      [ -n "$clean" ] && table="$table$(printf '%d %% loss, 64 KiB WRITE, selective repeat %-3s %8s / %8s Gb/s = %.3f' \
        "$pct" "$mode" "$PAIR_GBPS" "$clean" "$(echo "$PAIR_GBPS / $clean" | bc -l)")\n"
    else
      fail "lossy_${pct}_sr_$mode:$PAIR_WHY"
      pair_dump "lossy_${pct}_$mode"
    fi
    hop_stop
  done
done
echo "goodput against a clean run through the hop right before (same mode):"
printf "%b" "$table"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
