#!/usr/bin/env bash
# ctest perf_switch (issue 15): congestion control between two urnic processes through the
# software switch as its own process (urnic-switch), on the impairment tests' topology
# (impair_lib.sh: urnic-perf in A and B, the switch in H on two veths through net_af_packet).
# The switch's port towards the server is a 1 Gb/s bottleneck with RED/ECN marking
# (Kmin 5 KB, Kmax 200 KB, Pmax 100 %).
#
#   1. DCQCN on (urnic-perf --dcqcn=slow): a 64 KiB write_bw passes, the bottleneck marks CE,
#      the server sends CNPs and the client receives them and cuts its rate, the goodput stays
#      within the line rate and above half of it, and nothing is dropped at the bottleneck.
#   2. Congestion control off: the same run passes, but its frames are Not-ECT, so RED drops them
#      where it would have marked them: no CE mark, no CNP, drops and retransmissions.
#
# Usage: perf_switch_test.sh path/to/urnic-perf path/to/urnic-switch (SWITCH_PCAP=FILE: capture
# the server's frames, CNPs among them, of the DCQCN run). Exits 77 (ctest
# SKIP_RETURN_CODE) without root or network namespaces. Run alone: three processes poll.
set -u
perf=${1:?usage: perf_switch_test.sh path/to/urnic-perf path/to/urnic-switch}
switch=${2:?usage: perf_switch_test.sh path/to/urnic-perf path/to/urnic-switch}
. "$(dirname "$0")/impair_lib.sh"
need_built "$perf" "$switch"
impair_setup
# field FILE REGEX: the number after REGEX on the first line that has it (0 if none).
field() {
  local v
  v=$(grep -oE "$2 [0-9]+" "$1" | head -1 | awk '{print $NF}')
  echo "${v:-0}"
}
# The switch's counters for the port towards the server (port 0: h0, A's side).
bottleneck() {
  grep '^port 0 ' "$tmp/hop.out" | tail -1
}
# run NAME N ARGS...: N 64 KiB WRITEs through the switch.
run() {
  local name=$1 n=$2
  shift 2
  if perf_pair "$name" write_bw -s 65536 -n "$n" --report_gbits "$@"; then
    pass "$(printf '%-12s %s' "$name" "$PAIR_ROW")"
  else
    fail "$name:$PAIR_WHY"
    pair_dump "$name"
  fi
}

SW=(--rate=1000 --kmin=5000 --kmax=200000 --pmax=100 --lcore=0)

# ---- 1. DCQCN on. With SWITCH_PCAP=FILE, what the server sends into the switch (its ACKs and
# CNPs) is captured on h0 (tcpdump sees a veth's received frames).
switch_start "${SW[@]}"
cap_pid=""
if [ -n "${SWITCH_PCAP-}" ] && command -v tcpdump >/dev/null; then
  ip netns exec "$H" tcpdump -Q in -i h0 -w "$SWITCH_PCAP" -c 2000 'udp port 4791' \
    >"$tmp/tcpdump.log" 2>&1 &
  cap_pid=$!
fi
run dcqcn 3000 --cc=on --dcqcn=slow
[ -n "$cap_pid" ] && kill "$cap_pid" 2>/dev/null && wait "$cap_pid" 2>/dev/null
hop_stop
line=$(bottleneck)
echo "     switch: $line"
marks=$(echo "$line" | grep -oE 'CE marked [0-9]+' | awk '{print $3}')
drops=$(($(echo "$line" | grep -oE 'RED drops [0-9]+' | awk '{print $3}') + $(echo "$line" | grep -oE 'tail drops [0-9]+' | awk '{print $3}')))
cnps_sent=$(field "$tmp/dcqcn.srv" 'CNPs sent')
cnps_recv=$(field "$tmp/dcqcn.cli" 'received')
cuts=$(field "$tmp/dcqcn.cli" 'rate cuts')
echo "     server CNPs sent $cnps_sent, client CNPs received $cnps_recv, rate cuts $cuts"
[ "${marks:-0}" -gt 0 ] && pass "dcqcn: the bottleneck marked $marks frames CE" || fail "dcqcn: no CE marks"
[ "$cnps_sent" -gt 0 ] && [ "$cnps_recv" -gt 0 ] && [ "$cuts" -gt 0 ] &&
  pass "dcqcn: CNPs sent and received, the client cut its rate" ||
  fail "dcqcn: CNPs sent $cnps_sent received $cnps_recv cuts $cuts"
[ "$drops" -eq 0 ] && pass "dcqcn: no drop at the bottleneck" || fail "dcqcn: $drops drops at the bottleneck"
awk -v g="${PAIR_GBPS:-0}" 'BEGIN { exit !(g > 0.5 && g <= 1.0) }' &&
  pass "dcqcn: goodput $PAIR_GBPS Gb/s within (0.5, 1.0]" ||
  fail "dcqcn: goodput ${PAIR_GBPS:-?} Gb/s outside (0.5, 1.0]"

# ---- 2. Congestion control off: Not-ECT frames are dropped where they would be marked.
switch_start "${SW[@]}"
# Fewer messages: go-back-N into a queue that drops everything past Kmax crawls.
run off 100 --cc=off
hop_stop
line=$(bottleneck)
echo "     switch: $line"
marks=$(echo "$line" | grep -oE 'CE marked [0-9]+' | awk '{print $3}')
red=$(echo "$line" | grep -oE 'RED drops [0-9]+' | awk '{print $3}')
cnps_sent=$(field "$tmp/off.srv" 'CNPs sent')
retx=$(field "$tmp/off.cli" 'completions, [0-9]+ with errors,')
[ "${marks:-1}" -eq 0 ] && [ "$cnps_sent" -eq 0 ] && pass "off: no CE mark, no CNP" ||
  fail "off: CE marks ${marks:-?} CNPs $cnps_sent"
[ "${red:-0}" -gt 0 ] && pass "off: RED dropped $red Not-ECT frames" || fail "off: no RED drop"

echo "perf_switch: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
