#!/usr/bin/env bash
# ctest perf_report (issue 17 items 3 and 5): the tools' reports and urnic-conform's --inject,
# without a network (urnic-perf in loopback; urnic-conform's options only).
#   1. urnic-conform --inject / --inject-rx / --report: bad values exit 2 with a message naming
#      the option; good ones are accepted.
#   2. urnic-perf --report: an open-loop run's page has the per-second and percentile tables
#      and four PNGs beside it; a closed-loop -a run's HTML page has one row per size and a
#      bandwidth PNG; every PNG starts with the PNG signature. Without gnuplot the page keeps its
#      tables and says "plots not drawn: gnuplot not found", with a warning and exit status 0.
#   3. bench/latency-curve: one table row per offered rate and a PNG.
# gnuplot is needed for the PNG checks: without it they are skipped, except under CI=true where
# a missing gnuplot is a failure (CI installs it: scripts/install-deps.sh).
#
# Usage: report_test.sh path/to/urnic-perf path/to/urnic-conform
set -u
perf=${1:?usage: report_test.sh path/to/urnic-perf path/to/urnic-conform}
conform=${2:?usage: report_test.sh path/to/urnic-perf path/to/urnic-conform}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() {
  echo "FAIL $*"
  fails=$((fails + 1))
}
# is_png FILE: exists and starts with the 8-byte PNG signature.
is_png() {
  [ -s "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
}
have_gnuplot=1
if ! command -v gnuplot >/dev/null; then
  have_gnuplot=0
  if [ "${CI:-}" = true ]; then
    bad "gnuplot is not installed (CI must have it: scripts/install-deps.sh)"
  else
    echo "SKIP the PNG checks: gnuplot is not installed"
  fi
fi

# ---- 1. urnic-conform's options.
# Should a bad value be accepted, the run that follows ends at once: TCP port 1 refuses
# (--connect-retry=0), and timeout as the backstop.
c_args=(--vdev=net_null0 --ip=10.0.0.2 --connect-retry=0)
for a in --inject=drop=101% --inject=bogus=1 --inject= --inject-rx=drop --inject=drop=nan% \
  --inject=drop=1.5 --inject=seed=-1 --report=r.txt --report=.md; do
  out=$(timeout 20 "$conform" "${c_args[@]}" "$a" -p 1 127.0.0.1 2>&1)
  rc=$?
  opt=${a%%=*}
  if [ $rc -eq 2 ] && grep -q -- "urnic-conform: $opt" <<<"$out"; then
    ok "urnic-conform refuses $a: $out"
  else
    bad "urnic-conform $a: exit $rc, not 2 with a message naming $opt: $out"
  fi
done
if "$conform" "${c_args[@]}" --inject=drop=100%,dup=5,seed=7 --inject-rx=reorder=1%,ce=10 \
  --report=x.html --list >/dev/null 2>"$work/c.err"; then
  ok "urnic-conform accepts --inject=drop=100%,dup=5,seed=7 --inject-rx=reorder=1%,ce=10"
else
  bad "urnic-conform refused good --inject values: $(cat "$work/c.err")"
fi

# ---- 2. urnic-perf's report.
# per_second_rows FILE: the rows of the page's per-second table (after its "t [s]" header).
per_second_rows() {
  awk '/^\| t \\\[s\\\]/ { t = 1; getline; next } t && /^\|/ { n++ } t && !/^\|/ { t = 0 } END { print n + 0 }' "$1"
}
if ! timeout 120 "$perf" write_bw -s 64 -n 30000 --rate=0.1 --no-progress \
  --report="$work/ol.md" >"$work/ol.out" 2>&1; then
  bad "urnic-perf open loop with --report failed: $(tail -5 "$work/ol.out")"
else
  rows=$(per_second_rows "$work/ol.md")
  if grep -q '^## Open loop 1: write\\_bw, 64 B' "$work/ol.md" && [ "$rows" -ge 1 ] &&
    grep -q '^| min \\\[us\\\] | p50' "$work/ol.md"; then
    ok "open-loop report: the percentiles and $rows per-second rows"
  else
    bad "open-loop report lacks its tables ($rows per-second rows):"
    cat "$work/ol.md"
  fi
  if [ $have_gnuplot = 1 ]; then
    for p in bw ol1-rate ol1-latency ol1-percentiles; do
      f=$work/ol-$p.png
      if is_png "$f" && grep -qF "(<ol-$p.png>)" "$work/ol.md"; then
        ok "open-loop report: ol-$p.png is a PNG and on the page"
      else
        bad "open-loop report: ol-$p.png missing, not a PNG or not on the page"
      fi
    done
  fi
fi
if ! timeout 120 "$perf" write_bw -a -n 5 --no-progress --report="$work/bw.html" \
  >"$work/bw.out" 2>&1; then
  bad "urnic-perf write_bw -a with --report failed: $(tail -5 "$work/bw.out")"
else
  want=$(grep -cE '^ [0-9]+ +5 ' "$work/bw.out")
  got=$(grep -c '^<tr><td>write_bw</td>' "$work/bw.html")
  if [ "$got" -eq "$want" ] && [ "$want" -ge 20 ]; then
    ok "closed-loop HTML report: $got rows, as the console's $want"
  else
    bad "closed-loop HTML report: $got rows, the console printed $want"
  fi
  if [ $have_gnuplot = 1 ]; then
    is_png "$work/bw-bw.png" && grep -q '<img src="bw-bw.png"' "$work/bw.html" &&
      ok "closed-loop report: bw-bw.png is a PNG and on the page" ||
      bad "closed-loop report: bw-bw.png missing, not a PNG or not on the page"
  fi
fi
# No gnuplot on PATH (urnic-perf itself needs none).
env PATH=/nonexistent "$perf" write_bw -s 64 -n 5000 --rate=0.1 --no-progress \
  --report="$work/np.md" >"$work/np.out" 2>"$work/np.err"
rc=$?
if [ $rc -eq 0 ] && grep -q 'plots not drawn: gnuplot not found' "$work/np.err" &&
  grep -q '^Plots not drawn: gnuplot not found' "$work/np.md" &&
  [ "$(per_second_rows "$work/np.md")" -ge 1 ] && ! ls "$work"/np-*.png >/dev/null 2>&1; then
  ok "without gnuplot: exit 0, a warning, the tables, and the page says why it has no plots"
else
  bad "without gnuplot: exit $rc; stderr: $(cat "$work/np.err")"
  head -12 "$work/np.md"
fi
out=$("$perf" -n 5 --report="$work/x.pdf" 2>&1)
rc=$?
[ $rc -eq 2 ] && ok "urnic-perf refuses --report=x.pdf: $out" || bad "--report=x.pdf: exit $rc, not 2"

# ---- 3. bench/latency-curve (short: two rates, 0.5 s each).
if "$root/bench/latency-curve" --perf "$perf" --rates 0.05,0.1 --duration 0.5 \
  --out "$work/lc.md" >"$work/lc.out" 2>&1; then
  rows=$(grep -cE '^\| 0\.[0-9]+ \| [0-9.]+ \| [0-9]+ \|' "$work/lc.md")
  [ "$rows" -eq 2 ] && ok "latency-curve: 2 rows" || bad "latency-curve: $rows rows, not 2"
  if [ $have_gnuplot = 1 ]; then
    is_png "$work/lc-p99.png" && ok "latency-curve: lc-p99.png is a PNG" ||
      bad "latency-curve: no PNG: $(cat "$work/lc.out")"
  fi
else
  bad "latency-curve failed: $(tail -5 "$work/lc.out")"
fi
"$root/bench/latency-curve" --perf "$perf" --rates 0.1,abc --out "$work/x.md" 2>/dev/null
rc=$?
[ $rc -eq 2 ] && ok "latency-curve refuses --rates 0.1,abc" || bad "latency-curve --rates 0.1,abc: exit $rc"

[ $fails -eq 0 ] && echo "perf_report: PASS" || echo "perf_report: $fails failures"
exit $((fails != 0))
