"""End to end (issue 11, defect 2): hostile pod annotations and node metadata
against a real kube-apiserver + kube-scheduler and a real Valkey-compatible server.

One bound pod with `vramd.io/gpus: "0"` and `vramd.io/vram-per-gpu:
"9999999999999999999"` (19 digits, past INT64_MAX) used to make the reconcile
thread throw std::out_of_range from std::stoll; nothing caught it, vramd
aborted, and the next leader read the same pod and died too. Here a table of
hostile shapes is put on bound pods (created with spec.nodeName, as another
scheduler or a user would) and on nodes, and vramd must:

- stay up (process alive, /healthz 200), with vramd_thread_errors_total
  exported (and 0: nothing escapes a thread here);
- account a pod whose well-formed placement annotations claim other bytes
  than it requests at its request (issue 30), with a Warning Event;
- skip each malformed object with a Warning Event on it (once per object and
  reason) and count it in vramd_reconcile_malformed_objects{kind};
- keep the ledger sane: the good node's allocation within its capacity,
  malformed placement annotations replaced by the pod's request, invalid
  requests not accounted, hostile nodes absent;
- still answer filter for a normal pod, and kube-scheduler still binds one.

On the code before the fix this test fails: vramd exits (SIGABRT) at its
first reconcile pass after the 19-digit pod appears.
"""

import json
import os
import sys
import time
import unittest
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import GI, SharedTestbed, ledger_nodes, metric_value, start_vramd, wait_ledger_nodes  # noqa: E402
from testbed import Testbed  # noqa: E402

FAST = {"reconcile_interval_ms": 1000, "reservation_grace_ms": 3000,
        "leader_lease_ms": 2000, "kube": {"timeout_ms": 1000}, "node_sync_interval_ms": 1000}

GOOD = "good"  # 1 GPU, 80Gi (GPU Feature Discovery labels)
POD_EVENT = "VramdInvalidVramMetadata"
NODE_EVENT = "VramdInvalidGpuCapacity"


def placement(gpus, per_gpu):
    return {"vramd.io/gpus": gpus, "vramd.io/vram-per-gpu": per_gpu}


# Hostile bound pods: (name, VRAM limit, annotations, what the ledger must hold
# for it afterwards: "request" = an entry of the pod's own request (1Gi on one
# GPU), None = no entry).
HOSTILE_PODS = [
    ("per-gpu-19-digits", "1Gi", placement("0", "9999999999999999999"), "request"),
    ("per-gpu-400-digits", "1Gi", placement("0", "9" * 400), "request"),
    ("per-gpu-2-pow-60", "1Gi", placement("0", str(1 << 60)), "request"),
    ("per-gpu-negative", "1Gi", placement("0", "-1073741824"), "request"),
    ("per-gpu-zero", "1Gi", placement("0", "0"), "request"),
    ("per-gpu-empty", "1Gi", placement("0", ""), "request"),
    ("per-gpu-whitespace", "1Gi", placement("0", " 1073741824"), "request"),
    ("per-gpu-text", "1Gi", placement("0", "lots"), "request"),
    # Well-formed, but not what the pod requests (issue 30): accounted at the request.
    ("per-gpu-1-pib", "1Gi", placement("0", str(1 << 50)), "request"),
    ("per-gpu-below-request", "1Gi", placement("0", "1"), "request"),
    ("per-gpu-missing", "1Gi", {"vramd.io/gpus": "0"}, "request"),
    ("gpus-duplicate", "1Gi", placement("0,0", "1073741824"), "request"),
    ("gpus-huge-index", "1Gi", placement("99999999999999999999", "1073741824"), "request"),
    ("gpus-empty", "1Gi", placement("", "1073741824"), "request"),
    ("gpus-text", "1Gi", placement("all", "1073741824"), "request"),
    ("gpu-count-absurd", "1Gi", {"vramd.io/gpu-count": "99999999999999"}, None),
    ("gpu-count-zero", "1Gi", {"vramd.io/gpu-count": "0"}, None),
    ("peak-past-int64", "1Gi", {"vramd.io/vram-peak": "9999999999999999999"}, None),
    ("request-2pi", "2Pi", {}, None),
]

# Hostile nodes: (name, labels, annotations).
GFD = "nvidia.com/gpu.count", "nvidia.com/gpu.memory"
HOSTILE_NODES = [
    ("cap-1e30", {}, {"vramd.io/capacity": "1e30"}),
    ("cap-negative", {}, {"vramd.io/capacity": "-5Gi"}),
    ("cap-text", {}, {"vramd.io/capacity": "eighty gigabytes"}),
    ("cap-past-int64", {}, {"vramd.io/capacity": "9999999999999999999"}),
    ("cap-sum-overflows", {}, {"vramd.io/capacity": "7Ei,7Ei"}),
    ("gfd-count-absurd", {GFD[0]: "99999999999999", GFD[1]: "8192"}, {}),
    ("gfd-memory-past-int64", {GFD[0]: "1", GFD[1]: "9999999999999999999"}, {}),
    ("gfd-memory-2-pow-40-mib", {GFD[0]: "8", GFD[1]: str(1 << 40)}, {}),
]


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def post_json(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.status, json.loads(r.read())


class HostileMetadata(SharedTestbed):
    @classmethod
    def prepare(cls, tb):
        tb.create_node(GOOD, labels={GFD[0]: "1", GFD[1]: "81920"})
        for name, labels, annotations in HOSTILE_NODES:
            tb.create_node(name, labels=labels, annotations=annotations)
        cls.vramd = start_vramd(tb, config=FAST)
        wait_ledger_nodes(tb, cls.vramd, [GOOD])
        for name, vram, annotations, _ in HOSTILE_PODS:
            tb.create_pod(name, vram, annotations=annotations, node_name=GOOD)
        # Every hostile object reported once the passes after their creation ran.
        tb.wait_for(lambda: cls.malformed("pod") == len(HOSTILE_PODS)
                    and cls.malformed("node") == len(HOSTILE_NODES), 30,
                    message="vramd to count every hostile pod and node as malformed")

    @classmethod
    def malformed(cls, kind):
        cls.vramd.ensure_alive()  # on the old code: "exited with status -6 ... std::out_of_range"
        return metric_value(cls.vramd, "vramd_reconcile_malformed_objects", {"kind": kind})

    def node_events(self, name, reason):
        events = self.tb.api.get("/api/v1/namespaces/default/events",
                                 fieldSelector=f"involvedObject.kind=Node,involvedObject.name={name}")["items"]
        return [e for e in events if e.get("reason") == reason]

    def passes(self):
        return metric_value(self.vramd, "vramd_reconcile_passes_total", {"result": "ok"}) or 0

    def test_1_vramd_stays_up_and_counts_no_escaped_exception(self):
        self.vramd.ensure_alive()
        self.assertEqual(http_status(self.vramd.url + "/healthz"), 200)
        for thread in ("reconcile", "node_sync", "pod_watch", "node_watch", "leader", "epoch_watch",
                       "http_listen"):
            self.assertEqual(metric_value(self.vramd, "vramd_thread_errors_total", {"thread": thread}), 0,
                             thread)
        self.assertEqual(metric_value(self.vramd, "vramd_reconcile_malformed_reports_total", {"kind": "pod"}),
                         len(HOSTILE_PODS))
        self.assertEqual(metric_value(self.vramd, "vramd_reconcile_malformed_reports_total", {"kind": "node"}),
                         len(HOSTILE_NODES))

    def test_2_each_hostile_object_has_one_warning_event(self):
        tb = self.tb
        for name, *_ in HOSTILE_PODS:
            tb.wait_for(lambda: tb.pod_events(name, reason=POD_EVENT), 15,
                        message=f"a {POD_EVENT} event on pod {name}")
        for name, *_ in HOSTILE_NODES:
            tb.wait_for(lambda: self.node_events(name, NODE_EVENT), 15,
                        message=f"a {NODE_EVENT} event on node {name}")
        # Later passes post no more (one Event per object and reason).
        start = self.passes()
        tb.wait_for(lambda: self.passes() >= start + 3, 20, message="three more reconcile passes")
        for name, *_ in HOSTILE_PODS:
            msgs = tb.pod_events(name, reason=POD_EVENT)
            self.assertEqual(len(msgs), 1, f"{name}: {msgs}")
            print(f"\n{name}: {msgs[0]}", end="")
        for name, *_ in HOSTILE_NODES:
            events = self.node_events(name, NODE_EVENT)
            self.assertEqual(len(events), 1, f"{name}: {events}")
            self.assertEqual(events[0]["type"], "Warning")
            print(f"\n{name}: {events[0]['message']}", end="")
        print()
        self.assertIn("9999999999999999999", tb.pod_events("per-gpu-19-digits", reason=POD_EVENT)[0])

    def test_3_the_ledger_stays_sane(self):
        want_entries = {name for name, _, _, want in HOSTILE_PODS if want}
        self.tb.wait_for(lambda: want_entries <= {p["name"] for p in ledger_nodes(self.vramd)[GOOD]["pods"]}, 15,
                         message="the entries of the pods with malformed placement annotations")
        nodes = ledger_nodes(self.vramd)
        for name, *_ in HOSTILE_NODES:
            self.assertNotIn(name, nodes)
        good = nodes[GOOD]
        for gpu in good["gpus"]:
            self.assertLessEqual(gpu["allocated_bytes"], gpu["capacity_bytes"], gpu)
            self.assertGreaterEqual(gpu["allocated_bytes"], 0, gpu)
        entries = {p["name"]: p for p in good["pods"]}
        for name, _, _, want in HOSTILE_PODS:
            if want is None:
                self.assertNotIn(name, entries, "an invalid request must not be accounted")
            else:
                self.assertEqual((entries[name]["gpus"], entries[name]["vram_per_gpu_bytes"]), ([0], GI), name)

    def test_4_filter_and_scheduling_go_on(self):
        tb = self.tb
        body = {"Pod": {"metadata": {"name": "probe", "namespace": "default", "uid": "probe-uid"},
                        "spec": {"containers": [{"name": "c", "resources": {"limits": {"vramd.io/vram": "4Gi"}}}]}},
                "Nodes": None, "NodeNames": [GOOD] + [n for n, *_ in HOSTILE_NODES]}
        status, result = post_json(self.vramd.url + "/scheduler/filter", body)
        self.assertEqual(status, 200)
        self.assertEqual(result["NodeNames"], [GOOD], result)
        tb.start_scheduler([self.vramd.url + "/scheduler"])
        tb.create_pod("normal", "4Gi")
        self.assertEqual(tb.wait_pod_bound("normal", timeout=30), GOOD)
        t0 = time.monotonic()
        tb.wait_for(lambda: any(p["name"] == "normal" for p in ledger_nodes(self.vramd)[GOOD]["pods"]), 10,
                    message="the normal pod's entry")
        for gpu in ledger_nodes(self.vramd)[GOOD]["gpus"]:
            self.assertLessEqual(gpu["allocated_bytes"], gpu["capacity_bytes"], gpu)
        self.vramd.ensure_alive()
        print(f"\nnormal pod bound and in the ledger ({time.monotonic() - t0:.2f} s after binding)")

    def test_5_a_pod_that_skipped_the_scheduler_pins_no_node(self):
        """Issue 30: a pod created with spec.nodeName (it never meets filter or
        bind), 1Mi requested, annotations naming both GPUs at 1 PiB each, on a
        node of 2 x 80Gi. It used to be re-added at the annotated bytes, and a
        normal 20Gi pod then got "no GPU with 20Gi free (best: 0)" for as long
        as it ran. It is accounted at its request, gets a Warning Event, is
        counted, and the normal pod binds."""
        tb = self.tb
        tb.create_node("pinned", labels={GFD[0]: "2", GFD[1]: "81920", "pool": "pinned"})
        wait_ledger_nodes(tb, self.vramd, ["pinned"])
        tb.create_pod("pinner", "1Mi", annotations=placement("0,1", "1125899906842624"), node_name="pinned")

        def entry():
            return next((p for p in ledger_nodes(self.vramd)["pinned"]["pods"] if p["name"] == "pinner"), None)
        tb.wait_for(entry, 15, message="the pinner's entry")
        self.assertEqual(entry()["vram_per_gpu_bytes"], 1 << 20, entry())
        self.assertEqual(len(entry()["gpus"]), 1, entry())
        tb.create_pod("after-pinner", "20Gi", extra_spec={"nodeSelector": {"pool": "pinned"}})
        self.assertEqual(tb.wait_pod_bound("after-pinner", timeout=30), "pinned")
        tb.wait_for(lambda: tb.pod_events("pinner", reason=POD_EVENT), 15, message="a Warning Event on the pinner")
        self.assertIn("accounted at its request", tb.pod_events("pinner", reason=POD_EVENT)[0])
        tb.wait_for(lambda: metric_value(self.vramd, "vramd_reconcile_placement_annotations_overridden") == 3, 15,
                    message="the pinner and the two per-gpu pods counted as overridden")
        for gpu in ledger_nodes(self.vramd)["pinned"]["gpus"]:
            self.assertLessEqual(gpu["allocated_bytes"], gpu["capacity_bytes"], gpu)


if __name__ == "__main__":
    unittest.main()
