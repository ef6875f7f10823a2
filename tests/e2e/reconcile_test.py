"""End to end (issue 3): the reconcile loop against a real kube-apiserver +
kube-scheduler and a real Valkey-compatible server.

Scenarios: the phantom-capacity rule, orphan re-add, rebuild after FLUSHALL,
a crash between reserving and binding (vramd SIGKILLed by gdb at the entry of
its Binding call), and two replicas behind one Valkey with a burst of 200 pods.
Timings measured here are printed; the bounds asserted are generous
correctness limits, not performance targets (see docs/operations.md).

Each class has a testbed (API server, Valkey, vramd) of its own, so a test that
loses the store (FLUSHALL) never runs against another's ledger, and each test
passes alone and in any order. Nothing waits a fixed time for something to
settle: the tests wait for the event that proves it (a pod's event, a ledger
state, a reconcile pass), each wait bounded.
"""

import http.client
import http.server
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (SharedTestbed, GI, ledger_nodes, ledger_view, metric_value, start_vramd,  # noqa: E402
                    wait_ledger_nodes, wait_ledger_sealed)
from testbed import Testbed, WaitTimeout, free_port  # noqa: E402

FAST = {"reconcile_interval_ms": 1000, "reservation_grace_ms": 3000,
        "leader_lease_ms": 2000, "kube": {"timeout_ms": 1000}, "node_sync_interval_ms": 1000}
# How long a bind's in-flight mark protects a reservation: 3 API timeouts + 2 s
# (BindInFlightMs in src/config/config.cc).
IN_FLIGHT_MS = 3 * FAST["kube"]["timeout_ms"] + 2000


def gpu_node(tb, name, gib, pool):
    tb.create_node(name, labels={"nvidia.com/gpu.count": "1",
                                 "nvidia.com/gpu.memory": str(gib * 1024), "pool": pool})


def pool_pod(tb, name, vram, pool, **kw):
    return tb.create_pod(name, vram, extra_spec={"nodeSelector": {"pool": pool}}, **kw)


def entry(vramd, node, pod_name):
    for p in ledger_nodes(vramd).get(node, {}).get("pods", []):
        if p["name"] == pod_name:
            return p
    return None


def process_running(pid) -> bool:
    """Not stopped (a process gdb holds after attaching is in state t)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[0] not in ("t", "T")


def reconcile_passes(vramd) -> float:
    return metric_value(vramd, "vramd_reconcile_passes_total", {"result": "ok"}) or 0


class TestbedPerClass(SharedTestbed):
    """One testbed per class: NODES (name -> (GiB, pool)), a vramd with FAST
    and kube-scheduler using it."""
    NODES: dict = {}

    @classmethod
    def prepare(cls, tb):
        for name, (gib, pool) in cls.NODES.items():
            gpu_node(tb, name, gib, pool)
        cls.vramd = start_vramd(tb, config=FAST)
        wait_ledger_nodes(tb, cls.vramd, list(cls.NODES))
        tb.start_scheduler([cls.vramd.url + "/scheduler"])


class Reconcile(TestbedPerClass):
    NODES = {"solo": (8, "solo"), "orph": (16, "orph")}

    def test_phantom_capacity_is_held_until_the_pod_is_gone(self):
        tb = self.tb
        pool_pod(tb, "phantom-a", "6Gi", "solo")
        self.assertEqual(tb.wait_pod_bound("phantom-a"), "solo")
        a_bound = time.monotonic()
        tb.delete_pod("phantom-a", grace=30)  # no kubelet: it stays, terminating
        tb.wait_for(lambda: (entry(self.vramd, "solo", "phantom-a") or {}).get("state") == "terminating",
                    10, message="phantom-a's entry to be marked terminating")
        self.assertEqual(metric_value(self.vramd, "vramd_reconcile_phantom_bytes", {"node": "solo"}), 6 * GI)
        self.assertEqual(metric_value(self.vramd, "vramd_pod_terminating",
                                      {"node": "solo", "namespace": "default", "pod": "phantom-a"}), 1)

        # B must stay Pending as long as A exists. Proof, not a fixed wait:
        # kube-scheduler tried B and vramd refused it for A's held VRAM (the
        # event), and A's entry outlived every timer vramd frees entries by
        # (the stale-reservation grace, the bind's in-flight mark): two
        # reconcile passes counted after both had run out since A's bind (so
        # at least one whole pass ran after it) kept it.
        pool_pod(tb, "phantom-b", "6Gi", "solo")
        hold_start = time.monotonic()

        def b_pending():
            self.assertIsNone(tb.pod_node("phantom-b"), "B was bound while A still held the GPU")
            self.assertIsNotNone(tb.get_pod("phantom-a"))
            return True
        tb.wait_for(lambda: b_pending() and any(" free (best: 2Gi)" in m
                                                for m in tb.pod_events("phantom-b", reason="FailedScheduling")),
                    timeout=30, message="phantom-b's event to explain the held GPU")
        grace_over = a_bound + max(FAST["reservation_grace_ms"], IN_FLIGHT_MS) / 1000
        passes_after_grace = []

        def two_passes_after_grace():
            b_pending()
            if time.monotonic() < grace_over:
                return False
            if not passes_after_grace:
                passes_after_grace.append(reconcile_passes(self.vramd))
            return reconcile_passes(self.vramd) >= passes_after_grace[0] + 2
        tb.wait_for(two_passes_after_grace, timeout=30,
                    message="two reconcile passes after the reservation grace and the in-flight mark")
        self.assertEqual((entry(self.vramd, "solo", "phantom-a") or {}).get("state"), "terminating",
                         "A's entry was freed while A still exists")
        self.assertIsNone(tb.pod_node("phantom-b"), "B was bound while A still held the GPU")

        t0 = time.monotonic()
        tb.delete_pod("phantom-a", grace=0)
        tb.wait_for(lambda: tb.get_pod("phantom-a") is None, 10, message="phantom-a to disappear")
        gone = time.monotonic() - t0
        self.assertEqual(tb.wait_pod_bound("phantom-b", timeout=30), "solo")
        bound = time.monotonic() - t0
        print(f"\nphantom: held {time.monotonic() - hold_start:.1f} s while A existed; "
              f"A gone after {gone:.2f} s; B bound {bound:.2f} s after A's final delete")
        self.assertIsNone(entry(self.vramd, "solo", "phantom-a"))
        tb.wait_for(lambda: entry(self.vramd, "solo", "phantom-b")["state"] == "bound", 5,
                    message="phantom-b's entry to be marked bound (bind_mark_window_ms after its bind)")
        self.assertGreaterEqual(metric_value(self.vramd, "vramd_reconcile_released_total",
                                             {"cause": "pod_gone"}), 1)

    def test_orphan_entry_is_readded(self):
        tb = self.tb
        pool_pod(tb, "orphan-c", "4Gi", "orph")
        tb.wait_pod_bound("orphan-c")
        uid = tb.get_pod("orphan-c")["metadata"]["uid"]
        tb.wait_for(lambda: entry(self.vramd, "orph", "orphan-c"), 10, message="orphan-c's entry")

        def readded():
            return metric_value(self.vramd, "vramd_reconcile_orphans_readded_total") or 0
        before = readded()
        # Behind vramd's back.
        self.assertEqual(tb.redis_command("HDEL", "vramd:{orph}:alloc", uid), 1)
        tb.redis_command("INCR", "vramd:epoch")
        t0 = time.monotonic()
        # The re-add is counted when it is written: wait for the count, then
        # read the entry (a cached ledger may still show the deleted one).
        e = tb.wait_for(lambda: readded() > before and entry(self.vramd, "orph", "orphan-c"), 10,
                        message="the orphan to be re-added")
        self.assertEqual(e["gpus"], [0])
        self.assertEqual(e["vram_per_gpu_bytes"], 4 * GI)
        self.assertEqual(e["state"], "bound")
        after = readded()
        print(f"\norphan: re-added after {time.monotonic() - t0:.2f} s; "
              f"vramd_reconcile_orphans_readded_total {before:.0f} -> {after:.0f}")
        self.assertEqual(after, before + 1)


def urllib_get(url):
    import urllib.request
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


class Rebuild(TestbedPerClass):
    """FLUSHALL loses the whole store: on a testbed of its own."""
    NODES = {"rb-1": (16, "rb"), "rb-2": (16, "rb")}

    def test_ledger_is_rebuilt_after_flushall(self):
        tb = self.tb
        for i, size in enumerate(["3Gi", "5Gi", "7Gi", "2Gi"]):
            pool_pod(tb, f"rebuild-{i}", size, "rb", gpu_count=None)
        for i in range(4):
            tb.wait_pod_bound(f"rebuild-{i}")
        # Every entry of the four pods, marked bound (reserved -> bound is the
        # bind's second script): the state the rebuild must reproduce.
        tb.wait_for(lambda: sorted(p[3] for v in ledger_view(self.vramd).values() for p in v) == ["bound"] * 4,
                    10, message="four rebuild entries, each bound")
        before = ledger_view(self.vramd)
        self.assertEqual(tb.redis_command("FLUSHALL"), "OK")
        t0 = time.monotonic()
        tb.wait_for(lambda: ledger_view(self.vramd) == before, 15,
                    message="the ledger to be rebuilt as it was")
        rebuilt = time.monotonic() - t0
        wait_ledger_sealed(tb, self.vramd, timeout=15)
        print(f"\nrebuild: ledger equal to before {rebuilt:.2f} s after FLUSHALL, sealed after "
              f"{time.monotonic() - t0:.2f} s (reconcile interval 1 s); orphans re-added total "
              f"{metric_value(self.vramd, 'vramd_reconcile_orphans_readded_total'):.0f}")
        ready = json.loads(urllib_get(self.vramd.url + "/readyz"))
        self.assertTrue(ready["ready"])
        self.assertEqual(ledger_view(self.vramd), before)


class Crash(unittest.TestCase):
    """vramd is SIGKILLed between reserving and creating the Binding."""

    def test_no_reservation_left_behind_and_no_pod_bound_without_one(self):
        with Testbed() as tb:
            gpu_node(tb, "crash", 16, "crash")
            v1 = start_vramd(tb, config=FAST)
            wait_ledger_nodes(tb, v1, ["crash"])
            # Break at the entry of the REST client's Bind: the reservation is
            # written, the Binding not yet sent. Then kill -9.
            # (--batch runs the commands in order; "kill" is SIGKILL for the inferior.)
            # gdb touches `armed` once the breakpoint is set, right before it continues.
            armed = tb.path("gdb-armed")
            gdb = subprocess.Popen(
                ["gdb", "-p", str(v1.pid), "-batch", "-ex", "set pagination off",
                 "-ex", "break vramd::kube::(anonymous namespace)::RestClient::Bind",
                 "-ex", f"shell touch {armed}", "-ex", "continue", "-ex", "kill"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            tb.wait_for(lambda: os.path.exists(armed) or gdb.poll() is not None, 60,
                        message="gdb to set the breakpoint")
            if gdb.poll() is not None:
                self.fail(f"gdb ended early:\n{gdb.communicate()[0][-2000:]}")
            tb.wait_for(lambda: process_running(v1.pid), 10, message="gdb to continue vramd")
            tb.start_scheduler([v1.url + "/scheduler"])
            pool_pod(tb, "crash-d", "4Gi", "crash")
            out, _ = gdb.communicate(timeout=60)
            tb.wait_for(lambda: not v1.alive(), 10, message="vramd to be dead")
            uid = tb.get_pod("crash-d")["metadata"]["uid"]
            alloc = tb.redis_command("HGETALL", "vramd:{crash}:alloc")
            self.assertIn(uid, alloc, f"no reservation at the crash point; gdb said:\n{out[-2000:]}")
            self.assertIsNone(tb.pod_node("crash-d"))
            tb.stop_scheduler()
            t0 = time.monotonic()

            # A fresh replica takes the lease over and reconciles.
            v2 = start_vramd(tb, config=FAST, name="vramd-2")
            tb.wait_for(lambda: uid not in tb.redis_command("HGETALL", "vramd:{crash}:alloc"), 30,
                        message="the stale reservation to be freed")
            freed = time.monotonic() - t0
            self.assertIsNone(tb.pod_node("crash-d"))
            self.assertGreaterEqual(metric_value(v2, "vramd_reconcile_stale_reservations_freed_total"), 1)
            print(f"\ncrash: stale reservation freed {freed:.1f} s after the crash "
                  f"(bind in-flight mark 5 s + grace 3 s + lease takeover 2 s)")

            # Scheduling resumes: the pod is bound with its reservation.
            tb.start_scheduler([v2.url + "/scheduler"])
            self.assertEqual(tb.wait_pod_bound("crash-d", timeout=30), "crash")
            tb.wait_for(lambda: (entry(v2, "crash", "crash-d") or {}).get("state") == "bound", 10,
                        message="crash-d's entry, bound")


class Balancer:
    """A loopback HTTP balancer: each request goes to the next backend."""

    def __init__(self, backends):
        self.backends = backends
        self.counts = {b: 0 for b in backends}
        rr = itertools.cycle(backends)
        lock = threading.Lock()
        bal = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    backend = next(rr)
                    bal.counts[backend] += 1
                host, port = backend.split("//")[1].split(":")
                conn = http.client.HTTPConnection(host, int(port), timeout=10)
                try:
                    conn.request("POST", self.path, body, {"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    data, status = resp.read(), resp.status
                except OSError as e:
                    data, status = json.dumps({"Error": f"balancer: {e}"}).encode(), 502
                finally:
                    conn.close()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


class Replicas(unittest.TestCase):
    def test_two_replicas_burst_of_200_pods(self):
        with Testbed() as tb:
            nodes = [f"rep-{i}" for i in range(4)]
            for n in nodes:
                gpu_node(tb, n, 16, "rep")
            a = start_vramd(tb, config=FAST, name="vramd-a")
            b = start_vramd(tb, config=FAST, name="vramd-b")
            wait_ledger_nodes(tb, a, nodes)
            bal = Balancer([a.url, b.url])
            try:
                tb.start_scheduler([bal.url + "/scheduler"])
                sizes = {"1Gi": GI, "2Gi": 2 * GI, "3Gi": 3 * GI, "4Gi": 4 * GI, "1536Mi": 1536 << 20}
                order = list(sizes)
                names = [f"burst-{i:03d}" for i in range(200)]
                size_of = {names[i]: sizes[order[i % len(order)]] for i in range(200)}
                t0 = time.monotonic()
                with ThreadPoolExecutor(8) as ex:
                    list(ex.map(lambda i: pool_pod(tb, names[i], order[i % len(order)], "rep"), range(200)))
                created = time.monotonic() - t0
                cap = 16 * GI  # one 16 GiB GPU per node (the labels above; no reserve configured)
                for n in nodes:
                    self.assertEqual([g["capacity_bytes"] for g in ledger_nodes(a)[n]["gpus"]], [cap], n)

                def per_gpu(bound):
                    """(node, GPU) -> bytes, summed from the bound pods' annotations."""
                    sums = {(n, 0): 0 for n in nodes}
                    for p in bound.values():
                        ann = p["metadata"].get("annotations", {})
                        self.assertIn("vramd.io/gpus", ann,
                                      f"{p['metadata']['name']} bound without vramd's annotations")
                        self.assertEqual(int(ann["vramd.io/vram-per-gpu"]), size_of[p["metadata"]["name"]])
                        for g in ann["vramd.io/gpus"].split(","):
                            sums[(p["spec"]["nodeName"], int(g))] += int(ann["vramd.io/vram-per-gpu"])
                    for gpu, used in sums.items():
                        self.assertLessEqual(used, cap, f"GPU {gpu} overbooked: {used / GI} GiB of 16")
                    return sums

                def refused(p):
                    return any(c["type"] == "PodScheduled" and c["status"] == "False"
                               for c in p.get("status", {}).get("conditions", []))

                def settled():
                    """The burst is over once (1) every GPU is full: its free VRAM, from the
                    annotations, is below the smallest pending pod, so capacity decides how
                    many bind; (2) kube-scheduler has refused every pending pod at least
                    once; (3) both replicas' ledgers equal the annotations (no entry
                    without a bound pod, every entry bound); (4) the leader has seen each
                    pod modified (bound, or refused). Overbooking fails at once."""
                    pods = {p["metadata"]["uid"]: p for p in tb.list_pods()
                            if p["metadata"]["name"].startswith("burst-")}
                    bound = {u: p for u, p in pods.items() if p["spec"].get("nodeName")}
                    pending = [p for u, p in pods.items() if u not in bound]
                    sums = per_gpu(bound)
                    smallest = min((size_of[p["metadata"]["name"]] for p in pending), default=cap + 1)
                    free = {gpu: (cap - used) / GI for gpu, used in sums.items() if cap - used >= smallest}
                    if free:
                        why[0] = (f"{len(bound)} bound; GiB free where the smallest pending pod "
                                  f"({smallest / GI} GiB) fits: {free}")
                        return None
                    if not all(map(refused, pending)):
                        why[0] = f"{sum(1 for p in pending if not refused(p))} pending pods not yet refused"
                        return None
                    want = {u: (p["spec"]["nodeName"], [0], size_of[p["metadata"]["name"]], "bound")
                            for u, p in bound.items()}
                    for v in (a, b):
                        ledger = ledger_nodes(v)
                        got = {e["uid"]: (n, e["gpus"], e["vram_per_gpu_bytes"], e["state"])
                               for n in nodes for e in ledger[n]["pods"]}
                        if got != want:
                            why[0] = (f"{v.name}'s ledger differs from the annotations: "
                                      f"{len(set(got) - set(want))} entries without a bound pod, "
                                      f"{len(set(want) - set(got))} bound pods without an entry, "
                                      f"{sum(1 for u in set(got) & set(want) if got[u] != want[u])} unequal")
                            return None
                    events = max((metric_value(v, "vramd_watch_events_total", {"type": "modified"}) or 0)
                                 for v in (a, b))
                    if events < len(pods):
                        why[0] = f"the leader has seen {events:.0f} pod modifications"
                        return None
                    return pods, bound, sums, ledger, smallest
                why = ["not checked yet"]
                try:
                    pods, bound, sums, ledger, smallest = tb.wait_for(settled, timeout=180, interval=0.5)
                except WaitTimeout:
                    self.fail(f"the burst did not settle (every GPU full, the ledger equal to the "
                              f"annotations) in 180 s: {why[0]}")
                settled_after = time.monotonic() - t0
                # Capacity decides: every GPU holds more than 16 GiB minus the
                # smallest pending pod (1 GiB), so at least
                # ceil((16 GiB - 1 GiB + 1) / 4 GiB) = 4 pods per GPU are bound.
                min_bound = len(nodes) * math.ceil((cap - smallest + 1) / max(sizes.values()))
                self.assertGreaterEqual(len(bound), min_bound)
                for n in nodes:
                    self.assertLessEqual(ledger[n]["allocated_bytes"], ledger[n]["capacity_bytes"], n)
                    self.assertEqual(ledger[n]["allocated_bytes"], sums[(n, 0)], n)
                for p in bound.values():
                    self.assertEqual(p["metadata"]["annotations"]["vramd.io/gpus"], "0")
                passes = [metric_value(v, "vramd_reconcile_passes_total", {"result": "ok"}) or 0 for v in (a, b)]
                self.assertEqual(sum(1 for p in passes if p > 0), 1, f"reconcile passes per replica: {passes}")
                # The leader's passes are coalesced: a burst of watch events is one pass
                # per reconcile_min_gap_ms, not one per event, and a pass reads the node
                # watch's copy instead of listing the nodes.
                leader = (a, b)[0 if passes[0] > 0 else 1]
                events = metric_value(leader, "vramd_watch_events_total", {"type": "modified"}) or 0
                lists = metric_value(leader, "vramd_node_sync_lists_total") or 0
                # Each pod was modified at least once (bound, or marked unschedulable).
                self.assertGreaterEqual(events, len(pods), "the burst's pod events did not reach the leader")
                self.assertLess(max(passes), events / 3, f"{max(passes)} reconcile passes for {events} pod events")
                # The leader's own binds were in its cached ledger when their events
                # came: they asked for no pass (vramd_watch_binds_accounted_total). The
                # other replica's reach its cache later (those bring a pass).
                accounted = metric_value(leader, "vramd_watch_binds_accounted_total") or 0
                self.assertGreater(accounted, 0, "no bind was taken as accounted by the ledger")
                self.assertLessEqual(accounted, len(bound))
                self.assertLessEqual(lists, 2, f"capacity sync listed the nodes {lists} times in {max(passes)} passes")
                self.assertTrue(all(c > 0 for c in bal.counts.values()), bal.counts)
                alloc = {n: ledger[n]["allocated_bytes"] / GI for n in nodes}
                print(f"\nreplicas: 200 pods created in {created:.1f} s, settled after {settled_after:.1f} s; "
                      f"{len(bound)} bound (at least {min_bound}), "
                      f"{len(pods) - len(bound)} pending; allocation GiB per node {alloc} (capacity 16); "
                      f"requests per replica {list(bal.counts.values())}; reconcile passes {passes} "
                      f"for {events:.0f} pod events ({accounted:.0f} binds accounted); node lists by capacity sync "
                      f"{lists:.0f}")
            finally:
                bal.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
