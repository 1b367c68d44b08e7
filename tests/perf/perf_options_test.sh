#!/usr/bin/env bash
# ctest perf_options: urnic-perf's numeric options take what they can represent and refuse the
# rest with exit status 2 and a message, before anything runs (issue 18 item 6): no sign, no
# octal or hex form, no 64-bit wrap through a K / M suffix. "010" is ten bytes, as perftest
# users mean it (checked on a short loopback run).
#
# Usage: perf_options_test.sh path/to/urnic-perf
set -u
perf=${1:?usage: perf_options_test.sh path/to/urnic-perf}
fails=0
for v in -18446744073709551615 -1 17592186044417M 18446744073709551616 0x10 ' 5' +5 5x; do
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
out=$(timeout 60 "$perf" write_bw -s 010 -n 5 --no-progress 2>&1)
if ! grep -qE '^ 10 +5 ' <<<"$out"; then
  echo "FAIL: -s 010 did not run 10-byte messages:"
  echo "$out" | tail -8
  fails=$((fails + 1))
fi
[ $fails -eq 0 ] && echo "perf_options: PASS" || echo "perf_options: $fails failures"
exit $((fails != 0))
