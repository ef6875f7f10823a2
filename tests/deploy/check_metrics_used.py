#!/usr/bin/env python3
"""Checks tests/deploy/metrics-used.txt against a live vramd /metrics.

  check_metrics_used.py http://127.0.0.1:8080/metrics      # or a saved file
  check_metrics_used.py --include-future URL               # also the FUTURE section

A name is exported when /metrics has a sample line or a "# TYPE" line for it
(histograms: NAME_bucket counts when "# TYPE NAME histogram" is there).
Exits 1 naming every missing metric.
"""
import os
import re
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def read_used(path, include_future):
    today, future, section = [], [], "today"
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("# --- FUTURE"):
                section = "future"
            if not line or line.startswith("#"):
                continue
            (future if section == "future" else today).append(line)
    return today + (future if include_future else []), future


def exported_names(text):
    names = set()
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            names.add(m.group(1))
            if m.group(2) == "histogram":
                names.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", line)
        if m and not line.startswith("#"):
            names.add(m.group(1))
    return names


def main(argv):
    include_future = "--include-future" in argv
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    src = args[0]
    if src.startswith("http://") or src.startswith("https://"):
        with urllib.request.urlopen(src, timeout=10) as r:
            text = r.read().decode("utf-8")
    else:
        with open(src, encoding="utf-8") as f:
            text = f.read()
    used, future = read_used(os.path.join(HERE, "metrics-used.txt"), include_future)
    have = exported_names(text)
    missing = [n for n in used if n not in have]
    for n in missing:
        print(f"check_metrics_used: MISSING {n} (used by the chart's rules or dashboard, not on /metrics)")
    if not include_future:
        pending = [n for n in future if n not in have]
        landed = [n for n in future if n in have]
        if landed:
            print("check_metrics_used: note: FUTURE metrics now exported (move them up): " + ", ".join(landed))
        if pending:
            print(f"check_metrics_used: {len(pending)} FUTURE metric(s) not exported yet (not checked)")
    if missing:
        return 1
    print(f"check_metrics_used: all {len(used)} metric(s) are exported")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
