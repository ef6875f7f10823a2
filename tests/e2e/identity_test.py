"""End to end (issue 33, item 1 and 3): identities against a real
kube-apiserver 1.20 (TokenReview, SubjectAccessReview, TokenRequest), vramd
running with the chart's own RBAC (rendered by tests/deploy/helm_test.sh).

The attacks of the issue, each refused with nothing changed in the ledger or
in Valkey's key count:

- a node agent's token (a projected ServiceAccount token bound to its pod,
  audience vramd, as the chart mounts it) reports for its own node, and is
  refused for another node;
- the shared API token, copied into a tenant namespace, reports no usage and
  takes no GPU lock;
- a token for the API server's own audience, a forged token and a tenant's
  pod token report nothing;
- an agent pod on a node no admin marked as a GPU node (no GPU label) gives
  that node no capacity, however often it reports;
- reads need a credential; a tenant sees its own pods by name and the other
  namespace's pods only as figures; `explain` of a pod in a namespace the
  caller may not read is refused without vramd reading the pod;
- a tenant's pod takes a GPU lock in its own name only.
"""

import json
import os
import sys
import unittest
import urllib.error
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import GI, SharedTestbed, chart_service_account_token, metric_value, start_vramd  # noqa: E402

AGENT_NS = "vramd-system"
AGENT_SA = "vramd-agent"
SHARED = "e2e-shared-token-0123456789abcdef"
GPU_LABEL = {"nvidia.com/gpu.present": "true"}


def call(vramd, method, path, token=None, body=None):
    """(status, parsed body or text) of one request to vramd."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(vramd.url + path, data=data, method=method)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def report(total=80 * GI, used=1 * GI):
    return {"version": 2, "gpus": [{"index": 0, "total_bytes": total, "used_bytes": used}]}


class Identities(SharedTestbed):
    @classmethod
    def prepare(cls, tb):
        vramd_token = chart_service_account_token(tb)  # vramd with exactly the chart's ClusterRole
        for ns in ("team-a", "team-b", "ops"):
            tb.create_namespace(ns)
        for ns, sa in ((AGENT_NS, AGENT_SA), ("team-a", "trainer"), ("team-b", "server"), ("ops", "viewer")):
            tb.api.post(f"/api/v1/namespaces/{ns}/serviceaccounts",
                        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}})
        # The trainer may get pods in its own namespace; the viewer everywhere.
        tb.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                  "metadata": {"name": "pod-reader", "namespace": "team-a"},
                  "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
        tb.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                  "metadata": {"name": "trainer-reads-pods", "namespace": "team-a"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
                  "subjects": [{"kind": "ServiceAccount", "name": "trainer", "namespace": "team-a"}]})
        tb.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                  "metadata": {"name": "e2e-pod-viewer"},
                  "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
        tb.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                  "metadata": {"name": "e2e-ops-viewer"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                              "name": "e2e-pod-viewer"},
                  "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": "ops"}]})
        tb.create_node("gpu-1", labels=GPU_LABEL)
        tb.create_node("gpu-2", labels=GPU_LABEL)
        tb.create_node("cpu-1")  # no GPU label: never a GPU node
        # An agent pod on each node (no kubelet runs them: they exist, bound, as the DaemonSet's would).
        cls.agent_tokens = {}
        for node in ("gpu-1", "gpu-2", "cpu-1"):
            pod = cls.create_bound_pod(tb, AGENT_NS, f"agent-{node}", AGENT_SA, node)
            cls.agent_tokens[node] = cls.pod_token(tb, AGENT_NS, AGENT_SA, pod)
        shared = tb.write_file("shared-token", SHARED)
        cls.vramd = start_vramd(tb, token_file=vramd_token, config={
            "auth": {"identities": True, "agent_service_account": f"{AGENT_NS}/{AGENT_SA}"},
            "reserve": {"percent": 0, "min_bytes": "0"}}, extra_args=["--api-token-file", shared])
        # gpu-1 and gpu-2 become GPU nodes of the ledger from their own agents' reports.
        for node in ("gpu-1", "gpu-2"):
            status, body = call(cls.vramd, "PUT", f"/v1/nodes/{node}/usage", cls.agent_tokens[node], report())
            assert status == 200, (node, status, body)
        tb.wait_for(lambda: {"gpu-1", "gpu-2"} <= set(cls.nodes(SHARED)), 30,
                    message="gpu-1 and gpu-2 in the ledger from their agents' reports")
        # Two tenants' VRAM pods on gpu-1 (bound directly), and their tokens.
        cls.train = cls.create_bound_pod(tb, "team-a", "train", "trainer", "gpu-1", vram="10Gi")
        cls.serve = cls.create_bound_pod(tb, "team-b", "serve", "server", "gpu-1", vram="20Gi")
        cls.trainer_token = cls.pod_token(tb, "team-a", "trainer", cls.train)
        cls.viewer_token = cls.sa_token(tb, "ops", "viewer", audience="vramd")
        tb.wait_for(lambda: len(cls.nodes(SHARED)["gpu-1"]["pods"]) == 2, 30,
                    message="both tenants' pods in the ledger")

    # -- helpers ------------------------------------------------------------

    @staticmethod
    def create_bound_pod(tb, ns, name, sa, node, vram=None):
        manifest = tb.pod_manifest(name, vram=vram, namespace=ns, node_name=node,
                                   extra_spec={"serviceAccountName": sa, "automountServiceAccountToken": False})
        return tb.api.post(f"/api/v1/namespaces/{ns}/pods", manifest)

    @staticmethod
    def pod_token(tb, ns, sa, pod, audience="vramd"):
        """The token the kubelet would project into `pod` (TokenRequest bound to the pod)."""
        req = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"audiences": [audience], "expirationSeconds": 3600,
                        "boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                                           "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}}}
        return tb.api.post(f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token", req)["status"]["token"]

    @staticmethod
    def sa_token(tb, ns, sa, audience=None):
        spec = {"expirationSeconds": 3600}
        if audience:
            spec["audiences"] = [audience]
        req = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        return tb.api.post(f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token", req)["status"]["token"]

    @classmethod
    def nodes(cls, token):
        status, body = call(cls.vramd, "GET", "/v1/nodes", token)
        assert status == 200, (status, body)
        return {n["name"]: n for n in body["nodes"]}

    def keys(self):
        return int(self.tb.redis_command("DBSIZE"))

    def node_sync_passes(self):
        return metric_value(self.vramd, "vramd_node_sync_passes_total", {"result": "ok"}) or 0

    # -- the attacks ----------------------------------------------------------

    def test_1_an_agent_reports_for_its_own_node_only(self):
        before, keys = self.nodes(SHARED), self.keys()
        attacks = [
            ("gpu-2's agent marks gpu-1 full", "gpu-1", self.agent_tokens["gpu-2"], 403,
             "reports for that node only"),
            ("the shared token marks gpu-1 full", "gpu-1", SHARED, 403, "shared API token"),
            ("a tenant's pod token", "gpu-1", self.trainer_token, 403, "not the node agent"),
            ("the agent's ServiceAccount, token for the API server's audience", "gpu-1",
             self.pod_token(self.tb, AGENT_NS, AGENT_SA, self.tb.api.get(
                 f"/api/v1/namespaces/{AGENT_NS}/pods/agent-gpu-1"), audience="https://kubernetes.default.svc"),
             401, "did not authenticate"),
            ("a forged token", "gpu-1", "eyJhbGciOiJSUzI1NiJ9.e30.forged", 401, "did not authenticate"),
            ("no token", "gpu-1", None, 401, "agent's ServiceAccount token"),
        ]
        for name, node, token, want, says in attacks:
            with self.subTest(name):
                status, body = call(self.vramd, "PUT", f"/v1/nodes/{node}/usage", token, report(used=80 * GI))
                self.assertEqual(status, want, body)
                self.assertIn(says, body["error"])
        after = self.nodes(SHARED)
        for node in ("gpu-1", "gpu-2"):
            self.assertEqual(after[node]["gpus"][0]["used_bytes"], before[node]["gpus"][0]["used_bytes"], node)
        self.assertEqual(self.keys(), keys)
        # The agent's own report still lands.
        status, body = call(self.vramd, "PUT", "/v1/nodes/gpu-1/usage", self.agent_tokens["gpu-1"],
                            report(used=3 * GI))
        self.assertEqual(status, 200, body)
        self.assertEqual(self.nodes(SHARED)["gpu-1"]["gpus"][0]["used_bytes"], 3 * GI)

    def test_2_an_unmarked_node_gets_no_capacity_from_its_agent(self):
        keys = self.keys()
        for _ in range(3):
            status, body = call(self.vramd, "PUT", "/v1/nodes/cpu-1/usage", self.agent_tokens["cpu-1"], report())
            self.assertEqual(status, 400, body)
            self.assertIn("nor a GPU node of the cluster", body["error"])
        # Two node-sync passes after the reports: the node is still absent.
        passes = self.node_sync_passes()
        self.tb.wait_for(lambda: self.node_sync_passes() >= passes + 2, 30, message="two node-sync passes")
        self.assertNotIn("cpu-1", self.nodes(SHARED))
        self.assertEqual(self.keys(), keys)

    def test_3_reads_are_scoped_to_what_the_caller_may_get(self):
        status, body = call(self.vramd, "GET", "/v1/nodes")
        self.assertEqual(status, 401, body)
        status, body = call(self.vramd, "GET", "/v1/locks")
        self.assertEqual(status, 401, body)
        seen = self.nodes(self.trainer_token)["gpu-1"]["pods"]
        shown = [p for p in seen if not p.get("hidden")]
        hidden = [p for p in seen if p.get("hidden")]
        self.assertEqual([p["name"] for p in shown], ["train"])
        self.assertEqual(len(hidden), 1)
        self.assertEqual(hidden[0]["vram_per_gpu_bytes"], 20 * GI)
        text = json.dumps(self.nodes(self.trainer_token))
        self.assertNotIn("team-b", text)
        self.assertNotIn(self.serve["metadata"]["uid"], text)
        # The viewer may get pods everywhere (SubjectAccessReview with no namespace).
        self.assertEqual(sorted(p["name"] for p in self.nodes(self.viewer_token)["gpu-1"]["pods"]),
                         ["serve", "train"])

    def test_4_explain_is_no_confused_deputy(self):
        status, body = call(self.vramd, "GET", "/v1/explain?namespace=team-b&pod=serve", self.trainer_token)
        self.assertEqual(status, 403, body)
        self.assertIn("team-b", body["error"])
        status, body = call(self.vramd, "GET", "/v1/explain?namespace=team-a&pod=train", self.trainer_token)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["pod"]["uid"], self.train["metadata"]["uid"])
        status, body = call(self.vramd, "GET", "/v1/explain?namespace=team-b&pod=serve", self.viewer_token)
        self.assertEqual(status, 200, body)

    def test_5_a_lock_belongs_to_the_calling_pod(self):
        keys = self.keys()
        mine = {"owner": self.train["metadata"]["uid"] + "/w0"}
        theirs = {"owner": self.serve["metadata"]["uid"] + "/w0"}
        for op in ("acquire", "heartbeat", "release"):
            with self.subTest(op):
                status, body = call(self.vramd, "POST", f"/v1/locks/gpu-1/0/{op}", self.trainer_token, theirs)
                self.assertEqual(status, 403, body)
                self.assertIn("caller's own pod", body["error"])
                status, body = call(self.vramd, "POST", f"/v1/locks/gpu-1/0/{op}", SHARED, mine)
                self.assertEqual(status, 403, body)
        self.assertEqual(self.keys(), keys)
        status, body = call(self.vramd, "POST", "/v1/locks/gpu-1/0/acquire", self.trainer_token, mine)
        self.assertEqual(status, 200, body)
        self.assertTrue(body["granted"])
        status, body = call(self.vramd, "GET", "/v1/locks", self.trainer_token)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["locks"][0]["holder"], mine["owner"])
        status, body = call(self.vramd, "POST", "/v1/locks/gpu-1/0/release", self.trainer_token, mine)
        self.assertEqual(status, 200, body)


if __name__ == "__main__":
    unittest.main()
