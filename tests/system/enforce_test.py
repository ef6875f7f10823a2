"""Issue 34 part B: the granted VRAM enforced, end to end with every part real
but the GPU and the kernel's cgroup files. A real vramd (enforce.mode from its
config) on a real redis-server answers each report of the real vramd-agent
(loading the fake NVML through dlopen) with the pod's limits; the agent finds
the pod's cgroup in a cgroup v2 tree written as the kernel shows it
(cgroup.controllers, dmem.capacity, the kubelet's pod directory with its
dmem.max and dmem.min), writes the limits or says why it cannot, and vramd
shows the outcome in /v1/nodes, `vramctl pods` and the metrics.

Three nodes' worth of platforms, one class each:
  - dmem: a kernel with the dmem controller listing the GPU's region;
  - nvml: no dmem, an R615 driver (fake-nvml-r615: nvmlDeviceSetMemoryLimits_v1);
  - none: no dmem and driver 580 (this project's H100 machine): accounted only,
    with exactly why, never "enforced";
and dry-run, where nothing is written but the report says what would be."""

import os
import re
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from agent_test import FAKE_NVML, write  # noqa: E402
from agent_vramd_test import AgentBesideVramd  # noqa: E402
from harness import BIN_DIR, GI, Workdir, bind_body, clean_env, filter_body, wait_for  # noqa: E402

VRAMCTL = os.path.abspath(os.path.join(BIN_DIR, "vramctl"))
FAKE_NVML_R615 = os.path.abspath(os.path.join(BIN_DIR, "..", "lib", "fake-nvml-r615", "libnvidia-ml.so.1"))
TOKEN = "enforce-test-token-0123456789abcdef"
NODE = "gpu-node-1"
POD = "3b0e6a52-5c1d-4f7e-9a2b-0c4d8e6f1a27"
PCI = "00000000:3B:00.0"         # as NVML writes it
REGION = "nvidia/0000:3b:00.0/vidmem"
POD_CGROUP = ("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
              + POD.replace("-", "_") + ".slice")


class EnforcementEndToEnd(AgentBesideVramd):
    NODE_NAME = NODE
    MODE = "on"
    DMEM = True
    LIBRARY = FAKE_NVML
    DRIVER = "r550"

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
            "usage_max_age_ms": 60000, "enforce": {"mode": cls.MODE},
            "nodes": [{"name": NODE, "gpus": ["80Gi"]}]})
        cls.v = w.vramd(["--config", cfg, "--api-token-file", w.file("token", TOKEN + "\n")])
        # 16Gi per GPU with a 24Gi peak: soft 16Gi, hard 24Gi.
        pod = filter_body(POD, "16Gi", nodes=(NODE,))
        pod["Pod"]["metadata"]["annotations"] = {"vramd.io/vram-peak": "24Gi"}
        status, body = cls.v.json("POST", "/scheduler/filter", pod)
        assert status == 200 and NODE in body["NodeNames"], body
        status, body = cls.v.json("POST", "/scheduler/bind", bind_body(POD, NODE))
        assert status == 200 and not body.get("Error"), body

        proc = os.path.join(w.path, "proc")
        write(os.path.join(proc, "100", "cgroup"), "0::/" + POD_CGROUP + "/cri-containerd-0a1b2c3d.scope\n")
        cls.cg = os.path.join(w.path, "sys", "fs", "cgroup")
        controllers = "cpuset cpu io memory hugetlb pids" + (" rdma misc dmem" if cls.DMEM else "")
        write(os.path.join(cls.cg, "cgroup.controllers"), controllers + "\n")
        write(os.path.join(cls.cg, "cgroup.subtree_control"), "cpu memory pids dmem\n" if cls.DMEM else "cpu memory pids\n")
        if cls.DMEM:
            write(os.path.join(cls.cg, "dmem.capacity"), f"{REGION} 85520809984\n")
            write(os.path.join(cls.cg, POD_CGROUP, "dmem.max"), "")
            write(os.path.join(cls.cg, POD_CGROUP, "dmem.min"), "")
        else:
            os.makedirs(os.path.join(cls.cg, POD_CGROUP), exist_ok=True)
        cls.limits_log = os.path.join(w.path, "nvml-limits.log")
        nvml = w.file("nvml.json", {"driver": cls.DRIVER, "driver_version": "580.159.04" if cls.DRIVER == "r550" else "615.20.01",
                                    "gpus": [{"uuid": "GPU-4d1f0e3c", "name": "NVIDIA H100 80GB HBM3",
                                              "total": 80 * GI, "used": 20 * GI, "pci": PCI,
                                              "compute": [{"pid": 100, "used": 18 * GI}]}]})
        cls.start_agent(["--node", NODE, "--server", cls.v.url, "--token-file", os.path.join(w.path, "token"),
                         "--interval", "300ms", "--source", "nvml", "--nvml-library", cls.LIBRARY,
                         "--proc-root", proc, "--sys-root", os.path.join(w.path, "sys")],
                        {"FAKE_NVML_CONFIG": nvml, "FAKE_NVML_LIMITS_LOG": cls.limits_log})
        cls.wait_agent(lambda: cls.entry().get("enforcement") is not None, "the agent's enforcement in /v1/nodes")

    @classmethod
    def entry(cls):
        return next(p for p in cls.node()["pods"] if p["uid"] == POD)

    def read(self, rel):
        path = os.path.join(self.cg, rel)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return f.read()

    def vramctl_limit(self):
        out = subprocess.run([VRAMCTL, "--server", self.v.url, "pods", NODE], capture_output=True, text=True,
                             timeout=30, env=clean_env())
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = [line.split() for line in out.stdout.splitlines()]
        header = rows[0]
        row = next(r for r in rows[1:] if f"default/p-{POD}" in r)
        return row[header.index("LIMIT")]

    def metric_state(self):
        status, text = self.v.request("GET", "/metrics")
        self.assertEqual(status, 200)
        m = re.search(r'^vramd_pod_vram_enforcement\{[^}]*pod="p-%s"[^}]*state="([a-z-]+)"\} 1$' % POD, text, re.M)
        self.assertIsNotNone(m, "no vramd_pod_vram_enforcement sample")
        return m.group(1)


class DmemOn(EnforcementEndToEnd):
    def test_the_pods_limits_are_written_to_its_dmem_files(self):
        self.assertEqual(self.read(POD_CGROUP + "/dmem.max"), f"{REGION} {24 * GI}\n")
        self.assertEqual(self.read(POD_CGROUP + "/dmem.min"), f"{REGION} {16 * GI}\n")

    def test_vramd_shows_the_pod_enforced(self):
        self.assertEqual(self.entry()["enforcement"]["state"], "enforced", self.entry())
        gpu = next(g for g in self.node()["gpus"] if g["index"] == 0)
        self.assertEqual(gpu["enforcement"]["backend"], "dmem")
        self.assertEqual(self.vramctl_limit(), "enforced")
        self.assertEqual(self.metric_state(), "enforced")

    def test_written_once_not_every_pass(self):
        wait_for(lambda: self.agent_text().count("enforce: pod") >= 1, 10, message="the write's log line")
        n = self.v.json("GET", f"/v1/nodes/{NODE}")[1]["gpus"][0]["usage_reported_ms"]
        wait_for(lambda: self.node()["gpus"][0]["usage_reported_ms"] > n, 10, message="another report")
        self.assertEqual(self.read(POD_CGROUP + "/dmem.max").count("\n"), 1, self.read(POD_CGROUP + "/dmem.max"))


class DmemDryRun(EnforcementEndToEnd):
    MODE = "dry-run"

    def test_nothing_is_written_and_the_report_says_what_would_be(self):
        e = self.entry()["enforcement"]
        self.assertEqual(e["state"], "dry-run", e)
        self.assertEqual(e["reason"], f"would set hard 24.00 GiB, soft 16.00 GiB through dmem ({REGION})")
        self.assertEqual(self.read(POD_CGROUP + "/dmem.max"), "")
        self.assertEqual(self.read(POD_CGROUP + "/dmem.min"), "")
        self.assertIn("enforce (dry-run): pod " + POD, self.agent_text())


class NvmlR615On(EnforcementEndToEnd):
    DMEM = False
    LIBRARY = FAKE_NVML_R615
    DRIVER = "r615"

    def test_the_driver_sets_the_limits_for_the_pods_cgroup(self):
        with open(self.limits_log) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines, [f"GPU-4d1f0e3c {16 * GI} {24 * GI} {os.path.join(self.cg, POD_CGROUP)}"])
        self.assertEqual(self.entry()["enforcement"]["state"], "enforced")
        self.assertEqual(next(g for g in self.node()["gpus"] if g["index"] == 0)["enforcement"]["backend"], "nvml")


class NoBackendOn(EnforcementEndToEnd):
    """This project's H100 machine: kernel without dmem, driver 580."""
    DMEM = False

    def test_the_vram_is_accounted_only_and_vramd_says_exactly_why(self):
        e = self.entry()["enforcement"]
        self.assertEqual(e["state"], "accounted", e)
        self.assertEqual(e["summary"],
                         "accounted only: no dmem controller (cgroup v2 controllers: cpuset cpu io memory hugetlb "
                         "pids), driver 580.159.04 older than R615 (NVML has no nvmlDeviceSetMemoryLimits_v1)")
        self.assertEqual(self.vramctl_limit(), "accounted")
        self.assertEqual(self.metric_state(), "accounted")
        self.assertFalse(os.path.exists(self.limits_log))
        self.assertEqual(os.listdir(os.path.join(self.cg, POD_CGROUP)), [])  # nothing written


del EnforcementEndToEnd  # the base class runs only as its platforms above

if __name__ == "__main__":
    unittest.main()
