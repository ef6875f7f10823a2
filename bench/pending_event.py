#!/usr/bin/env python3
"""The Pending event of a pod that fits nowhere on 5,000 nodes (issue 17, item 2).

A real kube-apiserver + kube-scheduler 1.20 (tests/e2e/testbed.py) with
percentageOfNodesToScore 100, so that kube-scheduler asks vramd about every
node; vramd as its extender. The nodes (GPU Feature Discovery labels):

  half      8 x 80Gi GPUs, each with a usage report of 50-76Gi used (the agent's
            PUT /v1/nodes/NODE/usage; nothing allocated): no room now
  3/10      8 x 24Gi GPUs: too small for the pod
  the rest  no GPU labels: no capacity known to vramd

Then one pod of 40Gi. Prints the FailedScheduling event kube-scheduler writes
(its length, and the reasons it groups), filter's answer size for the same
5,000 names, and the head of `vramctl explain`. Bench only: never run by the
test command.

    python3 bench/pending_event.py [--nodes 5000]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.dont_write_bytecode = True

from common import BIN_DIR, start_vramd, wait_ledger_nodes  # noqa: E402
from testbed import Testbed  # noqa: E402

GI = 1 << 30
TOKEN = "bench-pending-event-token-0123456789"


def put_usage(url: str, node: str, used: list[int]) -> None:
    body = {"version": 2, "agent": "bench", "source": "nvml",
            "gpus": [{"index": i, "uuid": f"GPU-{node}-{i}", "total_bytes": 80 * GI, "used_bytes": u,
                      "outside_pods_bytes": u, "pods": []} for i, u in enumerate(used)]}
    req = urllib.request.Request(f"{url}/v1/nodes/{node}/usage", data=json.dumps(body).encode(), method="PUT",
                                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200, r.status


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    a = ap.parse_args()
    n_full, n_small = a.nodes // 2, a.nodes * 3 // 10
    full = [f"full-{i:05d}" for i in range(n_full)]
    small = [f"small-{i:05d}" for i in range(n_small)]
    blind = [f"blind-{i:05d}" for i in range(a.nodes - n_full - n_small)]
    with Testbed() as tb:
        t0 = time.monotonic()
        tb.create_nodes(full, labels={"nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81920"})
        tb.create_nodes(small, labels={"nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "24576"})
        tb.create_nodes(blind)
        print(f"{a.nodes} nodes created in {time.monotonic() - t0:.1f} s", flush=True)
        token = tb.write_file("api-token", TOKEN + "\n")
        vramd = start_vramd(tb, config={"usage_max_age_ms": 3_600_000, "node_sync_interval_ms": 5000,
                                        "reconcile_interval_ms": 5000},
                            extra_args=["--api-token-file", token])
        wait_ledger_nodes(tb, vramd, full + small, timeout=60 + a.nodes / 50)
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futs = [pool.submit(put_usage, vramd.url, node, [(50 + (i + g) % 27) * GI for g in range(8)])
                    for i, node in enumerate(full)]
            for f in futs:
                f.result()
        print(f"{n_full} usage reports in {time.monotonic() - t0:.1f} s", flush=True)
        tb.start_scheduler([vramd.url + "/scheduler"], config_overrides={"percentageOfNodesToScore": 100})
        pod = tb.create_pod("nowhere", "40Gi")
        msgs = tb.wait_for(lambda: tb.pod_events("nowhere", reason="FailedScheduling"), timeout=120, interval=0.5,
                           message="the FailedScheduling event")
        msg = msgs[-1]
        print(f"\nFailedScheduling event ({len(msg)} characters):\n{msg}\n", flush=True)
        # Filter's answer for the same pod and all the names, as kube-scheduler asks.
        names = full + small + blind
        body = json.dumps({"Pod": pod, "NodeNames": names}).encode()
        req = urllib.request.Request(vramd.url + "/scheduler/filter", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            answer = r.read()
        j = json.loads(answer)
        texts = set(j.get("FailedNodes", {}).values()) | set(j.get("FailedAndUnresolvableNodes", {}).values())
        print(f"filter's answer for {len(names)} names: {len(answer)} bytes, {len(texts)} distinct reasons",
              flush=True)
        out = subprocess.run([os.path.join(BIN_DIR, "vramctl"), "--server", vramd.url, "explain", "default/nowhere"],
                             capture_output=True, text=True, timeout=60)
        print("vramctl explain default/nowhere (head):\n" + "\n".join(out.stdout.splitlines()[:8]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
