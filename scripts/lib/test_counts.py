#!/usr/bin/env python3
"""Counted results per tier for scripts/test.sh: tests run, passed, failed, skipped.

CTest's JUnit file (`ctest --output-junit`) holds one testcase per CTest entry,
its status and its captured output. An entry may hold more than one test: a
Python `unittest -v` file runs several methods (`Ran N tests`, `OK (skipped=K)`,
`FAILED (failures=F, errors=E, skipped=K)`); a GoogleTest entry (one per case,
gtest_discover_tests) runs what its filter matches (`[==========] N tests from
... ran.`, `[  PASSED  ] N tests.`, `[  SKIPPED ] N tests, listed below:`,
`[  FAILED  ] N tests, listed below:`). Those summaries are counted; an entry
whose output has none (bash, `cmake -P`, a crash, a timeout) counts as one test
with CTest's status, and is named in a note.

What fails the count (exit 1), beyond a failed test:
  - a skipped test not on the allow-list (tests/allowed-skips.txt:
    `test-id<TAB>reason`); each such skip is printed with its own reason, each
    allowed one with the allow-list's reason;
  - an entry that ran nothing (0 tests: a filter that matches nothing, a file
    with no tests), and a tier with no entries.

Test ids: GoogleTest `Suite.Name`; unittest `module.Class.method` (a subtest
adds its parameters: `module.Class.method (i=1)`); a skip that names no test
(setUpClass/setUpModule, a CTest-level skip or DISABLED entry, or skips the
summary counts but the output does not show) has the CTest entry's name.

`tally()` is pure and tested (tests/system/test_counts_test.py).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"

# CTest's marker where it cut an output longer than --test-output-size-*.
TRUNCATED = re.compile(r"\[This part of the test output was removed since it exceeds the threshold of \d+ bytes\.\]")


@dataclass
class Entry:
    """One CTest entry as the JUnit file has it."""
    name: str
    status: str  # PASSED, FAILED or SKIPPED (CTest's view)
    message: str = ""  # CTest's skip or failure message
    output: str = ""


@dataclass
class Skip:
    test: str
    reason: str
    entry: str


@dataclass
class Inner:
    """What an entry's own test runner said it ran."""
    kind: str  # "gtest" or "unittest"
    run: int
    passed: int
    failed: int
    skipped: int
    skips: list[tuple[str, str]] = field(default_factory=list)  # (test id, reason)


@dataclass
class TierCounts:
    run: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    entries: int = 0


@dataclass
class Report:
    tiers: dict[str, TierCounts]
    allowed: list[tuple[Skip, str]]  # (skip, allow-list reason)
    not_allowed: list[Skip]
    ran_nothing: list[str]  # entries and tiers
    uncounted: list[str]  # entries counted as 1 test (no summary in their output)
    truncated: list[str]  # entries whose output CTest cut
    disagree: list[str]  # entries CTest failed though their summary shows no failure

    @property
    def ok(self) -> bool:
        return (not self.not_allowed and not self.ran_nothing
                and all(t.failed == 0 for t in self.tiers.values()))


# --- GoogleTest ------------------------------------------------------------

_G_RAN = re.compile(r"^\[==========\] (\d+) tests? from \d+ test suites? ran\.", re.M)
_G_PASSED = re.compile(r"^\[  PASSED  \] (\d+) tests?\.", re.M)
_G_SKIPPED = re.compile(r"^\[  SKIPPED \] (\d+) tests?, listed below:", re.M)
_G_FAILED = re.compile(r"^\[  FAILED  \] (\d+) tests?, listed below:", re.M)
_G_RUN_LINE = re.compile(r"^\[ RUN      \] (\S+)\s*$")
_G_SKIP_LINE = re.compile(r"^\[  SKIPPED \] (\S+) \(\d+ ms\)\s*$")


def _last(rx: re.Pattern, text: str) -> re.Match | None:
    m = None
    for m in rx.finditer(text):
        pass
    return m


def parse_gtest(out: str) -> Inner | None:
    ran = _last(_G_RAN, out)
    if not ran:
        return None
    tail = out[ran.end():]
    passed = _G_PASSED.search(tail)
    skipped = _G_SKIPPED.search(tail)
    failed = _G_FAILED.search(tail)
    run = int(ran.group(1))
    n_skipped = int(skipped.group(1)) if skipped else 0
    n_failed = int(failed.group(1)) if failed else 0
    n_passed = int(passed.group(1)) if passed else max(run - n_skipped - n_failed, 0)
    # Each skipped case with the message GTEST_SKIP() gave: the lines after
    # "file:line: Skipped" up to its "[  SKIPPED ] Suite.Name (N ms)".
    skips: list[tuple[str, str]] = []
    reason: list[str] = []
    in_reason = False
    for line in out[:ran.start()].splitlines():
        if _G_RUN_LINE.match(line):
            reason, in_reason = [], False
        elif m := _G_SKIP_LINE.match(line):
            skips.append((m.group(1), " ".join(x.strip() for x in reason if x.strip()) or "(no message)"))
            reason, in_reason = [], False
        elif line.rstrip().endswith(": Skipped"):
            reason, in_reason = [], True
        elif in_reason:
            reason.append(line)
    return Inner("gtest", run, n_passed, n_failed, n_skipped, skips)


# --- Python unittest -------------------------------------------------------

_U_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*$", re.M)
_U_RESULT = re.compile(r"^(OK|FAILED|NO TESTS RAN)(?: \(([^)]*)\))?\s*$", re.M)
# "test_x (mod.Class.test_x)", "test_x (mod.Class)" (before 3.11), a subtest
# "  test_x (mod.Class.test_x) (i=1)"; then " ... " and the result, maybe later.
_U_DESC = re.compile(r"^\s*(\w+) \(([\w.]+)\)((?: \([^()]*\))?)(?: \.\.\. ?(.*))?$")
_U_SKIP = re.compile(r"(?:^|\.\.\. )skipped '(.*)'\s*$")
_U_DONE = re.compile(r"(?:^|\.\.\. )(ok|FAIL|ERROR|expected failure|unexpected success)\s*$")


def _unittest_id(name: str, where: str, params: str) -> str:
    test = where if where.endswith("." + name) else f"{where}.{name}"
    return test + params


def parse_unittest(out: str) -> Inner | None:
    ran = _last(_U_RAN, out)
    if not ran:
        return None
    result = _U_RESULT.search(out, ran.end())
    if not result:
        return None
    fields = {}
    for part in (result.group(2) or "").split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            if v.strip().isdigit():
                fields[k.strip()] = int(v.strip())
    run = int(ran.group(1))
    n_failed = fields.get("failures", 0) + fields.get("errors", 0) + fields.get("unexpected successes", 0)
    if result.group(1) == "FAILED" and n_failed == 0:
        n_failed = 1
    n_skipped = fields.get("skipped", 0)
    run = max(run, n_failed + n_skipped)  # a setUpClass error or skip is not in "Ran N"
    skips: list[tuple[str, str]] = []
    pending: str | None = None  # a test whose result line has not come yet
    for line in out[:ran.start()].splitlines():
        if m := _U_DESC.match(line):
            pending = _unittest_id(m.group(1), m.group(2), m.group(3))
            line = m.group(4) or ""
            if not line:
                continue
            line = "... " + line
        if m := _U_SKIP.search(line):
            skips.append((pending or "", m.group(1)))
            pending = None
        elif _U_DONE.search(line):
            pending = None
    return Inner("unittest", run, run - n_failed - n_skipped, n_failed, n_skipped, skips)


def parse_inner(out: str) -> Inner | None:
    return parse_gtest(out) or parse_unittest(out)


# --- Counting --------------------------------------------------------------

def tally(entries: list[Entry], labels: dict[str, list[str]], tiers: list[str],
          allow: dict[str, str]) -> Report:
    """Per-tier counts of what the entries ran, and the skips against `allow`."""
    rep = Report({t: TierCounts() for t in tiers}, [], [], [], [], [], [])
    for e in entries:
        inner = parse_inner(e.output)
        if TRUNCATED.search(e.output):
            rep.truncated.append(e.name)
        run = passed = failed = skipped = 0
        skips: list[Skip] = []
        if e.status == SKIPPED and not (inner and inner.skipped):
            run, skipped = 1, 1
            reason = e.message or "skipped by CTest"
            last = [x.strip() for x in e.output.splitlines() if x.strip()]
            if last and last[-1].lower() not in reason.lower():
                reason += f": {last[-1]}"
            skips.append(Skip(e.name, reason, e.name))
        elif inner is None:
            rep.uncounted.append(e.name)
            run = 1
            passed, failed = (1, 0) if e.status == PASSED else (0, 1)
        elif inner.run == 0:
            rep.ran_nothing.append(f"{e.name} ({inner.kind}: 0 tests)")
            run, failed = 1, 1
        else:
            run, passed, failed, skipped = inner.run, inner.passed, inner.failed, inner.skipped
            named = [Skip(t or e.name, r, e.name) for t, r in inner.skips][:skipped]
            named += [Skip(e.name, "a skip the summary counts but the output does not name", e.name)] * (
                skipped - len(named))
            skips.extend(named)
            if e.status == FAILED and failed == 0:
                # The runner's tests passed, the entry did not: its exit status,
                # a sanitizer report, a timeout after the summary, ...
                rep.disagree.append(e.name)
                run, failed = run + 1, 1
        for s in skips:
            if s.test in allow:
                rep.allowed.append((s, allow[s.test]))
            else:
                rep.not_allowed.append(s)
        own = labels.get(e.name) or ["(no tier label)"]
        for tier in [t for t in own if t in rep.tiers] or own[:1]:
            rep.tiers.setdefault(tier, TierCounts())
            c = rep.tiers[tier]
            c.run += run
            c.passed += passed
            c.failed += failed
            c.skipped += skipped
            c.entries += 1
    for t in tiers:
        if rep.tiers[t].entries == 0:
            rep.ran_nothing.append(f"tier {t} (no CTest entries)")
    return rep


def _names(xs: list[str], limit: int = 8) -> str:
    return ", ".join(xs[:limit]) + (f", ... ({len(xs) - limit} more)" if len(xs) > limit else "")


def format_report(rep: Report, allow_file: str = "tests/allowed-skips.txt") -> list[str]:
    lines = []
    for tier, c in rep.tiers.items():
        lines.append(f"{tier}: {c.run} run, {c.passed} passed, {c.failed} failed, {c.skipped} skipped "
                     f"({c.entries} CTest entr{'y' if c.entries == 1 else 'ies'})")
    if rep.uncounted:
        lines.append(f"  note: {len(rep.uncounted)} CTest entries print no test count; each counted as 1 test "
                     f"with CTest's status: {_names(rep.uncounted)}")
    if rep.truncated:
        lines.append(f"  note: CTest cut the output of {_names(rep.truncated)} (--test-output-size-*): "
                     "what the cut hid is counted from the summary, or the entry as 1 test")
    if rep.allowed:
        lines.append(f"  allowed skips ({allow_file}):")
        lines += [f"    {s.test} [{s.entry}]: {why} (the test says: {s.reason})" for s, why in rep.allowed]
    if rep.not_allowed:
        lines.append(f"  SKIPS NOT ALLOWED (a skip fails the run unless {allow_file} lists it with its reason):")
        lines += [f"    {s.test} [{s.entry}]: {s.reason}" for s in rep.not_allowed]
    for r in rep.ran_nothing:
        lines.append(f"  RAN NOTHING: {r}")
    for d in rep.disagree:
        lines.append(f"  FAILED: {d}: CTest failed it though its test summary shows no failure")
    return lines


# --- Files -----------------------------------------------------------------

def read_junit(path: str) -> list[Entry]:
    entries = []
    for tc in ET.parse(path).getroot().iter("testcase"):
        status_attr = tc.get("status", "")
        skipped = tc.find("skipped")
        message = ""
        if status_attr == "run":
            status = PASSED
        elif status_attr == "disabled":
            status, message = SKIPPED, "DISABLED (CTest property)"
        elif status_attr == "notrun" and skipped is not None and skipped.get("message", "").startswith("SKIP_"):
            status, message = SKIPPED, skipped.get("message", "")
        else:
            # "fail", and "notrun" for a reason that is not a skip: a failed
            # fixture, a missing executable, missing required files.
            status = FAILED
            if skipped is not None:
                message = skipped.get("message", "")
        out = tc.find("system-out")
        entries.append(Entry(tc.get("name", "?"), status, message, (out.text or "") if out is not None else ""))
    return entries


def read_labels(path: str) -> dict[str, list[str]]:
    """Test name -> labels, from `ctest --show-only=json-v1`."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    labels = {}
    for t in data.get("tests", []):
        for p in t.get("properties", []):
            if p.get("name") == "LABELS":
                labels[t["name"]] = list(p.get("value") or [])
    return labels


def read_allow(path: str) -> dict[str, str]:
    allow = {}
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            test, sep, reason = line.partition("\t")
            if not sep or not test.strip() or not reason.strip():
                raise ValueError(f"{path}:{n}: want 'test-id<TAB>reason', got {line!r}")
            allow[test.strip()] = reason.strip()
    return allow


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--junit", required=True, help="ctest --output-junit file")
    ap.add_argument("--tests-json", required=True, help="ctest --show-only=json-v1 output (for the labels)")
    ap.add_argument("--allow", required=True, help="the allow-list of skips (test-id<TAB>reason)")
    ap.add_argument("--tiers", required=True, help="the tiers (CTest labels) that ran, space-separated")
    args = ap.parse_args(argv)
    try:
        allow = read_allow(args.allow)
        entries = read_junit(args.junit)
        labels = read_labels(args.tests_json)
    except (OSError, ValueError, ET.ParseError) as e:
        print(f"test counts: {e}")
        return 2
    rep = tally(entries, labels, args.tiers.split(), allow)
    print("\n".join(format_report(rep, args.allow)))
    return 0 if rep.ok else 1


if __name__ == "__main__":
    sys.exit(main())
