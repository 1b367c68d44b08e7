#!/usr/bin/env bash
# ctest perf_options: urnic-perf's numeric options take what they can represent and refuse the
# rest with exit status 2 and a message, before anything runs (issue 18 item 6): no sign, no
# 64-bit wrap through a K / M suffix. Numbers read as perftest reads them (strtol, base 0:
# issue 41 item 5): "010" is 8 bytes and "0x40" 64 (checked on short loopback runs), "08" is
# refused. A bad --ip, --ipv6 or --mac exits 2 before EAL start-up.
#
# Usage: perf_options_test.sh path/to/urnic-perf
set -u
perf=${1:?usage: perf_options_test.sh path/to/urnic-perf}
fails=0
for v in -18446744073709551615 -1 17592186044417M 18446744073709551616 08 0x ' 5' +5 5x; do
  out=$("$perf" write_bw -s "$v" -n 5 --no-progress 2>&1)
  rc=$?
  if [ $rc -ne 2 ] || ! grep -q "bad value" <<<"$out"; then
    echo "FAIL: -s '$v' gave exit $rc:"
    echo "$out" | tail -5
    fails=$((fails + 1))
  fi
done
for opt in -n -t -q; do
  out=$("$perf" write_bw "$opt" 99999999999999999999 --no-progress 2>&1)
  rc=$?
  if [ $rc -ne 2 ]; then
    echo "FAIL: $opt 99999999999999999999 gave exit $rc"
    fails=$((fails + 1))
  fi
done
for sz in 010:8 0x40:64; do
  out=$(timeout 60 "$perf" write_bw -s "${sz%%:*}" -n 5 --no-progress 2>&1)
  if ! grep -qE "^ ${sz#*:} +5 " <<<"$out"; then
    echo "FAIL: -s ${sz%%:*} did not run ${sz#*:}-byte messages:"
    echo "$out" | tail -8
    fails=$((fails + 1))
  fi
done
for a in --ip=1.2.3 --ip=fe80::1 --ip=10.0.0.1/33 --ipv6=10.0.0.1 --ipv6=fe80::1::2 \
  --mac=02:00:00:00:00:1ff --mac=02:00:00:00:00:01x --mac=02:00:00:00:00; do
  out=$("$perf" write_bw --vdev=net_ring0 "$a" -n 5 --no-progress 2>&1)
  rc=$?
  if [ $rc -ne 2 ] || ! grep -q "bad ${a%%=*} " <<<"$out" || grep -q EAL <<<"$out"; then
    echo "FAIL: $a gave exit $rc (want 2, before EAL start-up): $(tail -2 <<<"$out")"
    fails=$((fails + 1))
  fi
done
# perftest's -u -o -I -T -l (issue 17 item 4): out of range refused; a misspelled test name is
# an error, not a server address.
for args in "-u 32" "-o 0" "-o 129" "-I 257" "-T 256" "-l 0" "-T 96 --dscp=5" "foo_bw" "write_bww"; do
  # shellcheck disable=SC2086
  out=$("$perf" $args -n 5 --no-progress 2>&1)
  rc=$?
  if [ $rc -ne 2 ]; then
    echo "FAIL: '$args' gave exit $rc, not 2: $(tail -2 <<<"$out")"
    fails=$((fails + 1))
  fi
done
out=$("$perf" foo_bw --no-progress 2>&1)
grep -q "unknown test 'foo_bw'" <<<"$out" || {
  echo "FAIL: a misspelled test is not reported as one: $out"
  fails=$((fails + 1))
}
# They take effect: -o in the advertised record, -I and -l on runs whose data is checked.
out=$(timeout 60 "$perf" read_bw -o 4 -n 200 --no-progress 2>&1)
if ! grep -q 'Outstand reads  : 4' <<<"$out" || ! grep -q 'OUT 0x04' <<<"$out" ||
  ! grep -q 'result: PASS' <<<"$out"; then
  echo "FAIL: read_bw -o 4:"
  echo "$out" | grep -E 'Outstand|OUT|result'
  fails=$((fails + 1))
fi
for args in "write_bw -s 64 -I 64" "send_bw -s 200 -I 256" "write_bw -s 4096 -l 8" "write_lat -s 32 -I 32"; do
  # shellcheck disable=SC2086
  out=$(timeout 60 "$perf" $args -n 500 --no-progress 2>&1)
  grep -q 'result: PASS' <<<"$out" || {
    echo "FAIL: $args:"
    echo "$out" | tail -5
    fails=$((fails + 1))
  }
done
# --inject (issue 17 item 3): refused when malformed; CE marks on the client's frames make the
# other side count them and answer with CNPs, which the client receives; a lossy link still
# passes, with retransmissions.
for spec in "drop" "drop=101%" "foo=1" "drop=1.5" "" "ce=-1" "drop=1,,dup=2" "seed=x" \
  "delay_us=0" "delay_us=1000001" "delay=2%,delay_us=x"; do
  out=$("$perf" write_bw -n 5 --no-progress "--inject=$spec" 2>&1)
  rc=$?
  if [ $rc -ne 2 ]; then
    echo "FAIL: --inject='$spec' gave exit $rc, not 2: $(tail -2 <<<"$out")"
    fails=$((fails + 1))
  fi
done
out=$(timeout 60 "$perf" write_bw -s 4096 -n 2000 -v --no-progress --inject=ce=100% 2>&1)
ce=$(grep -oE 'congestion: CE marked [0-9]+' <<<"$out" | awk '{print $4}')
cnps=$(grep -oE 'CNPs sent [0-9]+ received [0-9]+' <<<"$out" | awk '{print $5}')
marked=$(grep -oE 'injected into frames sent: .*CE-marked [0-9]+' <<<"$out" | awk '{print $NF}')
if ! grep -q 'result: PASS' <<<"$out" || [ "${ce:-0}" -lt 2000 ] || [ "${cnps:-0}" -eq 0 ] ||
  [ "${marked:-x}" != "$ce" ]; then
  echo "FAIL: --inject=ce=100%: CE counted ${ce:-none}, injected ${marked:-none}, CNPs received ${cnps:-none}"
  echo "$out" | grep -E 'congestion|injected|result'
  fails=$((fails + 1))
fi
out=$(timeout 60 "$perf" write_bw -s 4096 -n 2000 -v --no-progress --inject=drop=2%,seed=3 2>&1)
rtx=$(grep -oE '[0-9]+ retransmitted packets' <<<"$out" | awk '{print $1}')
if ! grep -q 'result: PASS' <<<"$out" || [ "${rtx:-0}" -eq 0 ]; then
  echo "FAIL: --inject=drop=2%: ${rtx:-no} retransmissions"
  echo "$out" | tail -8
  fails=$((fails + 1))
fi
# A delayed frame is late, not lost: the run passes and the injector counted its delays.
out=$(timeout 60 "$perf" write_bw -s 4096 -n 2000 -v --no-progress \
  --inject=delay=2%,delay_us=300,seed=5 2>&1)
delayed=$(grep -oE 'injected into frames sent: .*delayed [0-9]+' <<<"$out" | awk '{print $NF}')
if ! grep -q 'result: PASS' <<<"$out" || [ "${delayed:-0}" -eq 0 ]; then
  echo "FAIL: --inject=delay=2%: ${delayed:-no} frames delayed"
  echo "$out" | tail -8
  fails=$((fails + 1))
fi
# perftest's -b, -e, --run_infinitely, --cpu_util, -c (issue 17 item 4). Refused: values given
# to flags, combinations perftest refuses, every connection type but RC and UD, and UD for
# anything but SEND (perftest's words).
for args in "-b1" "--events=1" "--cpu_util=1" "write_lat -b" "--report-both" "write_bw -e -D 1" \
  "write_bw -e --rate=1" "write_bw -b --rate=1" "write_lat --run_infinitely" \
  "write_bw --run_infinitely -a" "send_bw -b --run_infinitely" "write_bw --run_infinitely -e" \
  "write_bw --cpu_util" "-c XX" "-c UC" "-c" "-c UD" "read_lat -c UD" "send_bw -c UD -R"; do
  # shellcheck disable=SC2086
  out=$("$perf" $args -n 5 --no-progress 2>&1)
  rc=$?
  if [ $rc -ne 2 ] || [ -z "$out" ]; then
    echo "FAIL: '$args' gave exit $rc, not 2 with a message: $(tail -2 <<<"$out")"
    fails=$((fails + 1))
  fi
done
out=$("$perf" write_bw -c UD --no-progress 2>&1)
grep -q "UD connection only possible in SEND verb" <<<"$out" || {
  echo "FAIL: -c UD does not say why: $out"
  fails=$((fails + 1))
}
help=$("$perf" --help)
for opt in "-b, --bidirectional" "--report-both" "-e, --events" "--run_infinitely" "--cpu_util" \
  "-c, --connection"; do
  grep -qe "$opt" <<<"$help" || {
    echo "FAIL: --help does not document $opt"
    fails=$((fails + 1))
  }
done
# -b: both sides send. The client's row is the sum of the local and remote rows (--report-both),
# each of which ran every iteration; every message of both directions completed and was checked.
for t in write_bw read_bw send_bw atomic_bw; do
  out=$(timeout 60 "$perf" "$t" -b --report-both -c RC -s 4096 -n 400 --no-progress 2>&1)
  want=800
  [ "$t" = send_bw ] && want=1600 # each SEND completes at the sender and the receiver
  rows=$(grep -E '^ [0-9]+ +400 ' <<<"$out" | awk '{print $4}' | tr '\n' ' ')
  sum_ok=$(awk -v r="$rows" 'BEGIN { n = split(r, v, " "); d = v[1] - v[2] - v[3]; print (n == 3 && d < 0.05 && d > -0.05) ? 1 : 0 }')
  if ! grep -q 'result: PASS' <<<"$out" || ! grep -q "urnic: $want completions" <<<"$out" ||
    ! grep -q 'Local results' <<<"$out" || ! grep -q 'Remote results' <<<"$out" || [ "$sum_ok" != 1 ]; then
    echo "FAIL: $t -b: rows (sum, local, remote averages) '$rows', want $want completions:"
    grep -E '^ [0-9]|results|completions|result' <<<"$out"
    fails=$((fails + 1))
  fi
done
# -e: the same runs complete the same messages with the thread asleep between completions.
for args in "send_lat -n 2000" "read_lat -n 2000" "write_bw -s 4096 -n 2000" "send_bw -s 4096 -n 2000"; do
  # shellcheck disable=SC2086
  poll=$(timeout 60 "$perf" $args --no-progress 2>&1 | grep -oE 'urnic: [0-9]+ completions')
  # shellcheck disable=SC2086
  out=$(timeout 60 "$perf" $args -e --no-progress 2>&1)
  slept=$(grep -oE 'events: slept [0-9]+' <<<"$out" | awk '{print $3}')
  if ! grep -q 'result: PASS' <<<"$out" || [ -z "$poll" ] || ! grep -q "$poll" <<<"$out" ||
    [ "${slept:-0}" -eq 0 ]; then
    echo "FAIL: $args -e: ${poll:-no count} without -e, slept ${slept:-never}:"
    grep -E 'completions|events|result|urnic-perf:' <<<"$out"
    fails=$((fails + 1))
  fi
done
# --run_infinitely: a row every -D seconds until SIGINT (or SIGTERM), then the last partial row,
# the summary and exit 0. The rows themselves say when to send the signal.
for sig in INT TERM; do
  log=$(mktemp)
  timeout 60 "$perf" write_bw -s 4096 --run_infinitely -D 0.2 --no-progress >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    [ "$(grep -cE '^ 4096 +[0-9]+ ' "$log")" -ge 3 ] && break
    sleep 0.1
  done
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  rows=$(grep -cE '^ 4096 +[0-9]+ ' "$log")
  if [ $rc -ne 0 ] || [ "$rows" -lt 4 ] || ! grep -q 'result: PASS' "$log"; then
    echo "FAIL: --run_infinitely with SIG$sig: exit $rc, $rows rows:"
    tail -8 "$log"
    fails=$((fails + 1))
  fi
  rm -f "$log"
done
# Many QPs (issue 14 item 4): every one of 1 024 QPs busy, every WRITE completed and each QP's
# last one checked; beyond 65 536 refused; a CQ that -q and -t would make too deep is named.
out=$(timeout 120 "$perf" write_bw -q 1024 -t 4 -s 64 -n 16 --no-progress 2>&1)
if ! grep -q 'Number of qps   : 1024' <<<"$out" || ! grep -q 'urnic: 16384 completions, 0 with errors' <<<"$out" ||
  ! grep -q 'last WRITE of each QP verified' <<<"$out" || ! grep -q 'result: PASS' <<<"$out"; then
  echo "FAIL: write_bw -q 1024:"
  grep -E 'Number of qps|completions|data:|result' <<<"$out"
  fails=$((fails + 1))
fi
out=$("$perf" write_bw -q 65537 --no-progress 2>&1)
rc=$?
if [ $rc -ne 2 ] || ! grep -q "bad value '65537' for -q (1..65536)" <<<"$out"; then
  echo "FAIL: -q 65537 gave exit $rc: $out"
  fails=$((fails + 1))
fi
out=$(timeout 60 "$perf" write_bw -q 65536 -t 4096 --no-progress 2>&1)
rc=$?
if [ $rc -eq 0 ] || ! grep -q "need a CQ of .* lower -q, -t or -r" <<<"$out"; then
  echo "FAIL: -q 65536 -t 4096 gave exit $rc: $(tail -2 <<<"$out")"
  fails=$((fails + 1))
fi
# --engines (issue 14 item 4): each adapter over two engines, -q's QPs dealt over them, every
# completion counted, each QP's last WRITE checked, one endpoint line per engine; 9 refused.
out=$(timeout 120 "$perf" write_bw -q 8 -s 64 -n 2000 --engines=2 --verbose --no-progress 2>&1)
if ! grep -q 'loopback: 2 engines' <<<"$out" || ! grep -q 'urnic: 16000 completions, 0 with errors' <<<"$out" ||
  [ "$(grep -c ' endpoint: ' <<<"$out")" -ne 4 ] || ! grep -q 'last WRITE of each QP verified' <<<"$out" ||
  ! grep -q 'result: PASS' <<<"$out"; then
  echo "FAIL: write_bw -q 8 --engines=2:"
  grep -E 'loopback|completions|endpoint|data:|result' <<<"$out"
  fails=$((fails + 1))
fi
out=$("$perf" write_bw --engines=9 --no-progress 2>&1)
rc=$?
if [ $rc -ne 2 ] || ! grep -q "bad value '9' for --engines (1..8)" <<<"$out"; then
  echo "FAIL: --engines=9 gave exit $rc: $out"
  fails=$((fails + 1))
fi
# --cpu_util: the column, and a percentage in it.
out=$(timeout 60 "$perf" write_bw -s 4096 -D 0.5 --cpu_util --no-progress 2>&1)
cpu=$(grep -E '^ 4096 +[0-9]+ ' <<<"$out" | awk '{print $NF}')
if ! grep -q 'CPU_Util\[%\]' <<<"$out" ||
  ! awk -v c="$cpu" 'BEGIN { exit !(c ~ /^[0-9]+\.[0-9][0-9]$/ && c > 0 && c <= 100) }'; then
  echo "FAIL: --cpu_util: column '${cpu:-none}':"
  grep -E 'CPU|^ [0-9]' <<<"$out"
  fails=$((fails + 1))
fi
# --help and the parser read one table (issue 43 item 4): every option --help documents is one
# the parser knows (given a bad value, or a value it does not take, it says what is wrong with
# it, never "unknown option"), and every option --help shows appears once.
help=$("$perf" --help)
documented=$(grep -oE '^ {2}(-[A-Za-z], )?--?[A-Za-z][A-Za-z0-9_-]*|^ {6}--[A-Za-z][A-Za-z0-9_-]*' <<<"$help" |
  awk '{ print $NF }')
count=0
for opt in $documented; do
  count=$((count + 1))
  [ "$opt" = "--help" ] && continue
  out=$("$perf" "$opt=@bad@" --help 2>&1 </dev/null)
  if grep -q "unknown option" <<<"$out"; then
    echo "FAIL: --help documents $opt, the parser does not know it: $out"
    fails=$((fails + 1))
  fi
done
dups=$(sort <<<"$documented" | uniq -d)
if [ "$count" -lt 50 ] || [ -n "$dups" ]; then
  echo "FAIL: --help lists $count options (want >= 50), repeated: '${dups}'"
  fails=$((fails + 1))
fi
[ $fails -eq 0 ] && echo "perf_options: PASS" || echo "perf_options: $fails failures"
exit $((fails != 0))
