"""The counted results of scripts/test.sh (scripts/lib/test_counts.py): what
GoogleTest and unittest print at their end, counted per tier from CTest's JUnit
file; a skip off the allow-list, an entry that ran nothing, and an entry CTest
failed fail the count. Fixtures are the runners' real output shapes (GoogleTest
1.12, Python 3.11 `unittest -v`), CTest 3.25's JUnit and truncation marker.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "lib"))

import test_counts as tc  # noqa: E402
from test_counts import FAILED, PASSED, SKIPPED, Entry, tally  # noqa: E402

GTEST_PASS = """Running main() from ./googletest/src/gtest_main.cc
Note: Google Test filter = Ledger.Reserves
[==========] Running 1 test from 1 test suite.
[----------] Global test environment set-up.
[----------] 1 test from Ledger
[ RUN      ] Ledger.Reserves
[       OK ] Ledger.Reserves (0 ms)
[----------] 1 test from Ledger (0 ms total)

[----------] Global test environment tear-down
[==========] 1 test from 1 test suite ran. (0 ms total)
[  PASSED  ] 1 test.
"""

GTEST_SKIP = """Running main() from ./googletest/src/gtest_main.cc
Note: Google Test filter = Nvml.RealDriver
[==========] Running 1 test from 1 test suite.
[----------] 1 test from Nvml
[ RUN      ] Nvml.RealDriver
/work/main/tests/unit/nvml_test.cc:42: Skipped
no NVIDIA driver on this machine

[  SKIPPED ] Nvml.RealDriver (0 ms)
[----------] 1 test from Nvml (0 ms total)

[==========] 1 test from 1 test suite ran. (0 ms total)
[  PASSED  ] 0 tests.
[  SKIPPED ] 1 test, listed below:
[  SKIPPED ] Nvml.RealDriver
"""

GTEST_FAIL = """Running main() from ./googletest/src/gtest_main.cc
Note: Google Test filter = Ledger.Overbooks
[==========] Running 1 test from 1 test suite.
[ RUN      ] Ledger.Overbooks
/work/main/tests/unit/ledger_test.cc:10: Failure
Expected equality of these values:
  used
    Which is: 3
  2
[  FAILED  ] Ledger.Overbooks (0 ms)

[==========] 1 test from 1 test suite ran. (0 ms total)
[  PASSED  ] 0 tests.
[  FAILED  ] 1 test, listed below:
[  FAILED  ] Ledger.Overbooks

 1 FAILED TEST
"""

GTEST_NOTHING = """Running main() from ./googletest/src/gtest_main.cc
Note: Google Test filter = Nope.Nothing
[==========] Running 0 tests from 0 test suites.
[==========] 0 tests from 0 test suites ran. (0 ms total)
[  PASSED  ] 0 tests.
"""

PY_OK = """test_a (agent_test.Agent.test_a) ... ok
test_b (agent_test.Agent.test_b) ... ok
test_c (agent_test.Agent.test_c)
Starts vramd with a docstring. ... ok

----------------------------------------------------------------------
Ran 3 tests in 1.204s

OK
"""

# Two skips: one with a docstring, one whose result comes after the test's own
# log lines (PYTHONUNBUFFERED, the harness logs to stderr).
PY_SKIPPED = """test_a (faults_test.Faults.test_a) ... ok
test_b (faults_test.Faults.test_b)
Kills redis mid-bind. ... skipped 'needs root'
test_c (faults_test.Faults.test_c) ... vramd: listening on 127.0.0.1:4321
vramd: stopping
skipped 'no IPv6 on this host'
test_d (faults_test.Faults.test_d) ... ok

----------------------------------------------------------------------
Ran 4 tests in 2.000s

OK (skipped=2)
"""

PY_FAILED = """test_a (security_test.Tls.test_a) ... ok
test_b (security_test.Tls.test_b) ... FAIL
test_c (security_test.Tls.test_c) ... ERROR
test_d (security_test.Tls.test_d) ... skipped 'old openssl'
test_e (security_test.Tls.test_e) ... ok

======================================================================
FAIL: test_b (security_test.Tls.test_b)
----------------------------------------------------------------------
AssertionError: 401 != 200

----------------------------------------------------------------------
Ran 5 tests in 0.300s

FAILED (failures=1, errors=1, skipped=1)
"""

PY_NOTHING = """
----------------------------------------------------------------------
Ran 0 tests in 0.000s

OK
"""

# A skip in setUpClass names no test: it has the entry's name.
PY_CLASS_SKIP = """test_a (vramctl_test.Cli.test_a) ... ok
test_b (vramctl_test.Cli.test_b) ... skipped 'no krew'
skipped 'no kubectl'

----------------------------------------------------------------------
Ran 2 tests in 0.100s

OK (skipped=2)
"""

BASH = """helm lint: 1 chart(s) linted, 0 chart(s) failed
policy: 14 checks ok
promtool: SUCCESS
"""

MARK = "\n[This part of the test output was removed since it exceeds the threshold of 1024 bytes.]\n"


def count(entries: list[Entry], tiers: list[str] | None = None, allow: dict[str, str] | None = None,
          labels: dict[str, list[str]] | None = None) -> tc.Report:
    tiers = tiers or ["unit"]
    labels = labels if labels is not None else {e.name: [tiers[0]] for e in entries}
    return tally(entries, labels, tiers, allow or {})


def numbers(rep: tc.Report, tier: str = "unit") -> tuple[int, int, int, int, int]:
    c = rep.tiers[tier]
    return c.run, c.passed, c.failed, c.skipped, c.entries


class GoogleTest(unittest.TestCase):
    def test_pass(self):
        rep = count([Entry("Ledger.Reserves", PASSED, output=GTEST_PASS)])
        self.assertEqual(numbers(rep), (1, 1, 0, 0, 1))
        self.assertTrue(rep.ok)
        self.assertEqual(rep.uncounted, [])

    def test_skip_not_allowed_fails_with_its_reason(self):
        rep = count([Entry("Nvml.RealDriver", SKIPPED, "SKIP_REGULAR_EXPRESSION_MATCHED", GTEST_SKIP)])
        self.assertEqual(numbers(rep), (1, 0, 0, 1, 1))
        self.assertFalse(rep.ok)
        self.assertEqual([(s.test, s.reason) for s in rep.not_allowed],
                         [("Nvml.RealDriver", "no NVIDIA driver on this machine")])
        self.assertIn("    Nvml.RealDriver [Nvml.RealDriver]: no NVIDIA driver on this machine",
                      tc.format_report(rep))

    def test_skip_on_the_allow_list_passes_and_is_printed(self):
        rep = count([Entry("Nvml.RealDriver", SKIPPED, "SKIP_REGULAR_EXPRESSION_MATCHED", GTEST_SKIP)],
                    allow={"Nvml.RealDriver": "CI has no GPU; scripts/gpu-check.sh covers it"})
        self.assertTrue(rep.ok)
        self.assertEqual(rep.not_allowed, [])
        lines = tc.format_report(rep)
        self.assertTrue(any("Nvml.RealDriver" in x and "CI has no GPU" in x for x in lines), lines)

    def test_fail(self):
        rep = count([Entry("Ledger.Overbooks", FAILED, output=GTEST_FAIL)])
        self.assertEqual(numbers(rep), (1, 0, 1, 0, 1))
        self.assertFalse(rep.ok)

    def test_a_filter_that_matches_nothing_ran_nothing(self):
        rep = count([Entry("Nope.Nothing", PASSED, output=GTEST_NOTHING)])
        self.assertEqual(rep.ran_nothing, ["Nope.Nothing (gtest: 0 tests)"])
        self.assertEqual(numbers(rep), (1, 0, 1, 0, 1))
        self.assertFalse(rep.ok)
        self.assertIn("  RAN NOTHING: Nope.Nothing (gtest: 0 tests)", tc.format_report(rep))

    def test_many_cases_in_one_entry(self):
        out = GTEST_PASS.replace("1 test from 1 test suite ran", "1222 tests from 180 test suites ran").replace(
            "[  PASSED  ] 1 test.", "[  PASSED  ] 1222 tests.")
        self.assertEqual(numbers(count([Entry("unit_tests", PASSED, output=out)])), (1222, 1222, 0, 0, 1))


class PythonUnittest(unittest.TestCase):
    def test_ok(self):
        rep = count([Entry("system.agent_test", PASSED, output=PY_OK)], ["integration"])
        self.assertEqual(numbers(rep, "integration"), (3, 3, 0, 0, 1))
        self.assertTrue(rep.ok)

    def test_skipped_names_each_skip_with_its_reason(self):
        rep = count([Entry("system.faults_test", PASSED, output=PY_SKIPPED)], ["integration"],
                    allow={"faults_test.Faults.test_b": "redis kill needs root; realnode runs it"})
        self.assertEqual(numbers(rep, "integration"), (4, 2, 0, 2, 1))
        self.assertEqual([(s.test, r) for s, r in rep.allowed],
                         [("faults_test.Faults.test_b", "redis kill needs root; realnode runs it")])
        self.assertEqual([(s.test, s.reason) for s in rep.not_allowed],
                         [("faults_test.Faults.test_c", "no IPv6 on this host")])
        self.assertFalse(rep.ok)

    def test_failed(self):
        rep = count([Entry("system.security_test", FAILED, output=PY_FAILED)], ["integration"])
        self.assertEqual(numbers(rep, "integration"), (5, 2, 2, 1, 1))
        self.assertEqual([s.test for s in rep.not_allowed], ["security_test.Tls.test_d"])
        self.assertFalse(rep.ok)

    def test_a_file_with_no_tests_ran_nothing(self):
        rep = count([Entry("system.empty_test", PASSED, output=PY_NOTHING)], ["integration"])
        self.assertEqual(rep.ran_nothing, ["system.empty_test (unittest: 0 tests)"])
        self.assertFalse(rep.ok)

    def test_a_skip_that_names_no_test_has_the_entry_name(self):
        rep = count([Entry("system.vramctl_test", PASSED, output=PY_CLASS_SKIP)], ["integration"])
        self.assertEqual([(s.test, s.reason) for s in rep.not_allowed],
                         [("vramctl_test.Cli.test_b", "no krew"), ("system.vramctl_test", "no kubectl")])
        rep = count([Entry("system.vramctl_test", PASSED, output=PY_CLASS_SKIP)], ["integration"],
                    allow={"system.vramctl_test": "kubectl is optional", "vramctl_test.Cli.test_b": "krew too"})
        self.assertTrue(rep.ok)

    def test_ctest_failed_though_the_summary_says_ok(self):
        rep = count([Entry("system.agent_test", FAILED, output=PY_OK + "==123==ERROR: LeakSanitizer\n")],
                    ["integration"])
        self.assertEqual(numbers(rep, "integration"), (4, 3, 1, 0, 1))
        self.assertEqual(rep.disagree, ["system.agent_test"])
        self.assertFalse(rep.ok)


class Uncounted(unittest.TestCase):
    def test_bash_output_counts_as_one_test_with_ctest_status(self):
        rep = count([Entry("deploy.helm", PASSED, output=BASH)], ["deploy"])
        self.assertEqual(numbers(rep, "deploy"), (1, 1, 0, 0, 1))
        self.assertEqual(rep.uncounted, ["deploy.helm"])
        self.assertTrue(rep.ok)
        self.assertTrue(any(x.startswith("  note: 1 CTest entries print no test count") for x in tc.format_report(rep)))
        rep = count([Entry("deploy.helm", FAILED, output=BASH)], ["deploy"])
        self.assertEqual(numbers(rep, "deploy"), (1, 0, 1, 0, 1))
        self.assertFalse(rep.ok)

    def test_output_cut_before_the_summary(self):
        # CTest's default keeps the head: the summary is gone.
        out = PY_SKIPPED[:200] + MARK
        rep = count([Entry("system.faults_test", PASSED, output=out)], ["integration"])
        self.assertEqual(numbers(rep, "integration"), (1, 1, 0, 0, 1))
        self.assertEqual(rep.truncated, ["system.faults_test"])
        self.assertEqual(rep.uncounted, ["system.faults_test"])
        self.assertTrue(any("CTest cut the output of system.faults_test" in x for x in tc.format_report(rep)))

    def test_output_cut_in_the_middle_hides_a_skip(self):
        # --test-output-truncation middle keeps the summary; a skip the cut hid
        # is still counted and, unnamed, not allowed.
        head, tail = PY_SKIPPED.split("test_c ")
        out = head.split("test_b ")[0] + MARK + "test_c " + tail
        rep = count([Entry("system.faults_test", PASSED, output=out)], ["integration"],
                    allow={"faults_test.Faults.test_c": "x"})
        self.assertEqual(numbers(rep, "integration"), (4, 2, 0, 2, 1))
        self.assertEqual([s.test for s, _ in rep.allowed], ["faults_test.Faults.test_c"])
        self.assertEqual([s.test for s in rep.not_allowed], ["system.faults_test"])
        self.assertFalse(rep.ok)

    def test_ctest_level_skip_and_disabled(self):
        rep = count([Entry("deploy.images", SKIPPED, "SKIP_RETURN_CODE=77", "no mmdebstrap\n"),
                     Entry("Old.DISABLED_Case", SKIPPED, "DISABLED (CTest property)", "Disabled")], ["deploy"])
        self.assertEqual(numbers(rep, "deploy"), (2, 0, 0, 2, 2))
        self.assertEqual([(s.test, s.reason) for s in rep.not_allowed],
                         [("deploy.images", "SKIP_RETURN_CODE=77: no mmdebstrap"),
                          ("Old.DISABLED_Case", "DISABLED (CTest property)")])


class Tiers(unittest.TestCase):
    def test_per_tier_and_a_tier_with_no_entries(self):
        entries = [Entry("Ledger.Reserves", PASSED, output=GTEST_PASS),
                   Entry("build.include_rules", PASSED, output="-- 0 stray includes\n"),
                   Entry("system.agent_test", PASSED, output=PY_OK)]
        labels = {"Ledger.Reserves": ["unit"], "build.include_rules": ["unit"], "system.agent_test": ["integration"]}
        rep = tally(entries, labels, ["unit", "integration", "e2e"], {})
        self.assertEqual(numbers(rep, "unit"), (2, 2, 0, 0, 2))
        self.assertEqual(numbers(rep, "integration"), (3, 3, 0, 0, 1))
        self.assertEqual(rep.ran_nothing, ["tier e2e (no CTest entries)"])
        self.assertFalse(rep.ok)
        self.assertEqual(tc.format_report(rep)[:3], [
            "unit: 2 run, 2 passed, 0 failed, 0 skipped (2 CTest entries)",
            "integration: 3 run, 3 passed, 0 failed, 0 skipped (1 CTest entry)",
            "e2e: 0 run, 0 passed, 0 failed, 0 skipped (0 CTest entries)"])


JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="5" failures="2" disabled="0" skipped="2" hostname="" time="1" timestamp="x">
\t<testcase name="Ledger.Reserves" classname="Ledger.Reserves" time="0.01" status="run">
\t\t<system-out>{gtest_pass}</system-out>
\t</testcase>
\t<testcase name="Nvml.RealDriver" classname="Nvml.RealDriver" time="0.01" status="notrun">
\t\t<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
\t\t<system-out>{gtest_skip}</system-out>
\t</testcase>
\t<testcase name="deploy.helm" classname="deploy.helm" time="0.01" status="fail">
\t\t<failure message=""/>
\t\t<system-out>helm: &lt;error&gt;</system-out>
\t</testcase>
\t<testcase name="e2e.scheduling_test" classname="e2e.scheduling_test" time="0" status="notrun">
\t\t<skipped message="Fixture dependency failed"/>
\t\t<system-out>Failed test dependencies: deploy.helm</system-out>
\t</testcase>
\t<testcase name="system.agent_test" classname="system.agent_test" time="1" status="run">
\t\t<system-out>{py_ok}</system-out>
\t</testcase>
</testsuite>
"""

TESTS_JSON = """{"kind": "ctestInfo", "tests": [
 {"name": "Ledger.Reserves", "properties": [{"name": "LABELS", "value": ["unit"]}]},
 {"name": "Nvml.RealDriver", "properties": [{"name": "LABELS", "value": ["unit"]}]},
 {"name": "deploy.helm", "properties": [{"name": "LABELS", "value": ["deploy"]}]},
 {"name": "e2e.scheduling_test", "properties": [{"name": "LABELS", "value": ["e2e"]}]},
 {"name": "system.agent_test", "properties": [{"name": "TIMEOUT", "value": 600}, {"name": "LABELS", "value": ["integration"]}]}
]}"""


class Files(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name: str, text: str) -> str:
        path = os.path.join(self.dir.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def junit(self) -> str:
        esc = lambda s: s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")  # noqa: E731
        return self.write("junit.xml", JUNIT.format(gtest_pass=esc(GTEST_PASS), gtest_skip=esc(GTEST_SKIP),
                                                    py_ok=esc(PY_OK)))

    def test_read_junit_statuses(self):
        got = {e.name: (e.status, e.message) for e in tc.read_junit(self.junit())}
        self.assertEqual(got, {"Ledger.Reserves": (PASSED, ""),
                               "Nvml.RealDriver": (SKIPPED, "SKIP_REGULAR_EXPRESSION_MATCHED"),
                               "deploy.helm": (FAILED, ""),
                               # a failed fixture is CTest's "notrun", not a skip
                               "e2e.scheduling_test": (FAILED, "Fixture dependency failed"),
                               "system.agent_test": (PASSED, "")})
        self.assertEqual(tc.read_junit(self.junit())[2].output, "helm: <error>")

    def test_allow_list_format(self):
        good = self.write("ok.txt", "# header\n\nNvml.RealDriver\tCI has no GPU\n")
        self.assertEqual(tc.read_allow(good), {"Nvml.RealDriver": "CI has no GPU"})
        for bad in ("Nvml.RealDriver\n", "Nvml.RealDriver  CI has no GPU\n", "Nvml.RealDriver\t \n"):
            with self.subTest(line=bad), self.assertRaises(ValueError):
                tc.read_allow(self.write("bad.txt", bad))

    def run_main(self, allow: str, tiers: str) -> tuple[int, list[str]]:
        args = ["--junit", self.junit(), "--tests-json", self.write("tests.json", TESTS_JSON),
                "--allow", self.write("allow.txt", allow), "--tiers", tiers]
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = tc.main(args)
        return rc, buf.getvalue().splitlines()

    def test_main(self):
        rc, lines = self.run_main("# none\nNvml.RealDriver\tCI has no GPU\n", "unit integration")
        self.assertEqual(rc, 1)  # deploy.helm failed, the e2e entry with it
        self.assertEqual(lines[:4], ["unit: 2 run, 1 passed, 0 failed, 1 skipped (2 CTest entries)",
                                     "integration: 3 run, 3 passed, 0 failed, 0 skipped (1 CTest entry)",
                                     "deploy: 1 run, 0 passed, 1 failed, 0 skipped (1 CTest entry)",
                                     "e2e: 1 run, 0 passed, 1 failed, 0 skipped (1 CTest entry)"])
        self.assertIn("    Nvml.RealDriver [Nvml.RealDriver]: CI has no GPU (the test says: "
                      "no NVIDIA driver on this machine)", lines)

    def test_main_passes_only_when_all_is_counted_clean(self):
        junit = JUNIT.split("\t<testcase name=\"deploy.helm\"")[0] + "</testsuite>\n"
        esc = lambda s: s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")  # noqa: E731
        path = self.write("junit.xml", junit.format(gtest_pass=esc(GTEST_PASS), gtest_skip=esc(GTEST_SKIP)))
        for allow, want in (("Nvml.RealDriver\tCI has no GPU\n", 0), ("# empty\n", 1)):
            with self.subTest(allow=allow):
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    rc = tc.main(["--junit", path, "--tests-json", self.write("tests.json", TESTS_JSON),
                                  "--allow", self.write("allow.txt", allow), "--tiers", "unit"])
                self.assertEqual(rc, want, buf.getvalue())

    def test_main_refuses_a_bad_allow_list(self):
        rc, lines = self.run_main("Nvml.RealDriver no tab\n", "unit")
        self.assertEqual(rc, 2)
        self.assertIn("want 'test-id<TAB>reason'", lines[0])


if __name__ == "__main__":
    unittest.main()
