"""Smoke test of the e2e testbed itself: no vramd involved.

A real kube-apiserver and kube-scheduler (no extender) must bind a plain pod
to a hand-made GPU node. If this fails, every other e2e test would too.

Run: python3 tests/e2e/smoke_test.py -v
(needs tests/e2e/testbed/build-k8s.sh to have run once)
"""

import http.server
import json
import os
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from testbed import Testbed  # noqa: E402


class FakeExtender:
    """A stand-in extender: keeps every node, binds through the API server,
    and records what kube-scheduler sent (verb, decoded body)."""

    def __init__(self, tb: Testbed):
        self.calls = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                verb = self.path.rsplit("/", 1)[-1]
                fake.calls.append((verb, body))
                if verb == "filter":
                    reply = {"NodeNames": body["NodeNames"], "Nodes": None,
                             "FailedNodes": {}, "FailedAndUnresolvableNodes": {},
                             "Error": ""}
                elif verb == "prioritize":
                    reply = [{"Host": n, "Score": 0} for n in body["NodeNames"]]
                elif verb == "bind":
                    tb.api.post(
                        f"/api/v1/namespaces/{body['PodNamespace']}/pods/"
                        f"{body['PodName']}/binding",
                        {"apiVersion": "v1", "kind": "Binding",
                         "metadata": {"name": body["PodName"],
                                      "namespace": body["PodNamespace"],
                                      "uid": body["PodUID"]},
                         "target": {"apiVersion": "v1", "kind": "Node",
                                    "name": body["Node"]}})
                    reply = {"Error": ""}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/scheduler"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def verbs(self):
        return [verb for verb, _ in self.calls]


class TestbedSmokeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        t0 = time.monotonic()
        cls.tb = Testbed().__enter__()
        print(f"\n[smoke] apiserver ready in {cls.tb.startup_seconds:.1f} s "
              f"({time.monotonic() - t0:.1f} s incl. setup) at {cls.tb.api_url}",
              file=sys.stderr, flush=True)
        try:
            # The only node: every test may bind pods to it.
            cls.tb.create_node("gpu-node-1", labels={"nvidia.com/gpu.count": "1",
                                                     "nvidia.com/gpu.memory": "8192"})
        except BaseException:
            cls.tb.close()  # tearDownClass does not run when setUpClass fails
            raise

    @classmethod
    def tearDownClass(cls):
        cls.tb.close()

    def test_plain_pod_gets_bound_without_extender(self):
        tb = self.tb
        node = tb.api.get("/api/v1/nodes/gpu-node-1")
        self.assertFalse(node["spec"].get("taints"), "not-ready taint must be gone")
        self.assertEqual(node["metadata"]["labels"]["nvidia.com/gpu.memory"], "8192")

        t0 = time.monotonic()
        tb.start_scheduler()  # no extender
        print(f"[smoke] scheduler started in {time.monotonic() - t0:.1f} s",
              file=sys.stderr, flush=True)

        t0 = time.monotonic()
        tb.create_pod("plain")
        self.assertEqual(tb.wait_pod_bound("plain", timeout=30), "gpu-node-1")
        print(f"[smoke] pod bound in {time.monotonic() - t0:.1f} s",
              file=sys.stderr, flush=True)
        # kube-scheduler records the Scheduled event after the binding, on its
        # own goroutine: wait for it rather than reading once.
        tb.wait_for(lambda: any("Successfully assigned default/plain to gpu-node-1" in m
                                for m in tb.pod_events("plain", reason="Scheduled")),
                    timeout=10, message="the Scheduled event of pod plain")

    def test_scheduler_sends_only_vram_pods_to_the_configured_extender(self):
        tb = self.tb
        ext = FakeExtender(tb)
        self.addCleanup(ext.close)
        tb.start_scheduler([ext.url])

        tb.create_pod("no-vram")
        self.assertEqual(tb.wait_pod_bound("no-vram"), "gpu-node-1")
        self.assertEqual(ext.calls, [], "managedResources: pods without VRAM skip it")

        tb.create_pod("with-vram", vram="1Gi", gpu_count=1, model="llama")
        self.assertEqual(tb.wait_pod_bound("with-vram"), "gpu-node-1")
        self.assertEqual(ext.verbs(), ["filter", "bind"])  # one node: no prioritize
        filt = ext.calls[0][1]
        self.assertEqual(filt["NodeNames"], ["gpu-node-1"])  # nodeCacheCapable
        self.assertIsNone(filt["Nodes"])
        main = filt["Pod"]["spec"]["containers"][0]
        self.assertEqual(main["resources"]["limits"]["vramd.io/vram"], "1Gi")
        self.assertEqual(filt["Pod"]["metadata"]["annotations"]["vramd.io/model"], "llama")
        bind = ext.calls[1][1]
        self.assertEqual((bind["PodName"], bind["PodNamespace"], bind["Node"]),
                         ("with-vram", "default", "gpu-node-1"))

    def test_vramd_user_starts_without_permissions_and_can_be_granted(self):
        tb = self.tb
        self.assertFalse(tb.can_i("vramd", "list", "pods"))
        # A role of this test's own (not common.start_vramd's e2e-vramd),
        # removed afterwards: no other test sees this narrower grant.
        name = "e2e-smoke-vramd"
        tb.create_clusterrole_binding_for("vramd", [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "get"]}], name=name)
        for kind in ("clusterrolebindings", "clusterroles"):
            self.addCleanup(tb.api.delete, f"/apis/rbac.authorization.k8s.io/v1/{kind}/{name}")
        pods = tb.vramd_api.get("/api/v1/pods")
        self.assertEqual(pods["kind"], "PodList")

    def test_bound_pod_deleted_with_grace_lingers_until_forced(self):
        # The phantom-capacity case: no kubelet ever confirms the deletion.
        tb = self.tb
        tb.create_pod("lingering", node_name="gpu-node-1")
        tb.set_pod_phase("lingering", "Running")
        tb.delete_pod("lingering", grace=30)
        pod = tb.get_pod("lingering")
        self.assertIsNotNone(pod)
        self.assertIn("deletionTimestamp", pod["metadata"])
        self.assertEqual(pod["status"]["phase"], "Running")
        tb.delete_pod("lingering", grace=0)
        tb.wait_for(lambda: tb.get_pod("lingering") is None, 10, message="pod gone")

    def test_unschedulable_pod_gets_a_failed_scheduling_event(self):
        tb = self.tb
        tb.start_scheduler()
        tb.create_pod("nowhere", extra_spec={"nodeSelector": {"no-such": "label"}})
        msgs = tb.wait_for(lambda: tb.pod_events("nowhere", reason="FailedScheduling"),
                           timeout=30, message="a FailedScheduling event")
        self.assertIn("0/1 nodes are available", msgs[-1])
        self.assertIsNone(tb.pod_node("nowhere"))
        tb.delete_pod("nowhere")  # unbound: gone at once, even with a grace period
        tb.wait_for(lambda: tb.get_pod("nowhere") is None, 10, message="pod gone")

    def test_redis_helper(self):
        tb = self.tb
        url = tb.start_redis()
        self.assertTrue(url.startswith("redis://127.0.0.1:"))
        self.assertEqual(tb.redis_command("SET", "k", "v"), "OK")
        self.assertEqual(tb.redis_command("GET", "k"), "v")
        self.assertIsNone(tb.redis_command("GET", "missing"))


if __name__ == "__main__":
    unittest.main()
