#!/usr/bin/env bash
# House style checks (rules 14 and 26): clang-format, the forbidden-token scan of the
# dataplane hot path, and the size limits (scripts/check-sizes.py). Exits non-zero on any finding.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0

files=$(git ls-files '*.h' '*.cc' 2>/dev/null || find . -name '*.h' -o -name '*.cc')
if command -v clang-format >/dev/null; then
  for f in $files; do
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
      echo "not clang-formatted: $f"
      status=1
    fi
  done
fi

# The hot path never allocates, locks, throws or prints (rule 14). port.cc is setup code run by
# the control plane and may use snprintf for a pool name.
forbidden='\bnew [A-Za-z_]|[^=] delete\b|\bdelete |\bmalloc\(|std::mutex|std::function|std::string\b|\bthrow\b|\bprintf\(|std::cout|\bsleep\(|usleep\('
for f in $(git ls-files 'dataplane/*.h' 'dataplane/*.cc' 2>/dev/null); do
  case "$f" in dataplane/port.cc) continue ;; esac
  # "= delete" (deleted special members) is not a deallocation.
  hits=$(grep -nE "$forbidden" "$f" | grep -vE '= delete;' | grep -vE '^[0-9]+:\s*//' || true)
  if [ -n "$hits" ]; then
    echo "forbidden token in $f:"
    echo "$hits"
    status=1
  fi
done
# dp::Qp's state is private: only the dataplane's stages reach it, through lc() (dataplane/qp.h);
# the control side and tests use the Qp's const views.
hits=$(git ls-files '*.h' '*.cc' 2>/dev/null | grep -v '^dataplane/' |
  xargs grep -nE '(^|[^A-Za-z0-9_.>])lc\((\*?[A-Za-z_][A-Za-z0-9_>.()-]*)\)\.' 2>/dev/null || true)
if [ -n "$hits" ]; then
  echo "dp::Qp private state (lc()) used outside dataplane/:"
  echo "$hits"
  status=1
fi
# Size limits (files <= 800 lines, functions <= 120 lines in dataplane/ and control/).
python3 scripts/check-sizes.py || status=1

[ $status -eq 0 ] && echo "check-style: clean"
exit $status
