"""End to end (issue 3): the reconcile loop against a real kube-apiserver +
kube-scheduler and a real Valkey-compatible server.

Scenarios: the phantom-capacity rule, orphan re-add, rebuild after FLUSHALL,
a crash between reserving and binding (vramd SIGKILLed by gdb at the entry of
its Binding call), and two replicas behind one Valkey with a burst of 200 pods.
Timings measured here are printed; the bounds asserted are generous
correctness limits, not performance targets (see docs/operations.md).
"""

import http.client
import http.server
import itertools
import json
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

from common import (GI, VRAMD, ledger_nodes, ledger_view, metric_value,  # noqa: E402
                    start_vramd, wait_ledger_nodes)
from testbed import Testbed, free_port  # noqa: E402

FAST = {"reconcile_interval_ms": 1000, "reservation_grace_ms": 3000,
        "leader_lease_ms": 2000, "kube": {"timeout_ms": 1000}, "node_sync_interval_ms": 1000}


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


class Reconcile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tb = Testbed().__enter__()
        try:
            gpu_node(cls.tb, "solo", 8, "solo")
            gpu_node(cls.tb, "orph", 16, "orph")
            gpu_node(cls.tb, "rb-1", 16, "rb")
            gpu_node(cls.tb, "rb-2", 16, "rb")
            cls.vramd = start_vramd(cls.tb, config=FAST)
            wait_ledger_nodes(cls.tb, cls.vramd, ["solo", "orph", "rb-1", "rb-2"])
            cls.tb.start_scheduler([cls.vramd.url + "/scheduler"])
        except BaseException:
            print(cls.tb.log_tails(), file=sys.stderr)
            cls.tb.__exit__(None, None, None)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.tb.__exit__(None, None, None)

    def test_phantom_capacity_is_held_until_the_pod_is_gone(self):
        tb = self.tb
        pool_pod(tb, "phantom-a", "6Gi", "solo")
        self.assertEqual(tb.wait_pod_bound("phantom-a"), "solo")
        tb.delete_pod("phantom-a", grace=30)  # no kubelet: it stays, terminating
        tb.wait_for(lambda: (entry(self.vramd, "solo", "phantom-a") or {}).get("state") == "terminating",
                    10, message="phantom-a's entry to be marked terminating")
        self.assertEqual(metric_value(self.vramd, "vramd_reconcile_phantom_bytes", {"node": "solo"}), 6 * GI)
        self.assertEqual(metric_value(self.vramd, "vramd_pod_terminating",
                                      {"node": "solo", "namespace": "default", "pod": "phantom-a"}), 1)

        pool_pod(tb, "phantom-b", "6Gi", "solo")
        hold_start = time.monotonic()
        while time.monotonic() - hold_start < 8:  # B must stay Pending the whole time A exists
            self.assertIsNone(tb.pod_node("phantom-b"), "B was bound while A still held the GPU")
            self.assertIsNotNone(tb.get_pod("phantom-a"))
            time.sleep(0.5)
        tb.wait_for(lambda: any("largest free is 2Gi" in m
                                for m in tb.pod_events("phantom-b", reason="FailedScheduling")),
                    timeout=10, message="phantom-b's event to explain the held GPU")

        t0 = time.monotonic()
        tb.delete_pod("phantom-a", grace=0)
        tb.wait_for(lambda: tb.get_pod("phantom-a") is None, 10, message="phantom-a to disappear")
        gone = time.monotonic() - t0
        self.assertEqual(tb.wait_pod_bound("phantom-b", timeout=30), "solo")
        bound = time.monotonic() - t0
        print(f"\nphantom: held {time.monotonic() - hold_start:.1f} s while A existed; "
              f"A gone after {gone:.2f} s; B bound {bound:.2f} s after A's final delete")
        self.assertIsNone(entry(self.vramd, "solo", "phantom-a"))
        self.assertEqual(entry(self.vramd, "solo", "phantom-b")["state"], "bound")
        self.assertGreaterEqual(metric_value(self.vramd, "vramd_reconcile_released_total",
                                             {"cause": "pod_gone"}), 1)

    def test_orphan_entry_is_readded(self):
        tb = self.tb
        pool_pod(tb, "orphan-c", "4Gi", "orph")
        tb.wait_pod_bound("orphan-c")
        uid = tb.get_pod("orphan-c")["metadata"]["uid"]
        tb.wait_for(lambda: entry(self.vramd, "orph", "orphan-c"), 10, message="orphan-c's entry")
        before = metric_value(self.vramd, "vramd_reconcile_orphans_readded_total")
        # Behind vramd's back.
        self.assertEqual(tb.redis_command("HDEL", "vramd:{orph}:alloc", uid), 1)
        tb.redis_command("INCR", "vramd:epoch")
        t0 = time.monotonic()
        tb.wait_for(lambda: entry(self.vramd, "orph", "orphan-c"), 10, message="the orphan to be re-added")
        e = entry(self.vramd, "orph", "orphan-c")
        self.assertEqual(e["gpus"], [0])
        self.assertEqual(e["vram_per_gpu_bytes"], 4 * GI)
        self.assertEqual(e["state"], "bound")
        after = metric_value(self.vramd, "vramd_reconcile_orphans_readded_total")
        print(f"\norphan: re-added after {time.monotonic() - t0:.2f} s; "
              f"vramd_reconcile_orphans_readded_total {before:.0f} -> {after:.0f}")
        self.assertEqual(after, before + 1)

    def test_ledger_is_rebuilt_after_flushall(self):
        tb = self.tb
        for i, size in enumerate(["3Gi", "5Gi", "7Gi", "2Gi"]):
            pool_pod(tb, f"rebuild-{i}", size, "rb", gpu_count=None)
        for i in range(4):
            tb.wait_pod_bound(f"rebuild-{i}")
        tb.wait_for(lambda: sum(len(v) for k, v in ledger_view(self.vramd).items() if k.startswith("rb-")) == 4,
                    10, message="four rebuild entries")
        time.sleep(1.5)  # let reserved -> bound settle
        before = ledger_view(self.vramd)
        self.assertEqual(tb.redis_command("FLUSHALL"), "OK")
        t0 = time.monotonic()
        tb.wait_for(lambda: ledger_view(self.vramd) == before, 15,
                    message="the ledger to be rebuilt as it was")
        print(f"\nrebuild: ledger equal to before {time.monotonic() - t0:.2f} s after FLUSHALL "
              f"(reconcile interval 1 s); orphans re-added total "
              f"{metric_value(self.vramd, 'vramd_reconcile_orphans_readded_total'):.0f}")
        ready = json.loads(urllib_get(self.vramd.url + "/readyz"))
        self.assertTrue(ready["ready"])


def urllib_get(url):
    import urllib.request
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


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
            gdb = subprocess.Popen(
                ["gdb", "-p", str(v1.pid), "-batch", "-ex", "set pagination off",
                 "-ex", "break vramd::kube::(anonymous namespace)::RestClient::Bind", "-ex", "continue",
                 "-ex", "kill"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            time.sleep(2)  # gdb attached and continued
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
                sizes = ["1Gi", "2Gi", "3Gi", "4Gi", "1536Mi"]
                names = [f"burst-{i:03d}" for i in range(200)]
                t0 = time.monotonic()
                with ThreadPoolExecutor(8) as ex:
                    list(ex.map(lambda i: pool_pod(tb, names[i], sizes[i % len(sizes)], "rep"), range(200)))
                created = time.monotonic() - t0

                def bound_count():
                    return sum(1 for p in tb.list_pods() if p["metadata"]["name"].startswith("burst-")
                               and p["spec"].get("nodeName"))
                last, stable_since = -1, time.monotonic()
                while time.monotonic() - stable_since < 6 and time.monotonic() - t0 < 180:
                    n = bound_count()
                    if n != last:
                        last, stable_since = n, time.monotonic()
                    time.sleep(0.5)
                time.sleep(FAST["reservation_grace_ms"] / 1000 + 2)  # stale reservations, if any, are freed
                pods = {p["metadata"]["uid"]: p for p in tb.list_pods()
                        if p["metadata"]["name"].startswith("burst-")}
                bound = {u: p for u, p in pods.items() if p["spec"].get("nodeName")}
                ledger = ledger_nodes(a)
                for n in nodes:
                    self.assertLessEqual(ledger[n]["allocated_bytes"], ledger[n]["capacity_bytes"], n)
                entries = {p["uid"]: (n, p) for n in nodes for p in ledger[n]["pods"]}
                for uid, p in bound.items():
                    self.assertIn(uid, entries, f"bound pod {p['metadata']['name']} has no entry")
                    self.assertEqual(entries[uid][0], p["spec"]["nodeName"])
                    self.assertEqual(p["metadata"]["annotations"]["vramd.io/gpus"], "0")
                self.assertEqual(set(entries), set(bound), "entries without a bound pod remain")
                passes = [metric_value(v, "vramd_reconcile_passes_total", {"result": "ok"}) or 0 for v in (a, b)]
                self.assertEqual(sum(1 for p in passes if p > 0), 1, f"reconcile passes per replica: {passes}")
                # The leader's passes are coalesced: a burst of watch events is one pass
                # per reconcile_min_gap_ms, not one per event, and a pass reads the node
                # watch's copy instead of listing the nodes.
                leader = (a, b)[0 if passes[0] > 0 else 1]
                events = metric_value(leader, "vramd_watch_events_total", {"type": "modified"}) or 0
                lists = metric_value(leader, "vramd_node_sync_lists_total") or 0
                self.assertGreaterEqual(events, 400, "the burst's pod events did not reach the leader")
                self.assertLess(max(passes), events / 3, f"{max(passes)} reconcile passes for {events} pod events")
                self.assertLessEqual(lists, 2, f"capacity sync listed the nodes {lists} times in {max(passes)} passes")
                self.assertTrue(all(c > 0 for c in bal.counts.values()), bal.counts)
                alloc = {n: ledger[n]["allocated_bytes"] / GI for n in nodes}
                print(f"\nreplicas: 200 pods created in {created:.1f} s; {len(bound)} bound, "
                      f"{len(pods) - len(bound)} pending; allocation GiB per node {alloc} (capacity 16); "
                      f"requests per replica {list(bal.counts.values())}; reconcile passes {passes} "
                      f"for {events:.0f} pod events; node lists by capacity sync {lists:.0f}")
            finally:
                bal.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
