#!/usr/bin/env python3
"""bench/peer-report's page: one Markdown or HTML report from the steps it ran against one peer.

Usage: peer_report_page.py OUT STEPS_DIR SERVER N. STEPS_DIR holds, per step s (1..N):
steps.plan (tool, arguments, peer command, command line, one per line), steps.rc (exit status),
steps.out (console), and the tool's steps.json (absent when the step wrote none) and plots
(steps-*.png, drawn by the tool's own --report). Writes OUT and OUT's stem + .json. Exit status
0, or 1 when a file cannot be read or written.
"""
import datetime
import html
import json
import os
import re
import socket
import sys


def load_step(d, s):
    """One step's plan, exit status, results (or None) and plots."""
    base = os.path.join(d, "step%d" % s)
    with open(base + ".plan") as f:
        tool, args, peer, cmd = (f.read().split("\n") + [""] * 4)[:4]
    with open(base + ".rc") as f:
        rc = int(f.read().strip() or "1")
    result = None
    if os.path.exists(base + ".json"):
        try:
            with open(base + ".json") as f:
                result = json.load(f)
        except ValueError as e:
            result = {"unreadable": str(e)}
    plots = sorted(p for p in os.listdir(d) if re.fullmatch(r"step%d-.*\.png" % s, p))
    with open(base + ".out", errors="replace") as f:
        tail = f.read().splitlines()[-12:]
    return {"step": s, "tool": tool, "args": args, "peer_command": peer, "command": cmd,
            "exit_code": rc, "result": result, "plots": [os.path.join(os.path.basename(d), p)
                                                          for p in plots], "tail": tail}


def num(v, digits=5):
    return ("%%.%dg" % digits) % v if isinstance(v, (int, float)) else str(v)


def headline(st):
    """One line saying what the step measured."""
    r = st["result"]
    if r is None:
        return "no results written (see its output below)"
    if "unreadable" in r:
        return "its JSON could not be read: " + r["unreadable"]
    if st["tool"] == "conform":
        return "%d PASS, %d FAIL, %d NOT-APPLICABLE" % (r["pass"], r["fail"], r["not_applicable"])
    if st["tool"] == "storm":
        refused = sum(r.get("refused_by_reason", {}).values())
        return "%d established, %s setups/s (p50 %s us), %s teardowns/s, %d refused" % (
            r["established"], num(r["setup_per_s"]), num(r["setup_us"]["p50"]),
            num(r["teardown_per_s"]), refused)
    if r.get("mode") == "closed_loop":
        parts = ["%s %d B: %s %s avg, %s Mpps" % (b["test"], b["bytes"], num(b["bw_avg"]),
                                                  b["bw_unit"], num(b["msg_rate_mpps"]))
                 for b in r["bw"]]
        parts += ["%s %d B: %s us %s" % (l["test"], l["bytes"],
                                         num(l.get("t_typical_us", l["t_avg_us"])),
                                         "typical" if "t_typical_us" in l else "average")
                  for l in r["lat"]]
        if not parts:
            return "no result rows (the run ended before its first)"
        return "; ".join(parts[:3]) + (" (+%d rows)" % (len(parts) - 3) if len(parts) > 3 else "")
    if "achieved_rate" in r:
        return "open loop: %s of %s Mpps offered" % (num(r["achieved_rate"]), num(r["target_rate"]))
    return "results in the JSON"


def tables(st):
    """(title, head, rows) of the step's result tables."""
    r = st["result"] or {}
    out = []
    if st["tool"] == "conform" and "scenarios" in r:
        out.append(("Scenarios", ["scenario", "verdict", "what the peer did"],
                    [[x["name"], x["verdict"], x["seen"]] for x in r["scenarios"]]))
    if r.get("mode") == "closed_loop":
        if r["bw"]:
            out.append(("Bandwidth", ["test", "bytes", "iterations", "BW peak", "BW average",
                                      "unit", "Mpps"],
                        [[b["test"], b["bytes"], b["iterations"], num(b["bw_peak"]),
                          num(b["bw_avg"]), b["bw_unit"], num(b["msg_rate_mpps"])]
                         for b in r["bw"]]))
        if r["lat"]:
            keys = ["t_min_us", "t_typical_us", "t_avg_us", "p99_us", "p999_us", "t_max_us"]
            out.append(("Latency (us)", ["test", "bytes", "iterations", "min", "typical",
                                         "average", "p99", "p99.9", "max"],
                        [[l["test"], l["bytes"], l["iterations"]] + [num(l.get(k, "")) for k in keys]
                         for l in r["lat"]]))
    if st["tool"] == "storm" and "setup_us" in r:
        lat = [[k[:-3], v["count"], num(v["p50"]), num(v["p99"]), num(v["max"])]
               for k, v in r.items() if k in ("setup_us", "teardown_us")]
        out.append(("Connections", ["phase", "count", "p50 (us)", "p99 (us)", "max (us)"], lat))
    return out


class Page:
    def __init__(self, md):
        self.md, self.parts = md, []

    def esc(self, s):
        s = str(s)
        return re.sub(r"([\\`*_{}\[\]()<>#+!|])", r"\\\1", s).replace("\n", " ") if self.md \
            else html.escape(s)

    def heading(self, t, level=2):
        self.parts.append("%s %s\n" % ("#" * level, self.esc(t)) if self.md
                          else "<h%d>%s</h%d>" % (level, self.esc(t), level))

    def para(self, t):
        self.parts.append(self.esc(t) + "\n" if self.md else "<p>%s</p>" % self.esc(t))

    def code(self, t):
        self.parts.append("```\n%s\n```\n" % t if self.md else "<pre>%s</pre>" % html.escape(t))

    def table(self, head, rows):
        if self.md:
            lines = ["| " + " | ".join(self.esc(h) for h in head) + " |",
                     "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(self.esc(c) for c in row) + " |" for row in rows]
            self.parts.append("\n".join(lines) + "\n")
        else:
            cells = lambda row, tag: "".join("<%s>%s</%s>" % (tag, self.esc(c), tag) for c in row)
            self.parts.append("<table border=\"1\"><tr>%s</tr>%s</table>" % (
                cells(head, "th"), "".join("<tr>%s</tr>" % cells(r, "td") for r in rows)))

    def image(self, src, alt):
        self.parts.append("![%s](<%s>)\n" % (self.esc(alt), src) if self.md
                          else "<p><img src=\"%s\" alt=\"%s\"></p>" % (html.escape(src),
                                                                       html.escape(alt)))

    def text(self, title):
        body = "\n".join(self.parts)
        if self.md:
            return "# %s\n\n%s" % (title, body)
        return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head>"
                "<body><h1>%s</h1>\n%s\n</body></html>\n" % ((html.escape(title),) * 2 + (body,)))


def main():
    out, d, server, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    steps = [load_step(d, s) for s in range(1, n + 1)]
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    failed = [st["step"] for st in steps if st["exit_code"] != 0]
    p = Page(out.endswith(".md"))
    p.para("Peer %s, from %s, %s: %d steps, %s." % (
        server, socket.gethostname(), when, n,
        "all passed" if not failed else "step(s) %s failed" % ", ".join(map(str, failed))))
    p.heading("Summary")
    p.table(["step", "tool", "arguments", "exit", "result"],
            [[st["step"], st["tool"], st["args"].strip(), st["exit_code"], headline(st)]
             for st in steps])
    for st in steps:
        p.heading("Step %d: %s %s" % (st["step"], st["tool"], st["args"].strip()))
        p.code(st["command"] + ("\npeer: " + st["peer_command"].strip()
                                if st["peer_command"].strip() else ""))
        p.para("Exit status %d (%s): %s." % (st["exit_code"],
                                              "passed" if st["exit_code"] == 0 else "failed",
                                              headline(st)))
        for title, head, rows in tables(st):
            p.para(title + ":")
            p.table(head, rows)
        for img in st["plots"]:
            p.image(img, os.path.basename(img))
        if st["exit_code"] != 0:
            p.para("The end of its output:")
            p.code("\n".join(st["tail"]))
    summary = {"peer": server, "host": socket.gethostname(), "date": when,
               "failed_steps": failed,
               "steps": [{k: st[k] for k in ("step", "tool", "args", "peer_command", "command",
                                             "exit_code", "result", "plots")} for st in steps]}
    with open(out, "w") as f:
        f.write(p.text("urnic peer report"))
    with open(os.path.splitext(out)[0] + ".json", "w") as f:
        json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, KeyError, ValueError) as e:
        print("peer-report: cannot write the report: %s" % e, file=sys.stderr)
        sys.exit(1)
