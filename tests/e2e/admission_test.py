"""End to end (issue 34, part A): vramd's admission webhook called by a real
kube-apiserver 1.20 (webhooks by URL to vramd over TLS, admissionregistration
v1), as `kubectl apply` meets it:

- a plain pod with only `vramd.io/vram: 4Gi` in its limits comes out of the
  API server with vramd's schedulerName, the GPU environment through the
  downward API (NVIDIA_VISIBLE_DEVICES from vramd.io/gpu-uuids,
  CUDA_DEVICE_ORDER, VRAMD_GPUS, POD_UID) and an annotation saying what was
  added; a variable the user set is kept;
- a malformed vramd.io annotation, a user-written vramd.io/gpus and a VRAM pod
  with spec.nodeName are refused at create with the message filter would give;
  the last is allowed in a namespace an admin labelled
  vramd.io/direct-bind=allowed (the second webhook, by namespace selector);
- a VramQueue whose deserved quota is above its limit is refused at apply;
- a namespace outside the webhook's selector is untouched.
"""

import base64
import os
import ssl
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import VRAMD, SharedTestbed, apply_queue_crd, grant_vramd_rules, queue_manifest  # noqa: E402
from testbed import ApiError, free_port  # noqa: E402

SELECTED = {"vramd.io/admission": "enabled"}


def openssl(cwd, *args):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


class Admission(SharedTestbed):
    @classmethod
    def prepare(cls, tb):
        grant_vramd_rules(tb)
        tb.start_redis()
        apply_queue_crd(tb)
        # vramd's serving certificate for 127.0.0.1, from a CA of the test's own.
        d = tb.path("webhook-pki")
        os.makedirs(d, exist_ok=True)
        openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=webhook-ca",
                "-keyout", "ca.key", "-out", "ca.crt")
        with open(os.path.join(d, "ext"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\n")
        openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=vramd", "-keyout", "tls.key", "-out", "tls.csr")
        openssl(d, "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days",
                "2", "-extfile", "ext", "-out", "tls.crt")
        with open(os.path.join(d, "ca.crt"), "rb") as f:
            ca_bundle = base64.b64encode(f.read()).decode()
        port = free_port()
        cfg = tb.write_file("vramd-admission.json", '{"queues": {"enabled": true}}')
        cls.vramd = tb.start_vramd(
            VRAMD, tb.vramd_args(port, cfg) + [
                "--tls-cert-file", os.path.join(d, "tls.crt"), "--tls-key-file", os.path.join(d, "tls.key"),
                "--admission-enabled", "--admission-scheduler-name", "vramd-scheduler",
                "--admission-vramd-users", "vramd"],
            health_url=f"https://127.0.0.1:{port}/healthz",
            ssl_context=ssl.create_default_context(cafile=os.path.join(d, "ca.crt")))
        url = f"https://127.0.0.1:{port}/admission"
        selector = {"matchLabels": SELECTED}
        pods = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}
        queues = {"apiGroups": ["vramd.io"], "apiVersions": ["v1alpha1"], "operations": ["CREATE", "UPDATE"],
                  "resources": ["vramqueues"]}

        def hook(name, path, rules, ns_selector):
            return {"name": name, "clientConfig": {"url": f"{url}/{path}", "caBundle": ca_bundle},
                    "rules": rules, "namespaceSelector": ns_selector, "failurePolicy": "Fail",
                    "sideEffects": "None", "admissionReviewVersions": ["v1", "v1beta1"], "timeoutSeconds": 5}
        direct = {"key": "vramd.io/direct-bind", "operator": "NotIn", "values": ["allowed"]}
        tb.apply({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                  "metadata": {"name": "vramd"},
                  "webhooks": [hook("mutate.vramd.io", "mutate", [pods], selector)]})
        tb.apply({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                  "metadata": {"name": "vramd"},
                  "webhooks": [
                      hook("validate.vramd.io", "validate", [pods],
                           {"matchLabels": SELECTED, "matchExpressions": [direct]}),
                      hook("validate-direct-bind.vramd.io", "validate-direct-bind", [pods],
                           {"matchLabels": dict(SELECTED, **{"vramd.io/direct-bind": "allowed"})}),
                      hook("queues.vramd.io", "validate", [queues], {})]})
        for ns, labels in (("team-a", SELECTED), ("opted-out", dict(SELECTED, **{"vramd.io/direct-bind": "allowed"})),
                           ("elsewhere", {})):
            tb.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})
        # The API server's webhook clients come up with the configuration: wait until a create goes through them.
        # Each try has a name of its own: a probe the API server admitted before it saw the configuration (no
        # webhook called) must not make every later try fail with AlreadyExists.
        tries = iter(range(1000))
        tb.wait_for(lambda: cls.try_create(tb, f"probe-{next(tries)}") is not None, 30,
                    message="the webhooks to answer")

    @staticmethod
    def try_create(tb, name):
        try:
            pod = tb.api.post("/api/v1/namespaces/team-a/pods", tb.pod_manifest(name, vram="1Gi", namespace="team-a"))
        except ApiError:
            return None
        return pod if pod["metadata"].get("annotations", {}).get("vramd.io/admission-added") else None

    def create(self, name, ns="team-a", **kwargs):
        return self.tb.api.post(f"/api/v1/namespaces/{ns}/pods", self.tb.pod_manifest(name, namespace=ns, **kwargs))

    def refused(self, name, ns="team-a", **kwargs):
        with self.assertRaises(ApiError) as e:
            self.create(name, ns, **kwargs)
        self.assertEqual(self.tb.api.get_or_none(f"/api/v1/namespaces/{ns}/pods/{name}"), None)
        return e.exception

    def test_a_plain_vram_pod_gets_the_scheduler_and_the_gpu_environment(self):
        user_env = {"name": "main", "image": "registry.k8s.io/pause:3.9",
                    "resources": {"limits": {"vramd.io/vram": "4Gi"}},
                    "env": [{"name": "CUDA_DEVICE_ORDER", "value": "FASTEST_FIRST"}]}
        pod = self.tb.api.post("/api/v1/namespaces/team-a/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain", "namespace": "team-a"},
            "spec": {"containers": [user_env]}})
        self.assertEqual(pod["spec"]["schedulerName"], "vramd-scheduler")
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        self.assertEqual(env["NVIDIA_VISIBLE_DEVICES"]["valueFrom"]["fieldRef"]["fieldPath"],
                         "metadata.annotations['vramd.io/gpu-uuids']")
        self.assertEqual(env["VRAMD_GPUS"]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.annotations['vramd.io/gpus']")
        self.assertEqual(env["POD_UID"]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.uid")
        self.assertEqual(env["CUDA_DEVICE_ORDER"]["value"], "FASTEST_FIRST", "what the user set is kept")
        added = pod["metadata"]["annotations"]["vramd.io/admission-added"]
        self.assertIn("schedulerName", added)
        self.assertNotIn("CUDA_DEVICE_ORDER", added)
        # Without VRAM, and outside the selector: untouched.
        self.assertEqual(self.create("no-vram")["spec"]["schedulerName"], "default-scheduler")
        outside = self.create("outside", ns="elsewhere", vram="4Gi")
        self.assertEqual(outside["spec"]["schedulerName"], "default-scheduler")
        self.assertNotIn("vramd.io/admission-added", outside["metadata"].get("annotations", {}))

    def test_malformed_and_forbidden_pods_are_refused_at_create(self):
        e = self.refused("bad-count", vram="4Gi", gpu_count="two")
        self.assertIn("invalid VRAM request", e.body)
        self.assertIn("vramd.io/gpu-count", e.body)
        # (A malformed quantity never reaches a webhook: the API server refuses it first.)
        e = self.refused("bad-peak", vram="4Gi", annotations={"vramd.io/vram-peak": "lots"})
        self.assertIn("invalid VRAM request", e.body)
        self.assertIn("vramd.io/vram-peak", e.body)
        e = self.refused("self-placed", vram="4Gi", annotations={"vramd.io/gpus": "0"})
        self.assertIn("written by vramd", e.body)
        e = self.refused("bypass", vram="4Gi", node_name="gpu-1")
        self.assertIn("bypasses vramd", e.body)
        # An admin opted this namespace out of the nodeName rule (the label selects the second webhook).
        self.assertEqual(self.create("direct", ns="opted-out", vram="4Gi", node_name="gpu-1")["spec"]["nodeName"],
                         "gpu-1")
        # The other rules still hold there.
        e = self.refused("self-placed", ns="opted-out", vram="4Gi", annotations={"vramd.io/gpus": "0"})
        self.assertIn("written by vramd", e.body)

    def test_a_bad_queue_is_refused_at_apply(self):
        with self.assertRaises(ApiError) as e:
            self.tb.apply(queue_manifest("too-deserving", "80Gi", namespaces=["team-a"], limit="40Gi"))
        self.assertIn("VramQueue too-deserving: Invalid", e.exception.body)
        self.assertIsNone(self.tb.api.get_or_none("/apis/vramd.io/v1alpha1/vramqueues/too-deserving"))
        self.tb.apply(queue_manifest("fine", "40Gi", namespaces=["team-a"], limit="80Gi"))
        self.assertIsNotNone(self.tb.api.get_or_none("/apis/vramd.io/v1alpha1/vramqueues/fine"))


if __name__ == "__main__":
    unittest.main()
