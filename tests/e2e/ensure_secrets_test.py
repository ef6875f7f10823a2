"""`vramd ensure-secrets` against the real kube-apiserver (1.20) of the
testbed, as the user `vramd` (static token) holding only what the chart's
ensure-secrets Role grants: `create` on secrets in its namespace and `get` on
the named Secrets. Without create: 403, exit 1. With it: the three Secrets are
created once, accepted by the API server's own validation (kubernetes.io/tls
with the extra keys); a second run without `get` cannot check the existing
ones and fails; with `get` a second run, or two runs racing, check them and
leave them as they are. The certificates verify with the openssl command.
Issue 33 item 6: a Secret of an expected name planted beforehand (no
managed-by label, or the label copied but a key missing) is refused, exit 1,
and left as it was."""

import base64
import os
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import VRAMD  # noqa: E402
from testbed import Testbed, clean_env  # noqa: E402

NS = "vramd-secrets"


def grant_get(tb, names):
    """`get` on exactly `names` (resourceNames), beside the create rule; waits until it holds."""
    rules = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
             {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": list(names)}]
    tb.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
              "metadata": {"name": "ensure-secrets", "namespace": NS}, "rules": rules})

    def granted():
        review = tb.api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "vramd", "resourceAttributes": {
                "verb": "get", "resource": "secrets", "namespace": NS, "name": names[-1]}}})
        return bool(review.get("status", {}).get("allowed"))
    tb.wait_for(granted, timeout=10, message="the get rule to take effect")


def run(tb, *args, wait=True):
    cmd = [VRAMD, "ensure-secrets", "--namespace", NS, "--kube-api", tb.api_url,
           "--kube-token-file", tb.vramd_token_file, "--kube-ca-file", tb.ca_file, *args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
    if not wait:
        return p
    out, err = p.communicate(timeout=120)
    return p.returncode, out, err


class EnsureSecretsOnARealApiServer(unittest.TestCase):
    def test_create_once_keep_forever_with_least_privilege(self):
        with Testbed() as tb:
            tb.create_namespace(NS)
            names = ["--tls-secret", "vramd-tls", "--dns-names", f"vramd.{NS}.svc,vramd.{NS}.svc.cluster.local",
                     "--token-secret", "vramd-token", "--valkey-secret", "vramd-valkey"]

            rc, out, err = run(tb, *names)
            self.assertEqual(rc, 1, out + err)
            self.assertIn(f"create secret {NS}/vramd-tls: HTTP 403", err)
            self.assertIn("cannot create resource \"secrets\"", err)

            rule = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}
            tb.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                      "metadata": {"name": "ensure-secrets", "namespace": NS}, "rules": [rule]})
            tb.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                      "metadata": {"name": "ensure-secrets", "namespace": NS},
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "ensure-secrets"},
                      "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "vramd"}]})
            tb.wait_for(lambda: tb.can_i("vramd", "create", "secrets", namespace=NS), timeout=10,
                        message="the Role to take effect")

            rc, out, err = run(tb, *names)
            self.assertEqual(rc, 0, err)
            self.assertEqual([line.split(":")[1].strip() for line in out.splitlines()],
                             ["created (kubernetes.io/tls", "created (Opaque", "created (Opaque"], out)
            tls = tb.api.get(f"/api/v1/namespaces/{NS}/secrets/vramd-tls")
            self.assertEqual(tls["type"], "kubernetes.io/tls")
            self.assertEqual(sorted(tls["data"]), ["ca.crt", "client.crt", "client.key", "tls.crt", "tls.key"])
            self.assertEqual(tls["metadata"]["labels"], {"app.kubernetes.io/managed-by": "vramd-ensure-secrets"})
            for name, key in (("vramd-token", "token"), ("vramd-valkey", "password")):
                s = tb.api.get(f"/api/v1/namespaces/{NS}/secrets/{name}")
                self.assertEqual((s["type"], list(s["data"])), ("Opaque", [key]))
                self.assertRegex(base64.b64decode(s["data"][key]).decode(), r"^[0-9a-f]{64}$")

            # The certificates, checked by the openssl command.
            files = {key: tb.write_file(key, base64.b64decode(value)) for key, value in tls["data"].items()}
            ca, crt, client = files["ca.crt"], files["tls.crt"], files["client.crt"]
            for purpose, cert in (("sslserver", crt), ("sslclient", client)):
                v = subprocess.run(["openssl", "verify", "-CAfile", ca, "-purpose", purpose, cert],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
            v = subprocess.run(["openssl", "verify", "-CAfile", ca, "-purpose", "sslserver", client],
                               capture_output=True, text=True, timeout=30)
            self.assertNotEqual(v.returncode, 0, "the client certificate must not serve")
            v = subprocess.run(["openssl", "x509", "-in", crt, "-noout", "-ext", "subjectAltName"],
                               capture_output=True, text=True, timeout=30)
            self.assertIn(f"DNS:vramd.{NS}.svc, DNS:vramd.{NS}.svc.cluster.local", v.stdout)

            # Again: nothing changes. Without `get` the existing Secrets cannot be
            # checked: refused (never trusted unread).
            versions = {n: tb.api.get(f"/api/v1/namespaces/{NS}/secrets/{n}")["metadata"]["resourceVersion"]
                        for n in ("vramd-tls", "vramd-token", "vramd-valkey")}
            rc, out, err = run(tb, *names)
            self.assertEqual(rc, 1, out + err)
            self.assertIn(f"get secret {NS}/vramd-tls: HTTP 403", err)
            planted = ["planted-valkey", "planted-token"]
            grant_get(tb, ["vramd-tls", "vramd-token", "vramd-valkey", "race-tls", "race-token", *planted])
            rc, out, err = run(tb, *names)
            self.assertEqual(rc, 0, err)
            self.assertEqual(out.count("exists, checked"), 3, out)
            for n, rv in versions.items():
                self.assertEqual(tb.api.get(f"/api/v1/namespaces/{NS}/secrets/{n}")["metadata"]["resourceVersion"],
                                 rv, n)

            # Two replicas starting at once: each Secret is created by exactly one of them.
            raced = ["--tls-secret", "race-tls", "--dns-names", "vramd", "--token-secret", "race-token"]
            procs = [run(tb, *raced, wait=False) for _ in range(2)]
            outs = []
            for p in procs:
                out, err = p.communicate(timeout=120)
                self.assertEqual(p.returncode, 0, err)
                outs.append(out)
            for n in ("race-tls", "race-token"):
                self.assertEqual(sum(o.count(f"secret {NS}/{n}: created") for o in outs), 1, outs)
                self.assertEqual(sum(o.count(f"secret {NS}/{n}: exists, checked") for o in outs), 1, outs)

            # Issue 33 item 6, the attack: whoever may create Secrets in the
            # namespace plants them before the chart's Job runs: a Valkey
            # password they know (no labels), and a token Secret with the
            # managed-by label copied but under another key.
            tb.apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                      "metadata": {"name": "planted-valkey", "namespace": NS},
                      "data": {"password": base64.b64encode(b"known-to-the-attacker").decode()}})
            tb.apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                      "metadata": {"name": "planted-token", "namespace": NS,
                                   "labels": {"app.kubernetes.io/managed-by": "vramd-ensure-secrets"}},
                      "data": {"tokn": base64.b64encode(b"x").decode()}})
            before = {n: tb.api.get(f"/api/v1/namespaces/{NS}/secrets/{n}") for n in planted}
            rc, out, err = run(tb, "--valkey-secret", "planted-valkey", "--token-secret", "planted-token")
            self.assertEqual(rc, 1, out + err)
            self.assertEqual(out, "", "nothing is reported as usable")
            self.assertIn(f"secret {NS}/planted-valkey exists but is not one vramd ensure-secrets made "
                          "(no label app.kubernetes.io/managed-by=vramd-ensure-secrets); refusing to use it", err)
            self.assertIn(f"secret {NS}/planted-token exists but is not one vramd ensure-secrets made "
                          "(no key token); refusing to use it", err)
            for n in planted:
                after = tb.api.get(f"/api/v1/namespaces/{NS}/secrets/{n}")
                self.assertEqual(after["metadata"]["resourceVersion"], before[n]["metadata"]["resourceVersion"], n)
                self.assertEqual(after["data"], before[n]["data"], n)


if __name__ == "__main__":
    unittest.main(verbosity=2)
