"""End to end (issue 17): the Pending event of a pod that fits nowhere stays
readable at any cluster size.

kube-scheduler 1.20 (real, tests/e2e/testbed.py) groups identical reasons
only: "0/N nodes are available: <count> <reason>, ...". vramd's filter gives
every node that misses the same way the same text, with the best figure among
them, so the event is a few lines whatever the number of nodes, while
/v1/explain and `vramctl explain` keep each node's own numbers.

The cluster: 20 nodes with one 24Gi GPU (too small), 20 with one 48Gi GPU that
pods fill to different levels (no room now; each node's free memory differs),
and 20 nodes whose GPU capacity vramd does not know.
"""

import json
import os
import subprocess
import sys
import unittest
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import BIN_DIR, SharedTestbed, start_vramd, wait_ledger_nodes  # noqa: E402

SMALL = [f"small-{i:02d}" for i in range(20)]
BIG = [f"big-{i:02d}" for i in range(20)]
BLIND = [f"blind-{i:02d}" for i in range(20)]


class PendingReasons(SharedTestbed):
    @classmethod
    def prepare(cls, tb):
        tb.create_nodes(SMALL, labels={"nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": str(24 * 1024)})
        tb.create_nodes(BIG, labels={"nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": str(48 * 1024)})
        tb.create_nodes(BLIND)
        cls.vramd = start_vramd(tb)
        wait_ledger_nodes(tb, cls.vramd, SMALL + BIG)
        tb.start_scheduler([cls.vramd.url + "/scheduler"])
        # One filler per 48Gi GPU, pinned: 38Gi on the first ten (10Gi free),
        # 40Gi on the other ten (8Gi free).
        for node in BIG:
            tb.api.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {"kubernetes.io/hostname": node}}})
        for i, node in enumerate(BIG):
            tb.create_pod(f"fill-{i:02d}", "38Gi" if i < 10 else "40Gi",
                          extra_spec={"nodeSelector": {"kubernetes.io/hostname": node}})
        for i in range(len(BIG)):
            tb.wait_pod_bound(f"fill-{i:02d}", timeout=60)

    def test_event_of_a_pod_that_fits_nowhere_is_grouped(self):
        tb = self.tb
        tb.create_pod("nowhere", "40Gi")
        grouped = {
            "20 GPU too small for 40Gi (largest: 24Gi)",
            "20 no GPU with 40Gi free (best: 10Gi)",
            "20 no GPU capacity known to vramd",
        }

        def event():
            msgs = tb.pod_events("nowhere", reason="FailedScheduling")
            return msgs[-1] if msgs and all(g in msgs[-1] for g in grouped) else None
        msg = tb.wait_for(event, timeout=60, message="a FailedScheduling event with the grouped reasons")
        print("\nFailedScheduling event:", msg)
        self.assertIsNone(tb.pod_node("nowhere"))
        self.assertIn("0/60 nodes are available", msg)
        # Three groups, each once: no per-node numbers (the 8Gi nodes are in
        # the 10Gi group), and short enough to read on one screen.
        self.assertNotIn("8Gi", msg)
        self.assertNotIn("GPU 0", msg)
        self.assertLess(len(msg), 400, msg)

    def test_explain_keeps_each_nodes_numbers_beside_the_groups(self):
        tb = self.tb
        tb.create_pod("explained", "40Gi", extra_spec={"nodeSelector": {"no-such": "node"}})
        url = self.vramd.url + "/v1/explain?namespace=default&pod=explained"
        with urllib.request.urlopen(url, timeout=10) as r:
            j = json.loads(r.read())
        self.assertEqual(j["fits_on"], 0)
        self.assertEqual({(g["nodes"], g["reason"]) for g in j["reasons"]}, {
            (20, "GPU too small for 40Gi (largest: 24Gi)"),
            (20, "no GPU with 40Gi free (best: 10Gi)"),
        }, "the ledger's nodes only (the 20 without capacity are not in it)")
        rows = {n["node"]: n for n in j["nodes"]}
        self.assertEqual(rows["big-15"]["reason"],
                         "needs 40Gi on 1 GPU; largest free is 8Gi on GPU 0 (capacity 48Gi, allocated 40Gi)")
        self.assertEqual(rows["small-03"]["reason"], "needs 40Gi on 1 GPU; largest GPU capacity is 24Gi (GPU 0)")
        out = subprocess.run([os.path.join(BIN_DIR, "vramctl"), "--server", self.vramd.url, "explain",
                              "default/explained"], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        print("\nvramctl explain (head):\n" + "\n".join(out.stdout.splitlines()[:6]))
        self.assertIn("20 × no GPU with 40Gi free (best: 10Gi)", out.stdout)
        self.assertIn("largest free is 10Gi on GPU 0 (capacity 48Gi, allocated 38Gi)", out.stdout)


if __name__ == "__main__":
    unittest.main()
