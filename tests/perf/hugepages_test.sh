#!/usr/bin/env bash
# ctest perf_hugepages (issue 14 item 8): the data path on hugepages. urnic-perf in loopback with
# --memory=huge (EAL --in-memory on 2 MiB pages; the run fails rather than fall back), the engine
# on its own lcore, WRITE and READ with their data checks, then SEND across several QPs, then
# WRITEs over two engines per adapter.
# Skipped (77) without a hugetlbfs mount with 256 free pages, unless URNIC_REQUIRE_HUGEPAGES=1
# (CI reserves pages for it, .ci/run): then a missing page is a failure.
#
# Usage: hugepages_test.sh path/to/urnic-perf
set -u
perf=${1:?usage: hugepages_test.sh path/to/urnic-perf}
free=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
if ! grep -q ' hugetlbfs ' /proc/mounts || [ "${free:-0}" -lt 256 ]; then
  if [ "${URNIC_REQUIRE_HUGEPAGES:-0}" = 1 ]; then
    echo "FAIL: URNIC_REQUIRE_HUGEPAGES=1 but no hugetlbfs mount has 256 free pages (${free:-0})"
    exit 1
  fi
  echo "SKIP: no hugetlbfs mount with 256 free 2 MiB pages"
  exit 77
fi
fails=0
# The last: each adapter over two engines (one on the worker lcore, one on this thread).
for args in "write_bw -s 65536 -n 2000" "read_bw -s 4096 -n 5000" "send_bw -s 1024 -q 4 -n 5000" \
  "write_bw -s 4096 -q 4 -n 5000 --engines=2"; do
  # shellcheck disable=SC2086
  out=$(timeout 120 "$perf" $args --memory=huge --lcores=0-1 --no-progress 2>&1)
  rc=$?
  if [ $rc -eq 0 ] && grep -q 'result: PASS' <<<"$out"; then
    echo "ok   $args on hugepages: $(grep -E '^ [0-9]+ ' <<<"$out" | head -1 | awk '{print $4 " MB/s average"}')"
  else
    echo "FAIL $args on hugepages: exit $rc"
    tail -8 <<<"$out"
    fails=$((fails + 1))
  fi
done
# The pages were in use while it ran, and are all back afterwards.
after=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
if [ "$after" -ne "$free" ]; then
  echo "FAIL hugepages not returned: $free free before, $after after"
  fails=$((fails + 1))
fi
[ $fails -eq 0 ] && echo "perf_hugepages: PASS" || echo "perf_hugepages: $fails failures"
exit $((fails != 0))
