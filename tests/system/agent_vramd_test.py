"""vramd-agent and vramd together, every part real but the GPU: the agent
(the real binary, loading the fake NVML through dlopen as it loads the real
libnvidia-ml.so.1, reading a fake /proc) pushes its reports to a real vramd
on a real redis-server, with the API token.

What it proves (issue 14): per-pod usage lands in /v1/nodes, in the metrics
and in `vramctl pods`; a "zombie" process whose pod is gone raises the GPU's
usage U above its allocation A, and filter then refuses a pod that would have
fit on A alone, with a reason that says so; the agent's UUID reaches the
ledger; a report vramd cannot take changes nothing.

The node's GPU is shared by three processes (the pod's, the zombie's, a
host process's), and the whole class runs once per driver family of the
fake NVML (r550, the default, then r535 and r470: see FAMILIES)."""

import json
import os
import re
import signal
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from agent_test import AGENT, FAKE_NVML, FAMILIES, write  # noqa: E402
from harness import BIN_DIR, GI, Workdir, bind_body, clean_env, filter_body, wait_for  # noqa: E402

VRAMCTL = os.path.abspath(os.path.join(BIN_DIR, "vramctl"))
TOKEN = "agent-test-token-0123456789abcdef"
NODE = "ness-linux3"            # 96Gi of capacity on GPU 0 (homelab config)
POD = "3b0e6a52-5c1d-4f7e-9a2b-0c4d8e6f1a27"     # bound through vramd
ZOMBIE = "9f8e7d6c-5b4a-4321-8765-0fedcba98765"  # its pod is gone; the process lives on
GPU_UUID = "GPU-4d1f0e3c-8a2b-4c5d-9e6f-0a1b2c3d4e5f"


def cgroup_v2(uid):
    return ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
            + uid.replace("-", "_") + ".slice/cri-containerd-0a1b2c3d.scope\n")


class AgentBesideVramd(unittest.TestCase):
    """A real vramd-agent pushing to the class's vramd (cls.v, in cls.w): its
    start, its log, its stop with the class, and the node's view. No tests of
    its own (tests/system/enforce_test.py uses it too)."""
    NODE_NAME = NODE

    @classmethod
    def start_agent(cls, args, env):
        cls.agent_log = os.path.join(cls.w.path, "agent.log")
        cls.agent_out = open(cls.agent_log, "ab")
        cls.agent = subprocess.Popen([AGENT, *args], stdout=cls.agent_out, stderr=subprocess.STDOUT,
                                     env=clean_env(env))

    @classmethod
    def wait_agent(cls, pred, message):
        """Waits (20 s at most) for pred(); fails at once, with its log, if the agent exits."""
        def alive_and():
            if cls.agent.poll() is not None:
                raise AssertionError(f"vramd-agent exited {cls.agent.returncode}: {cls.agent_text()}")
            return pred()
        wait_for(alive_and, 20, interval=0.2, message=message)

    @classmethod
    def tearDownClass(cls):
        cls.agent.terminate()
        try:
            cls.agent.wait(10)
        except subprocess.TimeoutExpired:
            cls.agent.kill()
        cls.agent_out.close()
        cls.w.__exit__(None, None, None)

    @classmethod
    def agent_text(cls):
        with open(cls.agent_log, errors="replace") as f:
            return f.read()

    @classmethod
    def node(cls):
        status, body = cls.v.json("GET", f"/v1/nodes/{cls.NODE_NAME}")
        assert status == 200, body
        return body


class AgentDrivesTheLedger(AgentBesideVramd):
    DRIVER = "r550"  # the fake NVML's driver family (subclasses below: the others)
    COMPUTE = [{"pid": 100, "used": 20 * GI}, {"pid": 200, "used": 50 * GI}, {"pid": 300, "used": 1 * GI}]

    @classmethod
    def setUpClass(cls):
        cls.w = Workdir().__enter__()
        # A setUpClass that fails runs no tearDownClass: its redis and vramd
        # would outlive the test (a second __exit__ after tearDownClass is a no-op).
        cls.addClassCleanup(cls.w.__exit__, None, None, None)
        w = cls.w
        redis = w.redis()
        cfg = w.file("config.json", {
            "valkey": {"url": redis.url, "timeout_ms": 300}, "kube": {"enabled": False},
            "node_sync_interval_ms": 500, "usage_max_age_ms": 60000,
            "nodes": [{"name": NODE, "gpus": ["96Gi"]}, {"name": "ness-server2", "gpus": ["8Gi"]}]})
        cls.v = w.vramd(["--config", cfg, "--api-token-file", w.file("token", TOKEN + "\n")])
        # The pod vramd accounts for: 24Gi on GPU 0 of ness-linux3.
        status, body = cls.v.json("POST", "/scheduler/filter", filter_body(POD, "24Gi"))
        assert status == 200 and NODE in body["NodeNames"], body
        status, body = cls.v.json("POST", "/scheduler/bind", bind_body(POD, NODE))
        assert status == 200 and not body.get("Error"), body

        # The node: the pod's process uses 20Gi, a zombie's 50Gi, a host process 1Gi.
        proc = os.path.join(w.path, "proc")
        write(os.path.join(proc, "100", "cgroup"), cgroup_v2(POD))
        write(os.path.join(proc, "200", "cgroup"), cgroup_v2(ZOMBIE))
        write(os.path.join(proc, "300", "cgroup"), "0::/system.slice/nvidia-persistenced.service\n")
        cls.nvml_config = w.file("nvml.json", {"driver": cls.DRIVER, "gpus": [{
            "uuid": GPU_UUID, "name": "NVIDIA H100 80GB HBM3", "total": 100 * GI, "used": 72 * GI,
            "compute": cls.COMPUTE, "graphics": [{"pid": 300, "used": 1 * GI}],
            # The pod's process runs work (a sample stamped at each call), the zombie's does not.
            "samples": [{"pid": 100, "sm": 40}, {"pid": 200}], "utilization": 40}]})
        cls.start_agent(["--node", NODE, "--server", cls.v.url, "--token-file", os.path.join(w.path, "token"),
                         "--interval", "1s", "--source", "nvml", "--nvml-library", FAKE_NVML,
                         "--proc-root", proc, "--sys-root", w.path],
                        {"FAKE_NVML_CONFIG": cls.nvml_config})
        cls.wait_agent(lambda: cls.gpu0().get("usage_fresh") is True, "the agent's first report in /v1/nodes")

    def filter40(self):
        """Filter for a 40Gi pod on NODE: fits on A (24Gi) alone, not on U (72Gi)."""
        status, body = self.v.json("POST", "/scheduler/filter", filter_body(
            "c0ffee00-0000-4000-8000-000000000040", "40Gi", nodes=(NODE,)))
        self.assertEqual(status, 200)
        return body

    @classmethod
    def gpu0(cls):
        return next(g for g in cls.node()["gpus"] if g["index"] == 0)

    def test_the_gpu_carries_the_measured_usage_uuid_and_outside_pods(self):
        g = self.gpu0()
        self.assertEqual(g["used_bytes"], 72 * GI)
        self.assertEqual(g["allocated_bytes"], 24 * GI)
        self.assertEqual(g["reported_total_bytes"], 100 * GI)
        self.assertEqual(g["outside_pods_bytes"], 1 * GI)
        self.assertEqual(g["uuid"], GPU_UUID)

    def test_the_pods_own_usage_lands_on_its_ledger_entry(self):
        entry = next(p for p in self.node()["pods"] if p["uid"] == POD)
        self.assertEqual(entry["used_per_gpu_bytes"], 20 * GI)
        self.assertGreater(entry["usage_reported_ms"], 0)

    def test_the_pods_activity_lands_on_its_ledger_entry(self):
        """Issue 32: NVML's per-process utilization, read by the agent through
        the fake's byte layout, marks the pod active in vramd's ledger."""
        entry = next(p for p in self.node()["pods"] if p["uid"] == POD)
        self.assertIs(entry["active_in_report"], True, entry)

    def test_the_zombie_is_shown_as_untracked(self):
        g = self.gpu0()
        self.assertEqual(g["untracked_bytes"], 50 * GI)
        self.assertEqual(g["untracked_pods"], [{"uid": ZOMBIE, "used_bytes": 50 * GI}])

    def test_metrics_carry_the_pods_usage_and_outside_pods(self):
        status, text = self.v.request("GET", "/metrics")
        self.assertEqual(status, 200)
        line = re.search(r'^vramd_pod_used_bytes\{([^}]*)\} (\S+)$', text, re.M)
        self.assertIsNotNone(line, "no vramd_pod_used_bytes sample")
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.group(1)))
        self.assertEqual(labels, {"namespace": "default", "pod": f"p-{POD}", "node": NODE, "gpu": "0"})
        self.assertEqual(float(line.group(2)), 20 * GI)
        outside = re.search(r'^vramd_gpu_outside_pods_bytes\{[^}]*node="%s"[^}]*\} (\S+)$' % NODE, text, re.M)
        self.assertIsNotNone(outside, "no vramd_gpu_outside_pods_bytes sample for " + NODE)
        self.assertEqual(float(outside.group(1)), 1 * GI)

    def test_vramctl_pods_shows_the_usage(self):
        out = subprocess.run([VRAMCTL, "--server", self.v.url, "pods", NODE], capture_output=True, text=True,
                             timeout=30, env=clean_env())
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = [line.split() for line in out.stdout.splitlines()]
        header = rows[0]
        self.assertIn("USED", header, out.stdout)
        row = next(r for r in rows[1:] if f"default/p-{POD}" in r)
        self.assertEqual(row[header.index("USED")], "20Gi", out.stdout)

    def test_the_zombie_makes_filter_refuse_what_fits_on_allocation_alone(self):
        # A = 24Gi, U = 72Gi, C = 96Gi: 40Gi fits on A (64Gi) but not on U (112Gi).
        # Filter's snapshot takes a usage-only report within a second
        # (docs/configuration.md, "Usage reports").
        filter40 = self.filter40
        wait_for(lambda: filter40()["NodeNames"] == [], 5, interval=0.1, message="filter refusing 40Gi on U")
        body = filter40()
        self.assertEqual(body["NodeNames"], [], body)
        reason = body["FailedNodes"].get(NODE) or body["FailedAndUnresolvableNodes"].get(NODE)
        self.assertIsNotNone(reason, body)
        # Filter's reason is grouped (the event stays short on any cluster) and
        # says that measured usage is what refuses; explain gives the node's numbers.
        self.assertEqual(reason, "no GPU with 40Gi free, measured usage counted (best: 24Gi)")
        pod = filter_body("c0ffee00-0000-4000-8000-000000000040", "40Gi", nodes=(NODE,))["Pod"]
        status, explain = self.v.json("POST", "/v1/explain", pod)
        self.assertEqual(status, 200, explain)
        row = next(n for n in explain["nodes"] if n["node"] == NODE)
        self.assertIn("used 72Gi", row["reason"])
        self.assertIn("allocated 24Gi", row["reason"])
        # ... while 20Gi still fits: the refusal is U, not a full GPU.
        status, body = self.v.json("POST", "/scheduler/filter", filter_body("c0ffee00-0000-4000-8000-000000000020",
                                                                            "20Gi", nodes=(NODE,)))
        self.assertEqual(body["NodeNames"], [NODE], body)

    def test_a_report_vramd_cannot_take_changes_nothing(self):
        # The agent is stopped meanwhile: its next report (every second, the
        # same figures) would otherwise put back what a taken bad report changed.
        self.agent.send_signal(signal.SIGSTOP)
        try:
            before = self.node()
            bad = {"version": 2, "gpus": [{"index": 0, "total_bytes": 10 * GI, "used_bytes": 11 * GI}]}
            status, body = self.v.json("PUT", f"/v1/nodes/{NODE}/usage", bad,
                                       headers={"Authorization": f"Bearer {TOKEN}"})
            self.assertEqual(status, 400, body)
            unknown = {"version": 2, "gpus": [{"index": 0, "total_bytes": 10 * GI, "used_bytes": 1}]}
            status, body = self.v.json("PUT", "/v1/nodes/no-such-node/usage", unknown,
                                       headers={"Authorization": f"Bearer {TOKEN}"})
            self.assertEqual(status, 400, body)
            after = self.node()
        finally:
            self.agent.send_signal(signal.SIGCONT)
        # The node as it was, its last (the agent's) report included: the
        # same figures and the same report time.
        self.assertEqual(after, before)
        self.assertEqual(after["gpus"][0]["reported_total_bytes"], 100 * GI)
        status, body = self.v.json("GET", "/v1/nodes/no-such-node")
        self.assertEqual(status, 404, body)

    def test_the_agent_authenticates_and_is_not_refused(self):
        # The agent's words for a refusal ("HTTP 401", "HTTP 403"), not any
        # "401" (a log line's milliseconds, ".401+00:00", would match that).
        self.assertNotRegex(self.agent_text(), r"HTTP 40[13]\b")


class AgentDrivesTheLedgerR535(AgentDrivesTheLedger):
    DRIVER = "r535"


class AgentDrivesTheLedgerR470(AgentDrivesTheLedger):
    DRIVER = "r470"


class AnInvalidProcessListIsShownNotAttributed(AgentDrivesTheLedger):
    """Issue 31: the driver's list repeats a pid (it fails validation): the
    agent attributes nothing on the GPU and says why, and vramd shows it in
    /v1/nodes and as a metric, so an empty per-pod view is explained. (The
    tests of the class above that need per-pod figures are replaced.) The
    list names all three processes (the pod's twice), so each figure the
    tests expect empty would not be, were the list attributed."""
    COMPUTE = [{"pid": 100, "used": 20 * GI}, {"pid": 200, "used": 50 * GI}, {"pid": 300, "used": 1 * GI},
               {"pid": 100, "used": 1 * GI}]

    def test_the_gpu_carries_the_measured_usage_uuid_and_outside_pods(self):
        g = self.gpu0()
        self.assertEqual(g["used_bytes"], 72 * GI)
        self.assertEqual(g["uuid"], GPU_UUID)
        self.assertEqual(g["outside_pods_bytes"], 0, "nothing is attributed from a refused list")
        self.assertIn("processes_unavailable", g)
        self.assertGreaterEqual(g.get("invalid_process_lists", 0), 1, g)
        print(f"\n/v1/nodes: processes_unavailable: {g['processes_unavailable']!r}, "
              f"invalid_process_lists: {g['invalid_process_lists']}")

    def test_the_pods_own_usage_lands_on_its_ledger_entry(self):
        entry = next(p for p in self.node()["pods"] if p["uid"] == POD)
        self.assertEqual(entry.get("used_per_gpu_bytes", 0), 0, entry)

    def test_the_pods_activity_lands_on_its_ledger_entry(self):
        entry = next(p for p in self.node()["pods"] if p["uid"] == POD)
        self.assertIs(entry["active_in_report"], False, "no per-process figures: no activity either")

    def test_the_zombie_is_shown_as_untracked(self):
        g = self.gpu0()
        self.assertEqual(g["untracked_bytes"], 0)
        self.assertEqual(g["untracked_pods"], [])

    def test_metrics_carry_the_pods_usage_and_outside_pods(self):
        status, text = self.v.request("GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertRegex(text, r'vramd_gpu_processes_unavailable\{node="%s",gpu="0"[^}]*\} 1\n' % NODE)
        self.assertRegex(text, r'vramd_gpu_invalid_process_lists\{node="%s",gpu="0"[^}]*\} [1-9]' % NODE)
        self.assertNotRegex(text, r'vramd_pod_used_bytes\{')

    def test_vramctl_pods_shows_the_usage(self):
        out = subprocess.run([VRAMCTL, "--server", self.v.url, "pods", NODE], capture_output=True, text=True,
                             timeout=30, env=clean_env())
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = [line.split() for line in out.stdout.splitlines()]
        row = next(r for r in rows[1:] if f"default/p-{POD}" in r)
        self.assertEqual(row[rows[0].index("USED")], "-", out.stdout)  # no figure reported for it

    def test_the_zombie_makes_filter_refuse_what_fits_on_allocation_alone(self):
        # U is still the GPU's measured 72Gi: 40Gi fits on A (24Gi) alone, not on U.
        wait_for(lambda: self.filter40()["NodeNames"] == [], 5, interval=0.1, message="filter refusing 40Gi on U")


assert {AgentDrivesTheLedger.DRIVER, AgentDrivesTheLedgerR535.DRIVER, AgentDrivesTheLedgerR470.DRIVER} == set(FAMILIES)


if __name__ == "__main__":
    unittest.main()
