"""End to end (issue 18, point 5): pods scheduled through the Helm chart's own
KubeSchedulerConfiguration.

Every other e2e test runs kube-scheduler with the testbed's configuration
(testbed.scheduler_config); the chart's was only loaded by
tests/deploy/helm_test.sh against an API server that is not there. Here the
configuration the chart renders into the vramd-scheduler ConfigMap (profile
"testbed": v1beta1 for kube-scheduler 1.20, written by helm_test.sh to
$VRAMD_TEST_DEPLOY_OUT/kube-scheduler-config.testbed.json) runs the testbed's
real kube-scheduler, changed only where a cluster differs from the testbed:

- clientConnection.kubeconfig: the testbed's API server (in a cluster:
  in-cluster config);
- the extender urlPrefix's host:port: this test's vramd on 127.0.0.1 (in a
  cluster: the vramd Service); the chart's scheme and path are kept;
- healthzBindAddress/metricsBindAddress: a free loopback port (1.20 binds
  0.0.0.0:10251 otherwise; tests never bind fixed ports).

Verbs, weight, managedResources, nodeCacheCapable, ignorable, httpTimeout,
the profile (schedulerName vramd-scheduler, DefaultPreemption off) and
percentageOfNodesToScore are the chart's. A VRAM pod that opts in with the
chart's schedulerName must be bound by vramd (its annotations on the pod, its
ledger entry), on the node vramd's default policy prefers, and a pod that fits
nowhere must get vramd's reason in its FailedScheduling event.

Issue 18, point 4, end to end: the test runs with VRAMD_RESERVE_PERCENT=50 and
VRAMD_POLICY=binpack in its own environment; the vramd it starts must not see
them (full capacity, headroom placement, no VRAMD_* in /proc/PID/environ).
"""

import copy
import json
import os
import sys
import unittest
import urllib.parse
from unittest import mock

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import GI, ledger_nodes, start_vramd, wait_ledger_nodes  # noqa: E402
from testbed import Testbed, free_port  # noqa: E402

CHART_CONFIG = "kube-scheduler-config.testbed.json"
# A developer's shell; none of it may reach the vramd under test.
CALLER_ENV = {"VRAMD_RESERVE_PERCENT": "50", "VRAMD_POLICY": "binpack"}
GFD = "nvidia.com/gpu.count", "nvidia.com/gpu.memory"
BIG, SMALL = "big", "small"  # 80Gi and 24Gi, one GPU each


def chart_scheduler_config() -> dict:
    """The chart's rendered KubeSchedulerConfiguration (helm_test.sh's output)."""
    out = os.environ.get("VRAMD_TEST_DEPLOY_OUT")
    path = os.path.join(out or "", CHART_CONFIG)
    if not out or not os.path.isfile(path):
        raise RuntimeError(f"VRAMD_TEST_DEPLOY_OUT/{CHART_CONFIG} is missing: run "
                           "tests/deploy/helm_test.sh DIR first and set VRAMD_TEST_DEPLOY_OUT=DIR "
                           "(ctest does this through the deploy_out fixture)")
    with open(path) as f:
        return json.load(f)


def for_testbed(chart: dict, kubeconfig: str, vramd_url: str, health: str) -> dict:
    """The chart's configuration with only the cluster-specific parts replaced."""
    cfg = copy.deepcopy(chart)
    cfg["clientConnection"] = {"kubeconfig": kubeconfig}
    cfg["healthzBindAddress"] = cfg["metricsBindAddress"] = health
    exts = cfg.get("extenders", [])
    if len(exts) != 1:
        raise AssertionError(f"the chart's configuration has {len(exts)} extenders, expected 1: {exts}")
    chart_url = urllib.parse.urlsplit(exts[0]["urlPrefix"])
    ours = urllib.parse.urlsplit(vramd_url)
    exts[0]["urlPrefix"] = urllib.parse.urlunsplit(
        (chart_url.scheme, ours.netloc, chart_url.path, chart_url.query, chart_url.fragment))
    return cfg


class ChartSchedulerConfig(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.chart = chart_scheduler_config()
        cls.env_patch = mock.patch.dict(os.environ, CALLER_ENV)
        cls.env_patch.start()
        cls.tb = Testbed().__enter__()
        try:
            tb = cls.tb
            tb.create_node(BIG, labels={GFD[0]: "1", GFD[1]: "81920"})
            tb.create_node(SMALL, labels={GFD[0]: "1", GFD[1]: "24576"})
            tb.create_node("cpu-only")
            cls.vramd = start_vramd(tb)
            wait_ledger_nodes(tb, cls.vramd, [BIG, SMALL])
            health = f"127.0.0.1:{free_port()}"
            cls.config = for_testbed(cls.chart, tb.write_kubeconfig("chart-scheduler.kubeconfig", tb.admin_token),
                                     cls.vramd.url, health)
            path = tb.write_file("chart-scheduler-config.json", cls.config)
            cls.scheduler_name = cls.config["profiles"][0]["schedulerName"]
            tb.start_scheduler(config_path=path, health_address=health)
        except BaseException:
            print(cls.tb.log_tails(), file=sys.stderr)
            cls.tb.__exit__(None, None, None)
            cls.env_patch.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.tb.__exit__(None, None, None)
        cls.env_patch.stop()

    def test_the_chart_config_is_used_as_rendered(self):
        # Sanity of this test itself: it must run the chart's extender
        # settings, not the testbed's (weight 1, no preemptVerb).
        ext, chart_ext = self.config["extenders"][0], self.chart["extenders"][0]
        self.assertEqual({k: v for k, v in ext.items() if k != "urlPrefix"},
                         {k: v for k, v in chart_ext.items() if k != "urlPrefix"})
        self.assertEqual(urllib.parse.urlsplit(ext["urlPrefix"]).path,
                         urllib.parse.urlsplit(chart_ext["urlPrefix"]).path)
        self.assertEqual(self.config["profiles"], self.chart["profiles"])
        print(f"\nchart extender: {chart_ext['urlPrefix']} -> {ext['urlPrefix']}, weight {ext['weight']}, "
              f"scheduler {self.scheduler_name}")

    def test_vram_pod_is_bound_by_vramd_through_the_chart_config(self):
        tb = self.tb
        tb.create_pod("chart-pod", "8Gi", scheduler_name=self.scheduler_name)
        node = tb.wait_pod_bound("chart-pod", timeout=30)
        # 8Gi fits both GPUs: vramd's default policy (headroom) picks the one
        # with the most headroom; binpack (the caller's VRAMD_POLICY) would
        # pick the 24Gi GPU.
        self.assertEqual(node, BIG, "vramd's default policy prefers the node with the most headroom")
        ann = tb.get_pod("chart-pod")["metadata"].get("annotations", {})
        self.assertEqual(ann.get("vramd.io/gpus"), "0", ann)
        self.assertEqual(ann.get("vramd.io/vram-per-gpu"), str(8 * GI), ann)
        mine = [e for e in ledger_nodes(self.vramd)[BIG]["pods"] if e["name"] == "chart-pod"]
        self.assertEqual(len(mine), 1, mine)
        self.assertEqual(mine[0]["vram_per_gpu_bytes"], 8 * GI)

    def test_pod_that_fits_nowhere_gets_vramds_reason(self):
        tb = self.tb
        tb.create_pod("chart-too-big", "100Gi", scheduler_name=self.scheduler_name)
        want = "GPU too small for 100Gi (largest: 80Gi)"
        tb.wait_for(lambda: any(want in m for m in tb.pod_events("chart-too-big", reason="FailedScheduling")),
                    timeout=30, message="a FailedScheduling event with vramd's reason")
        self.assertIsNone(tb.pod_node("chart-too-big"))

    def test_callers_vramd_variables_do_not_reach_vramd(self):
        self.assertEqual(os.environ.get("VRAMD_POLICY"), "binpack")  # the caller's shell, as set up
        nodes = ledger_nodes(self.vramd)
        self.assertEqual(nodes[BIG]["gpus"][0]["capacity_bytes"], 80 * GI,
                         "VRAMD_RESERVE_PERCENT=50 from the caller reached vramd")
        with open(f"/proc/{self.vramd.pid}/environ", "rb") as f:
            names = sorted(x.split(b"=", 1)[0].decode() for x in f.read().split(b"\0") if x)
        self.assertEqual([n for n in names if n.startswith("VRAMD_")], [], names)


if __name__ == "__main__":
    unittest.main()
