"""`vramd ensure-secrets` (issue 13, secure by default), the real binary
against a small Kubernetes API stub on loopback (POST .../secrets with
create-only semantics: 201, or 409 AlreadyExists without a change; GET of
one Secret, read back after a 409 and checked), then
the certificates it made securing a real vramd: mTLS on `listen`, none on
api_listen, the token Secret as the API token. Not the real kube-apiserver:
the e2e testbed's apiserver would add minutes to this tier for one POST
whose shape tests/unit/kube/rest_client_test.cc checks."""

import base64
import http.server
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import unittest
import urllib.error

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import VRAMD, Workdir, bind_body, clean_env, filter_body, free_port, homelab_config  # noqa: E402
from api_listen_test import REFUSED_AT_TLS, call  # noqa: E402

API_TOKEN = "stub-sa-token"


class ApiStub:
    """Secrets by (namespace, name). Namespace "denied" answers 403; the
    first `unavailable` POSTs answer 503."""

    def __init__(self, unavailable=0):
        self.secrets = {}
        self.posts = []
        self.unavailable = unavailable
        self.lock = threading.Lock()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/secrets/([^/]+)", self.path)
                with stub.lock:
                    if self.headers.get("Authorization") != "Bearer " + API_TOKEN:
                        return self.answer(401, {"kind": "Status", "message": "Unauthorized", "code": 401})
                    secret = stub.secrets.get((m.group(1), m.group(2))) if m else None
                    if secret is None:
                        return self.answer(404, {"kind": "Status", "message": "not found", "code": 404})
                    return self.answer(200, {**secret, "kind": "Secret"})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/secrets", self.path)
                with stub.lock:
                    stub.posts.append(self.path)
                    if self.headers.get("Authorization") != "Bearer " + API_TOKEN:
                        return self.answer(401, {"kind": "Status", "message": "Unauthorized", "code": 401})
                    if stub.unavailable > 0:
                        stub.unavailable -= 1
                        return self.answer(503, {"kind": "Status", "message": "etcd leader changed", "code": 503})
                    if not m:
                        return self.answer(404, {"kind": "Status", "message": "not found", "code": 404})
                    ns = m.group(1)
                    if ns == "denied":
                        return self.answer(403, {"kind": "Status", "code": 403, "reason": "Forbidden",
                                                 "message": f"secrets is forbidden: User \"system:serviceaccount:"
                                                            f"{ns}:vramd\" cannot create resource \"secrets\""})
                    secret = json.loads(body)
                    key = (ns, secret["metadata"]["name"])
                    if key in stub.secrets:
                        return self.answer(409, {"kind": "Status", "code": 409, "reason": "AlreadyExists",
                                                 "message": f"secrets \"{key[1]}\" already exists"})
                    stub.secrets[key] = secret
                    return self.answer(201, secret)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def data(self, ns, name):
        return {k: base64.b64decode(v).decode() for k, v in self.secrets[(ns, name)]["data"].items()}


def ensure_secrets(stub, w, *args):
    token = w.file("sa-token", API_TOKEN + "\n")
    out = subprocess.run([VRAMD, "ensure-secrets", "--kube-api", stub.url, "--kube-token-file", token, *args],
                         capture_output=True, text=True, timeout=60, env=clean_env())
    return out.returncode, out.stdout, out.stderr


ALL = ["--namespace", "gpu", "--tls-secret", "vramd-tls", "--dns-names", "vramd.gpu.svc,127.0.0.1",
       "--token-secret", "vramd-token", "--valkey-secret", "vramd-valkey", "--label", "app.kubernetes.io/instance=t"]


class EnsureSecrets(unittest.TestCase):
    def setUp(self):
        self.stub = ApiStub()
        self.addCleanup(self.stub.close)

    def test_creates_each_secret_once_and_never_changes_it(self):
        with Workdir() as w:
            rc, out, err = ensure_secrets(self.stub, w, *ALL)
            self.assertEqual(rc, 0, err)
            self.assertEqual(out.splitlines(), [
                "secret gpu/vramd-tls: created (kubernetes.io/tls: ca.crt, client.crt, client.key, tls.crt, tls.key)",
                "secret gpu/vramd-token: created (Opaque: token)",
                "secret gpu/vramd-valkey: created (Opaque: password)"])
            tls = self.stub.secrets[("gpu", "vramd-tls")]
            self.assertEqual(tls["type"], "kubernetes.io/tls")
            self.assertEqual(tls["metadata"]["labels"], {"app.kubernetes.io/instance": "t",
                                                         "app.kubernetes.io/managed-by": "vramd-ensure-secrets"})
            values = [self.stub.data("gpu", name)[key]
                      for name, key in (("vramd-token", "token"), ("vramd-valkey", "password"))]
            for value in values:
                self.assertRegex(value, r"^[0-9a-f]{64}$")
                self.assertNotIn(value, out + err, "a secret value was printed")
            self.assertNotEqual(values[0], values[1])
            stored = json.dumps(sorted(self.stub.secrets.items()))

            # Again (a restart, or another replica): every Secret exists and stays as it was.
            rc, out, err = ensure_secrets(self.stub, w, *ALL)
            self.assertEqual(rc, 0, err)
            self.assertEqual(out.splitlines(), [
                "secret gpu/vramd-tls: exists, checked (kubernetes.io/tls: ca.crt, client.crt, client.key, tls.crt, tls.key)",
                "secret gpu/vramd-token: exists, checked (Opaque: token)",
                "secret gpu/vramd-valkey: exists, checked (Opaque: password)"])
            self.assertEqual(json.dumps(sorted(self.stub.secrets.items())), stored)

    def test_an_api_error_exits_non_zero_and_names_it(self):
        with Workdir() as w:
            rc, out, err = ensure_secrets(self.stub, w, "--namespace", "denied", "--token-secret", "t")
            self.assertEqual(rc, 1)
            self.assertIn("create secret denied/t: HTTP 403", err)
            self.assertIn("cannot create resource", err)
            self.assertEqual(out, "")

    def test_an_unavailable_api_server_is_tried_again(self):
        self.stub.unavailable = 1
        with Workdir() as w:
            rc, out, err = ensure_secrets(self.stub, w, "--namespace", "gpu", "--token-secret", "t")
            self.assertEqual(rc, 0, err)
            self.assertIn("HTTP 503", err)
            self.assertEqual(out, "secret gpu/t: created (Opaque: token)\n")
            self.assertEqual(len(self.stub.posts), 2)

    def test_bad_arguments_exit_2_before_any_call(self):
        with Workdir() as w:
            for args, message in ((["--namespace", "gpu"], "nothing to do"),
                                  (["--token-secret", "t"], "--namespace: is required"),
                                  (["--namespace", "gpu", "--tls-secret", "t", "--dns-names", "a_b"],
                                   "neither a DNS name nor an IP address")):
                rc, _, err = ensure_secrets(self.stub, w, *args)
                self.assertEqual(rc, 2, err)
                self.assertIn(message, err)
            self.assertEqual(self.stub.posts, [])
        out = subprocess.run([VRAMD, "ensure-secrets", "--help"], capture_output=True, text=True, timeout=30,
                             env=clean_env())
        self.assertEqual(out.returncode, 0)
        self.assertIn("Usage: vramd ensure-secrets --namespace NS", out.stdout)

    def test_the_generated_certificates_and_token_secure_vramd(self):
        with Workdir() as w:
            rc, _, err = ensure_secrets(self.stub, w, *ALL)
            self.assertEqual(rc, 0, err)
            files = {k: w.file(k, v) for k, v in self.stub.data("gpu", "vramd-tls").items()}
            token = self.stub.data("gpu", "vramd-token")["token"]
            token_file = w.file("api-token", token)
            redis = w.redis()
            api_port = free_port()
            api = f"https://127.0.0.1:{api_port}"
            # Clients verify vramd against ca.crt, by the IP address in the SANs.
            anonymous = ssl.create_default_context(cafile=files["ca.crt"])
            scheduler = ssl.create_default_context(cafile=files["ca.crt"])
            scheduler.load_cert_chain(files["client.crt"], files["client.key"])
            v = w.vramd(["--config", homelab_config(w, redis.url), "--tls-cert-file", files["tls.crt"],
                         "--tls-key-file", files["tls.key"], "--tls-client-ca-file", files["ca.crt"],
                         "--api-listen", f"127.0.0.1:{api_port}", "--api-token-file", token_file],
                        scheme="https", ssl_ctx=scheduler)
            self.assertEqual(call(api, "GET", "/healthz", ctx=anonymous)[0], 200)
            self.assertEqual(call(api, "POST", "/scheduler/bind", bind_body("u-1", "ness-linux3"),
                                  ctx=anonymous)[0], 403)
            with self.assertRaises(REFUSED_AT_TLS):
                call(v.url, "POST", "/scheduler/filter", filter_body("u-1", "1Gi"), ctx=anonymous)
            self.assertEqual(call(v.url, "POST", "/scheduler/filter", filter_body("u-1", "1Gi"), ctx=scheduler)[0],
                             200)
            # The server certificate cannot stand in for the client certificate.
            wrong = ssl.create_default_context(cafile=files["ca.crt"])
            wrong.load_cert_chain(files["tls.crt"], files["tls.key"])
            with self.assertRaises(REFUSED_AT_TLS):
                call(v.url, "POST", "/scheduler/filter", filter_body("u-2", "1Gi"), ctx=wrong)
            usage = {"gpus": {"0": "1Gi"}}
            self.assertEqual(call(api, "PUT", "/v1/nodes/ness-linux3/usage", usage, ctx=anonymous)[0], 401)
            self.assertEqual(call(api, "PUT", "/v1/nodes/ness-linux3/usage", usage, ctx=anonymous,
                                  headers={"Authorization": "Bearer " + token})[0], 200)


if __name__ == "__main__":
    unittest.main(verbosity=2)
