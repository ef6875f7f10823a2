"""End to end (issue 30): a store that comes back older while every vramd
replica restarts never double-books a GPU.

The scenario as a user meets it: the real kube-scheduler binds through two
vramd replicas (a round-robin balancer in front of them) onto 4 nodes x 1 GPU
of 24Gi. 8 pods of 6Gi are bound; the store is saved (SAVE); 8 more are bound
(the cluster is full, 96 of 96Gi). Then the store is restarted from that older
snapshot (the seal is there, 8 of the 16 entries, an older epoch) and both
replicas restart with it (no memory of a higher epoch), on the same ports
behind the same balancer; the old leader's lease, restored with the snapshot,
has to run out before one of them leads. 8 more pods of 6Gi are created at
once. None of them may be bound: every GPU is full, whatever the restored
ledger says. Proof that they met the complete ledger, not a rebuild: each ends
Pending with kube-scheduler's message naming the lack of free VRAM.
"""

import json
import os
import signal
import sys
import time
import unittest
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import GI, VRAMD, grant_vramd_rules, ledger_nodes, ledger_sealed, wait_ledger_nodes  # noqa: E402
from reconcile_test import Balancer  # noqa: E402
from testbed import Testbed, free_port  # noqa: E402

CONFIG = {"node_sync_interval_ms": 500, "reconcile_interval_ms": 1000, "reservation_grace_ms": 3000,
          "rebuild_quiet_ms": 1000, "leader_lease_ms": 4000, "kube": {"timeout_ms": 1000}}
NODES = [f"rs-{i}" for i in range(4)]
GPU_GIB, POD_GIB = 24, 6


def start_replica(tb, port, name):
    """vramd on a given port (a restarted replica keeps its address)."""
    path = tb.write_file(f"vramd-{name}.json", json.dumps(CONFIG))
    proc = tb.start_vramd(VRAMD, tb.vramd_args(port, path), name=name)
    proc.port = port
    return proc


class StoreRestoredOlder(unittest.TestCase):
    def test_older_store_and_restarted_replicas_bind_nothing_onto_full_gpus(self):
        with Testbed() as tb:
            grant_vramd_rules(tb)
            tb.start_redis()
            for n in NODES:
                tb.create_node(n, labels={"nvidia.com/gpu.count": "1",
                                          "nvidia.com/gpu.memory": str(GPU_GIB * 1024), "pool": "rs"})
            ports = [free_port(), free_port()]
            a = start_replica(tb, ports[0], "vramd-a")
            b = start_replica(tb, ports[1], "vramd-b")
            wait_ledger_nodes(tb, a, NODES)
            tb.wait_for(lambda: ledger_sealed(a), 30, message="the new ledger to be sealed")
            bal = Balancer([a.url, b.url])
            try:
                tb.start_scheduler([bal.url + "/scheduler"])
                self._scenario(tb, ports)
            finally:
                bal.close()

    def _scenario(self, tb, ports):
        def create(names):
            with ThreadPoolExecutor(8) as ex:
                list(ex.map(lambda n: tb.create_pod(n, f"{POD_GIB}Gi", extra_spec={"nodeSelector": {"pool": "rs"}}),
                            names))

        def bound(prefix):
            return [p for p in tb.list_pods() if p["metadata"]["name"].startswith(prefix)
                    and p["spec"].get("nodeName")]

        create([f"first-{i}" for i in range(8)])
        tb.wait_for(lambda: len(bound("first-")) == 8, 60, message="the first 8 pods to be bound")
        self.assertEqual(tb.redis_command("SAVE"), "OK")
        create([f"second-{i}" for i in range(8)])
        tb.wait_for(lambda: len(bound("second-")) == 8, 60, message="the second 8 pods to be bound (96 of 96Gi)")

        # Everything restarts: the store from the older snapshot, both replicas.
        for name in ("vramd-a", "vramd-b"):
            tb.procs[name].stop(sig=signal.SIGKILL)
        tb.restart_redis()
        restored = tb.redis_command("HLEN", "vramd:pods")
        a = start_replica(tb, ports[0], "vramd-a")
        b = start_replica(tb, ports[1], "vramd-b")
        t0 = time.monotonic()
        create([f"third-{i}" for i in range(8)])

        # Each third pod is refused by the complete ledger: kube-scheduler's
        # own message says there is no GPU with 6Gi free (not "being rebuilt").
        def refused_for_room():
            pods = [p for p in tb.list_pods() if p["metadata"]["name"].startswith("third-")]
            if len(pods) != 8 or any(p["spec"].get("nodeName") for p in pods):
                return len(pods) == 8 and "bound"
            msgs = [next((c.get("message", "") for c in p.get("status", {}).get("conditions", [])
                          if c.get("type") == "PodScheduled"), "") for p in pods]
            return all("free" in m and "being rebuilt" not in m for m in msgs)
        tb.wait_for(lambda: refused_for_room() is not False, 90,
                    message="every third pod to be refused by the complete ledger")
        took = time.monotonic() - t0
        third = bound("third-")
        promised = defaultdict(int)
        for p in bound(""):
            ann = p["metadata"]["annotations"]
            for g in ann["vramd.io/gpus"].split(","):
                promised[(p["spec"]["nodeName"], int(g))] += int(ann["vramd.io/vram-per-gpu"])
        over = {k: v / GI for k, v in promised.items() if v > GPU_GIB * GI}
        print(f"\nstore restore: {restored} of 16 entries in the snapshot; after the restart "
              f"{len(third)} of 8 new pods bound; every one refused for room {took:.1f} s after creation; "
              f"most promised on one GPU {max(promised.values()) / GI:.0f} GiB of {GPU_GIB}")
        self.assertEqual([p["metadata"]["name"] for p in third], [], "pods bound onto full GPUs")
        self.assertEqual(over, {}, "GPUs double-booked (GiB promised)")
        self.assertEqual(restored, 8, "the snapshot must hold the first 8 entries only")
        # The rebuilt ledger holds all 16 bound pods.
        want = {p["metadata"]["uid"] for p in bound("")}
        self.assertEqual(len(want), 16)
        tb.wait_for(lambda: ledger_sealed(a) and {e["uid"] for n in NODES
                                                  for e in ledger_nodes(a).get(n, {}).get("pods", [])} == want,
                    20, message="the rebuilt ledger to hold every bound pod")
        self.assertTrue(b.alive())


if __name__ == "__main__":
    unittest.main(verbosity=2)
