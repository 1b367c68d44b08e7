#!/usr/bin/env python3
"""House style size limits (docs/house-style.md; issue 12, and issue 43 item 4 for the folders
beyond dataplane/ and control/): no source file of the product over 800 lines, no function there
over 120 lines. The product is every folder that ships code: the libraries, the daemon, the
drop-in verbs libraries, the tools and the examples (tests are not measured). A function is a
definition that starts at column 0 (its signature's last line ends with '{') and ends at the next
'}' at column 0, the layout clang-format gives every out-of-line definition; inline member
functions in headers are short by construction and not measured. Prints each finding; exits 1 if
there is any."""
import pathlib
import re
import subprocess
import sys

MAX_FILE, MAX_FUNC = 800, 120
DIRS = ("dataplane", "control", "include", "daemon", "verbs", "rdmacm", "switch", "bench",
        "examples")
root = pathlib.Path(__file__).resolve().parent.parent


def sources():
    try:
        out = subprocess.run(["git", "ls-files", *DIRS], cwd=root, capture_output=True, text=True,
                             check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = [str(p.relative_to(root)) for d in DIRS for p in (root / d).rglob("*")]
    return [f for f in out if f.endswith((".cc", ".h")) and (root / f).is_file()]


def long_functions(lines):
    start = None
    for i, line in enumerate(lines):
        if start is None:
            if re.match(r"^[A-Za-z_].*\)\s*(const\s*)?(noexcept\s*)?(override\s*)?\{\s*$", line) or \
               (re.match(r"^\S.*\{\s*$", line) and "(" in "".join(lines[max(0, i - 3):i + 1])
                and not re.match(r"^(namespace|struct|class|enum|union|extern|template)\b", line)
                and "=" not in line.split("(")[0]):
                start = i
        elif line.startswith("}"):
            n = i - start + 1
            if n > MAX_FUNC:
                yield start + 1, n, lines[start].strip()
            start = None


def main():
    findings = 0
    for f in sorted(sources()):
        lines = (root / f).read_text(errors="replace").splitlines()
        if len(lines) > MAX_FILE:
            print(f"{f}: {len(lines)} lines (limit {MAX_FILE})")
            findings += 1
        if f.endswith(".cc"):
            for at, n, sig in long_functions(lines):
                print(f"{f}:{at}: function of {n} lines (limit {MAX_FUNC}): {sig}")
                findings += 1
    if findings == 0:
        print("check-sizes: clean")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
