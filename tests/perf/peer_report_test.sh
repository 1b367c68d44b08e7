#!/usr/bin/env bash
# ctest peer_report (issue 44 item 5): bench/peer-report runs a plan of five steps against a peer
# in another namespace (urnic-perf servers started on it per step through --peer-exec): write_bw,
# read_lat, send_bw -c UD, a connection storm and two urnic-conform scenarios. One page and one
# JSON must hold every step: the summary rows with their exit statuses and headlines, the
# bandwidth and latency rows, the storm's counts, the scenarios' verdicts, and the plots drawn by
# the tools beside the page. Then a plan whose step finds no peer: exit 1, that step's failure
# (and the end of its output) on the page, the other step still reported. Bad plans are refused.
#
# Usage: peer_report_test.sh path/to/urnic-perf path/to/urnic-conform. Exits 77 (ctest
# SKIP_RETURN_CODE) without root or network namespaces.
set -u
perf=${1:?usage: peer_report_test.sh path/to/urnic-perf path/to/urnic-conform}
conform=${2:?usage}
report=$(cd "$(dirname "$0")/../.." && pwd)/bench/peer-report
. "$(dirname "$0")/netns_lib.sh"
netns_need "$perf" "$conform"
netns_pair_setup
netns_oob_setup

srv="--vdev=net_af_packet0,iface=roce0 --ip=198.18.1.1 --lcores=0 --no-progress --idle-yield=64"
cli="--lcores=1 --idle-yield=64 --connect-retry=20"
cat >"$tmp/plan" <<PLAN
# a comment, and an empty line

perf write_bw -s 4096 -n 2000 $cli @ $perf write_bw -s 4096 -n 2000 $srv --timeout=30
perf read_lat -s 64 -n 500 $cli @ $perf read_lat -s 64 -n 500 $srv --timeout=30
perf send_bw -c UD -s 1024 -n 1000 $cli @ $perf send_bw -c UD -s 1024 -n 1000 $srv --timeout=30
storm 200 $cli @ $perf --connect-storm=200 $srv --timeout=30
conform --only=write_acked,cc_np_cnp --lcores=1 --connect-retry=20 @ for i in 1 2; do $perf write_bw $srv --timeout=20; done
PLAN
# urnic-perf and urnic-conform run in $B (the report runs there), the peer's side in $A.
run() {
  timeout 400 ip netns exec "$B" "$report" --vdev=net_af_packet0,iface=roce1 --ip=198.18.1.2 --perf="$perf" \
    --conform="$conform" --peer-exec="ip netns exec $A sh -c" --roce-peer=198.18.1.1 "$@"
}
run --out="$tmp/r/peer.md" "$tmp/plan" 198.18.0.1 >"$tmp/run.out" 2>&1
rc=$?
cat "$tmp/run.out"
if [ $rc -eq 0 ] && python3 - "$tmp/r/peer.md" "$tmp/r/peer.json" <<'PY'; then
import json, os, re, sys
page, j = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
steps = j["steps"]
assert [s["tool"] for s in steps] == ["perf", "perf", "perf", "storm", "conform"], steps
assert all(s["exit_code"] == 0 for s in steps) and j["failed_steps"] == [], j["failed_steps"]
bw = steps[0]["result"]["bw"]
assert len(bw) == 1 and bw[0]["test"] == "write_bw" and bw[0]["bytes"] == 4096, bw
assert bw[0]["iterations"] == 2000 and bw[0]["bw_avg"] > 0, bw
lat = steps[1]["result"]["lat"]
assert len(lat) == 1 and lat[0]["test"] == "read_lat" and lat[0]["t_typical_us"] > 0, lat
assert steps[2]["result"]["bw"][0]["test"] == "send_bw" and steps[2]["result"]["bw"][0]["bw_avg"] > 0
storm = steps[3]["result"]
assert storm["established"] == 200 and storm["torn_down"] == 200, storm
verdicts = {s["name"]: s["verdict"] for s in steps[4]["result"]["scenarios"]}
assert verdicts == {"write_acked": "PASS", "cc_np_cnp": "PASS"}, verdicts
# The page: the summary's rows, a section per step with its tables, and the plots beside it.
rows = re.findall(r"^\| (\d) \| (\w+) \| .* \| (\d+) \| (.*) \|$", page, re.M)
assert [(r[0], r[1], r[2]) for r in rows] == [(str(i + 1), s["tool"], "0") for i, s in
                                             enumerate(steps)], rows
assert "200 established" in rows[3][3] and "2 PASS, 0 FAIL" in rows[4][3], rows
assert len(re.findall(r"^## Step \d", page, re.M)) == 5
for s in steps[:2]:
    assert s["plots"], s
    for p in s["plots"]:
        assert os.path.getsize(os.path.join(os.path.dirname(sys.argv[1]), p)) > 1000, p
        assert "(<%s>)" % p in page, p
assert "| write\\_acked | PASS |" in page and "| cc\\_np\\_cnp | PASS |" in page
PY
  pass "five steps against one peer: one page and one JSON with every step's results and plots"
else
  fail "peer-report (exit $rc): the page or the JSON does not hold every step"
  ls -la "$tmp/r" "$tmp/r/peer-steps" 2>/dev/null
  cat "$tmp/r/peer.md" 2>/dev/null | head -60
  tail -5 "$tmp"/r/peer-steps/*.out 2>/dev/null
fi

# A step with no peer behind it (nothing started on the peer, a short retry): exit 1, the
# failure on the page with the end of its output, and the other step reported as passed.
cat >"$tmp/plan2" <<PLAN
perf write_bw -s 4096 -n 500 $cli @ $perf write_bw $srv --timeout=30
perf read_bw -s 4096 -n 500 --lcores=1 --idle-yield=64 --connect-retry=2
PLAN
run --out="$tmp/r2/peer.html" "$tmp/plan2" 198.18.0.1 >"$tmp/run2.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && python3 - "$tmp/r2/peer.html" "$tmp/r2/peer.json" <<'PY'; then
import json, sys
page, j = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
assert j["failed_steps"] == [2], j["failed_steps"]
assert j["steps"][0]["exit_code"] == 0 and j["steps"][1]["exit_code"] != 0, j["steps"]
assert page.startswith("<!DOCTYPE html>") and "step(s) 2 failed" in page
assert "The end of its output:" in page and "<pre>" in page
PY
  pass "a step with no peer: exit 1, its failure and its output's end on the (HTML) page"
else
  fail "a step with no peer: exit $rc, or the page does not show it"
  cat "$tmp/run2.out"
fi

# Refused: no plan step, an unknown tool, a peer command without --peer-exec, a bad --out.
printf '# nothing\n' >"$tmp/empty"
printf 'ping 1.2.3.4\n' >"$tmp/unknown"
printf 'perf write_bw @ ib_write_bw\n' >"$tmp/noexec"
ok=1
for plan in empty unknown noexec; do
  "$report" --vdev=x --ip=1.2.3.4 --out="$tmp/x.md" "$tmp/$plan" 1.2.3.4 >"$tmp/bad.out" 2>&1
  [ $? -eq 2 ] && grep -q "peer-report: " "$tmp/bad.out" || { ok=0; cat "$tmp/bad.out"; }
done
"$report" --vdev=x --ip=1.2.3.4 --out="$tmp/x.txt" "$tmp/plan" 1.2.3.4 >/dev/null 2>&1
[ $? -eq 2 ] || ok=0
if [ $ok -eq 1 ]; then
  pass "bad plans and options refused (exit 2, with the reason)"
else
  fail "a bad plan or option was not refused"
fi
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
