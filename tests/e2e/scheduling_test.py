"""End to end (issue 2): kube-scheduler 1.20 with vramd as its extender.

Real kube-apiserver + kube-scheduler + etcd (tests/e2e/testbed.py), a real
Valkey-compatible server, and vramd running with a ServiceAccount token bound
by the Helm chart's rendered ClusterRole/ClusterRoleBinding (least privilege). Nodes carry GPU Feature Discovery labels.
"""

import os
import subprocess
import sys
import unittest
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (GI, SharedTestbed, chart_service_account_token, create_homelab, ledger_nodes,  # noqa: E402
                    start_vramd, wait_ledger_nodes)
from testbed import Testbed  # noqa: E402


class Scheduling(SharedTestbed):
    @classmethod
    def prepare(cls, tb):
        # ness-server2 is also the "only GPU" pool for the race tests.
        create_homelab(tb, extra_labels={"ness-server2": {"pool": "only"}})
        # vramd runs as the chart's ServiceAccount with the chart's RBAC:
        # proves its permissions are sufficient (and the chart test
        # proves they are no broader than the verbs vramd uses).
        cls.vramd = start_vramd(tb, token_file=chart_service_account_token(tb))
        wait_ledger_nodes(tb, cls.vramd, ["ness-linux3", "ness-server2", "ness-legion1"])
        tb.start_scheduler([cls.vramd.url + "/scheduler"])

    def test_capacities_come_from_gfd_labels(self):
        nodes = ledger_nodes(self.vramd)
        self.assertEqual(nodes["ness-linux3"]["capacity_bytes"], 96 * GI)
        self.assertEqual(nodes["ness-server2"]["gpus"][0]["capacity_bytes"], 8 * GI)
        self.assertNotIn("cpu-only", nodes)

    def test_pod_is_bound_where_it_fits_with_annotations(self):
        self.tb.create_pod("devstral-small", "54Gi", model="devstral-small")
        node = self.tb.wait_pod_bound("devstral-small", timeout=30)
        self.assertEqual(node, "ness-linux3")  # the only GPU with 54Gi
        ann = self.tb.get_pod("devstral-small")["metadata"]["annotations"]
        self.assertEqual(ann["vramd.io/gpus"], "0")
        self.assertEqual(ann["vramd.io/vram-per-gpu"], str(54 * GI))
        def mine():
            return [e for e in ledger_nodes(self.vramd)["ness-linux3"]["pods"] if e["name"] == "devstral-small"]
        # Held from the moment the pod is bound: reserved until the bound
        # marker's batch (bind_mark_window_ms, 20 ms) marks it bound.
        now = mine()
        self.assertEqual(len(now), 1)
        self.assertIn(now[0]["state"], ("reserved", "bound"))
        self.assertEqual(now[0]["vram_per_gpu_bytes"], 54 * GI)
        self.tb.wait_for(lambda: mine()[0]["state"] == "bound", 5, message="the entry to be marked bound")

    def test_pod_that_fits_nowhere_stays_pending_with_vramds_reason(self):
        self.tb.create_pod("too-big", "200Gi")
        want = "GPU too small for 200Gi (largest: 96Gi)"
        self.tb.wait_for(
            lambda: any(want in m for m in self.tb.pod_events("too-big", reason="FailedScheduling")),
            timeout=30, message="a FailedScheduling event with vramd's reason")
        self.assertIsNone(self.tb.pod_node("too-big"))
        msgs = self.tb.pod_events("too-big", reason="FailedScheduling")
        print("\nFailedScheduling event:", msgs[-1])

    def refused_for_a_full_gpu(self, name, free="2Gi"):
        """kube-scheduler's FailedScheduling event for `name` carries vramd's
        refusal for a full GPU: the proof that the pod was tried and refused
        (instead of waiting a while and finding it still unbound)."""
        return any(f" free (best: {free})" in m for m in self.tb.pod_events(name, reason="FailedScheduling"))

    def test_two_pods_that_cannot_both_fit_on_the_only_gpu(self):
        # Both may only go to the pool "only" (ness-server2, 8Gi): one fits.
        names = ("race-a", "race-b")
        for name in names:
            self.tb.create_pod(name, "6Gi", extra_spec={"nodeSelector": {"pool": "only"}})

        def one_bound_one_refused():
            bound = [n for n in names if self.tb.pod_node(n)]
            self.assertLessEqual(len(bound), 1, f"both bound to one 8Gi GPU: {bound}")
            return len(bound) == 1 and self.refused_for_a_full_gpu(({*names} - {*bound}).pop())
        self.tb.wait_for(one_bound_one_refused, timeout=30,
                         message="one pod bound and the other refused for the full GPU")
        bound = [n for n in names if self.tb.pod_node(n)]
        self.assertEqual(len(bound), 1, f"bound: {bound}")
        self.assertEqual(ledger_nodes(self.vramd)["ness-server2"]["allocated_bytes"], 6 * GI)

    def test_burst_of_pods_never_overbooks_a_gpu(self):
        # 12 pods × 3Gi on an 8Gi GPU (another pool label keeps them on legion1).
        self.tb.api.patch("/api/v1/nodes/ness-legion1", {"metadata": {"labels": {"pool": "burst"}}})
        names = [f"burst-{i}" for i in range(12)]
        for n in names:
            self.tb.create_pod(n, "3Gi", extra_spec={"nodeSelector": {"pool": "burst"}})
        # Two fit (6Gi of 8Gi); each of the other ten must have been refused for
        # the full GPU (its event), not merely be unbound after a while.
        def two_bound_ten_refused():
            bound = [n for n in names if self.tb.pod_node(n)]
            self.assertLessEqual(len(bound), 2, f"bound: {bound}")
            return len(bound) == 2 and all(self.refused_for_a_full_gpu(n) for n in names if n not in bound)
        self.tb.wait_for(two_bound_ten_refused, timeout=60, interval=0.5,
                         message="two burst pods bound and the ten others refused for the full GPU")
        bound = [n for n in names if self.tb.pod_node(n)]
        self.assertEqual(len(bound), 2, f"bound: {bound}")
        node = ledger_nodes(self.vramd)["ness-legion1"]
        self.assertLessEqual(node["allocated_bytes"], node["capacity_bytes"])
        self.assertEqual(node["allocated_bytes"], 6 * GI)
        self.assertEqual(sorted(p["name"] for p in node["pods"]), sorted(bound))


    def test_every_metric_the_chart_uses_is_exported(self):
        # The PrometheusRule and the Grafana dashboard name these metrics
        # (tests/deploy/metrics-used.txt, kept in sync by tests/deploy/helm_test.sh).
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy")
        out = subprocess.run([sys.executable, os.path.join(root, "check_metrics_used.py"),
                              self.vramd.url + "/metrics"], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        print("\n" + out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "")
        # And the exposition format is valid (promtool, from Debian's prometheus package).
        with urllib.request.urlopen(self.vramd.url + "/metrics", timeout=5) as r:
            text = r.read()
        lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=60)
        self.assertEqual(lint.returncode, 0, lint.stdout.decode() + lint.stderr.decode())

    def test_node_changes_reach_the_ledger(self):
        tb = self.tb
        tb.create_node("late-gpu", labels={"nvidia.com/gpu.count": "2", "nvidia.com/gpu.memory": "24576"})
        tb.wait_for(lambda: ledger_nodes(self.vramd).get("late-gpu", {}).get("capacity_bytes") == 48 * GI, 15,
                    message="the new node in the ledger")
        tb.api.patch("/api/v1/nodes/late-gpu", {"metadata": {"annotations": {"vramd.io/capacity": "40Gi,40Gi,40Gi"}}})
        tb.wait_for(lambda: ledger_nodes(self.vramd)["late-gpu"]["capacity_bytes"] == 120 * GI, 15,
                    message="the annotation to override the labels")
        tb.delete_node("late-gpu")
        tb.wait_for(lambda: "late-gpu" not in ledger_nodes(self.vramd), 15, message="the node to leave the ledger")


if __name__ == "__main__":
    unittest.main(verbosity=2)
