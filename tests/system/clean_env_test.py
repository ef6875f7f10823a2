"""Issue 18, point 4: the vramd under test never inherits the caller's VRAMD_*.

A developer with VRAMD_RESERVE_PERCENT=50 and VRAMD_POLICY=binpack in their
shell (or a CI job that exports them for something else) used to run every
test against a vramd with half the capacity and the other scoring policy:
tests passed or failed for the wrong reason. The harness now starts vramd from
`clean_env()`; this test puts those variables (and an unrelated one) into
its own environment, starts vramd through the harness as every system test
does, and checks that vramd still has the defaults: the full capacity of the
config file, the headroom policy, and nothing of the caller's environment but
the documented passthrough (PATH, HOME, LANG, LC_*, TMPDIR, sanitizer options,
LLVM_PROFILE_FILE). What a test passes explicitly still arrives.

Real vramd (standalone) against a real redis-server.
"""

import os
import sys
import unittest
from unittest import mock

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GI, INHERITED_ENV, Workdir, filter_body, homelab_config  # noqa: E402

# What a developer's shell might hold; each would change what the tests check.
CALLER = {
    "VRAMD_RESERVE_PERCENT": "50",
    "VRAMD_POLICY": "binpack",
    "SOME_UNRELATED_SECRET": "must-not-leak",
}


def process_env(pid):
    """The environment a running process started with (/proc/PID/environ)."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        items = [x for x in f.read().split(b"\0") if x]
    return dict(x.decode(errors="replace").split("=", 1) for x in items)


class CleanEnvironment(unittest.TestCase):
    def test_callers_vramd_variables_do_not_reach_vramd(self):
        with mock.patch.dict(os.environ, CALLER), Workdir() as w:
            redis = w.redis()
            v = w.vramd(["--config", homelab_config(w, redis.url)])
            # Defaults: reserve 0 %, so the config's capacities in full.
            status, body = v.json("GET", "/v1/nodes")
            self.assertEqual(status, 200, body)
            caps = {n["name"]: [g["capacity_bytes"] for g in n["gpus"]] for n in body["nodes"]}
            self.assertEqual(caps, {"ness-linux3": [96 * GI], "ness-server2": [8 * GI]},
                             "VRAMD_RESERVE_PERCENT=50 from the caller reached vramd")

            # Default policy headroom: the 96Gi node scores above the 8Gi one
            # (binpack would prefer the fuller 8Gi node).
            status, scores = v.json("POST", "/scheduler/prioritize", filter_body("clean-env-probe", "4Gi"))
            self.assertEqual(status, 200, scores)
            by_host = {s["Host"]: s["Score"] for s in scores}
            self.assertGreater(by_host["ness-linux3"], by_host["ness-server2"],
                               f"VRAMD_POLICY=binpack from the caller reached vramd: {by_host}")

            # And nothing else of the caller's environment arrives.
            unexpected = sorted(k for k in process_env(v.proc.pid)
                                if k not in INHERITED_ENV and not k.startswith("LC_"))
            self.assertEqual(unexpected, [], "vramd inherited these from the caller")

    def test_variables_a_test_sets_explicitly_arrive(self):
        with mock.patch.dict(os.environ, CALLER), Workdir() as w:
            redis = w.redis()
            v = w.vramd(["--config", homelab_config(w, redis.url)], env={"VRAMD_RESERVE_PERCENT": "25"})
            env = process_env(v.proc.pid)
            self.assertEqual(env.get("VRAMD_RESERVE_PERCENT"), "25")
            self.assertEqual(sorted(k for k in env if k.startswith("VRAMD_")), ["VRAMD_RESERVE_PERCENT"])
            status, body = v.json("GET", "/v1/nodes")
            self.assertEqual(status, 200, body)
            caps = {n["name"]: [g["capacity_bytes"] for g in n["gpus"]] for n in body["nodes"]}
            self.assertEqual(caps["ness-linux3"], [72 * GI])


if __name__ == "__main__":
    unittest.main()
