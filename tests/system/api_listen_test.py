"""The second listener, api_listen (issue 13, secure by default): it serves
/healthz, /readyz, /metrics and /v1 with the same token rules but never the
extender verbs, and never asks for a client certificate; with mTLS on
`listen`, only a client holding a certificate signed by the client CA reaches
/scheduler/bind. The real vramd binary against a real redis-server;
certificates made with the openssl command, as security_test.py does."""

import base64
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import unittest
import urllib.error
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (VRAMD, Workdir, bind_body, clean_env, filter_body, free_port, homelab_config,  # noqa: E402
                     wait_for)
from security_test import client_ctx, make_ca, make_cert  # noqa: E402

REFUSED_AT_TLS = (ssl.SSLError, urllib.error.URLError, ConnectionResetError, ConnectionAbortedError)


def call(url, method, path, body=None, headers=None, ctx=None, timeout=5):
    """(status, text) of one request; HTTP errors are answers, not exceptions."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def epoch(url, ctx=None):
    return json.loads(call(url, "GET", "/v1/nodes", ctx=ctx)[1])["epoch"]


class ApiListenWithMutualTls(unittest.TestCase):
    TOKEN = "api-listen-T0ken"

    def test_scheduler_verbs_need_a_client_certificate_and_the_api_listener_serves_the_rest(self):
        with Workdir() as w:
            d = w.path
            make_ca(d, "ca1")
            make_ca(d, "clientca")
            make_ca(d, "ca2")
            make_cert(d, "ca1", "server")
            make_cert(d, "ca2", "server2")
            make_cert(d, "clientca", "scheduler", server=False)
            make_cert(d, "ca1", "stranger", server=False)  # a client certificate of another CA
            redis = w.redis()
            token_file = w.file("token", self.TOKEN + "\n")
            api_port = free_port()
            api = f"https://127.0.0.1:{api_port}"
            scheduler = client_ctx(d, "ca1", "scheduler")
            anonymous = client_ctx(d, "ca1")
            v = w.vramd(["--config", homelab_config(w, redis.url), "--tls-cert-file", f"{d}/server.crt",
                         "--tls-key-file", f"{d}/server.key", "--tls-client-ca-file", f"{d}/clientca.crt",
                         "--api-listen", f"127.0.0.1:{api_port}", "--api-token-file", token_file],
                        scheme="https", ssl_ctx=scheduler)
            self.assertIn(f"(api: https://127.0.0.1:{api_port})", v.log())
            wait_for(lambda: json.loads(call(api, "GET", "/v1/nodes", ctx=anonymous)[1]).get("nodes"), 10,
                     message="nodes on the api listener")

            # The api listener: no client certificate needed, everything but the verbs.
            for path in ("/healthz", "/readyz", "/metrics", "/v1/nodes", "/v1/locks"):
                self.assertEqual(call(api, "GET", path, ctx=anonymous)[0], 200, path)
            before = epoch(api, anonymous)
            for verb in ("filter", "prioritize", "bind", "preempt"):
                status, text = call(api, "POST", f"/scheduler/{verb}", bind_body("u-api", "ness-linux3"),
                                    ctx=anonymous)
                self.assertEqual(status, 403, verb)
                self.assertIn("not served on this listener (api_listen)", json.loads(text)["error"])
            # ... with a client certificate too: the listener, not the client, decides.
            self.assertEqual(call(api, "POST", "/scheduler/bind", bind_body("u-api", "ness-linux3"),
                                  ctx=scheduler)[0], 403)
            self.assertEqual(epoch(api, anonymous), before, "a refused verb changed the ledger")
            # The same token rules as on listen.
            usage = {"gpus": {"0": "10Gi"}}
            self.assertEqual(call(api, "PUT", "/v1/nodes/ness-linux3/usage", usage, ctx=anonymous)[0], 401)
            self.assertEqual(call(api, "PUT", "/v1/nodes/ness-linux3/usage", usage, ctx=anonymous,
                                  headers={"Authorization": "Bearer " + self.TOKEN})[0], 200)
            self.assertEqual(call(api, "POST", "/v1/locks/ness-linux3/0/acquire", {"owner": "p/1"},
                                  ctx=anonymous)[0], 401)
            # TLS only: plain HTTP gets no answer.
            with self.assertRaises(Exception):
                urllib.request.urlopen(f"http://127.0.0.1:{api_port}/healthz", timeout=3).read()

            # listen: without a client certificate, or with one of another CA, the handshake fails.
            before = epoch(api, anonymous)  # after the usage report
            for ctx in (anonymous, client_ctx(d, "ca1", "stranger")):
                with self.assertRaises(REFUSED_AT_TLS):
                    call(v.url, "POST", "/scheduler/bind", bind_body("u-1", "ness-linux3"), ctx=ctx)
            self.assertEqual(epoch(api, anonymous), before)
            # With the scheduler's certificate, filter and bind are served.
            status, _ = call(v.url, "POST", "/scheduler/filter", filter_body("u-1", "8Gi"), ctx=scheduler)
            self.assertEqual(status, 200)
            status, text = call(v.url, "POST", "/scheduler/bind", bind_body("u-1", "ness-linux3"), ctx=scheduler)
            self.assertEqual((status, json.loads(text).get("Error")), (200, ""), text)
            self.assertNotEqual(epoch(api, anonymous), before, "the bind reserved")
            # Both listeners count into the same request metrics.
            metrics = call(api, "GET", "/metrics", ctx=anonymous)[1]
            self.assertIn('vramd_http_requests_total{verb="refused",code="403"} 5', metrics)
            self.assertIn('vramd_http_requests_total{verb="bind",code="200"} 1', metrics)
            self.assertEqual(metrics.count("# TYPE vramd_http_request_duration_seconds histogram"), 1)

            # SIGHUP reloads the certificate on both listeners.
            os.replace(os.path.join(d, "server2.crt"), os.path.join(d, "server.crt"))
            os.replace(os.path.join(d, "server2.key"), os.path.join(d, "server.key"))
            v.proc.send_signal(signal.SIGHUP)
            ca2 = client_ctx(d, "ca2")
            wait_for(lambda: self._ok(api, ca2), 5, message="the api listener's new certificate")
            wait_for(lambda: self._ok(v.url, client_ctx(d, "ca2", "scheduler")), 5,
                     message="listen's new certificate")
            self.assertEqual(v.stop(), 0)

    @staticmethod
    def _ok(url, ctx):
        try:
            return call(url, "GET", "/healthz", ctx=ctx, timeout=2)[0] == 200
        except Exception:
            return False


def admission_review(annotations, uid="rev-1"):
    """An AdmissionReview v1 of a pod CREATE in team-a asking for 4Gi of VRAM, as the API server sends it."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "infer", "namespace": "team-a", "annotations": annotations},
           "spec": {"containers": [{"name": "main", "image": "x",
                                    "resources": {"limits": {"vramd.io/vram": "4Gi"}}}]}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "namespace": "team-a", "operation": "CREATE",
                        "userInfo": {"username": "alice"}, "object": pod}}


class AdmissionListen(unittest.TestCase):
    """admission.listen (issue 34): the webhook on a port of its own, /admission/*
    and nothing else, TLS without a client certificate (the API server presents
    none), so a NetworkPolicy can open that one port to the control plane; the
    API and the extender verbs are not there, and the webhook is no longer on
    api_listen."""

    def test_the_admission_listener_serves_the_webhook_and_nothing_else(self):
        with Workdir() as w:
            d = w.path
            make_ca(d, "ca1")
            make_ca(d, "clientca")
            make_cert(d, "ca1", "server")
            make_cert(d, "clientca", "scheduler", server=False)
            redis = w.redis()
            api_port, adm_port = free_port(), free_port()
            api, adm = f"https://127.0.0.1:{api_port}", f"https://127.0.0.1:{adm_port}"
            anonymous = client_ctx(d, "ca1")
            v = w.vramd(["--config", homelab_config(w, redis.url), "--tls-cert-file", f"{d}/server.crt",
                         "--tls-key-file", f"{d}/server.key", "--tls-client-ca-file", f"{d}/clientca.crt",
                         "--api-listen", f"127.0.0.1:{api_port}", "--admission-enabled",
                         "--admission-listen", f"127.0.0.1:{adm_port}", "--admission-scheduler-name",
                         "vramd-scheduler", "--admission-vramd-users", "system:serviceaccount:vramd-system:vramd"],
                        scheme="https", ssl_ctx=client_ctx(d, "ca1", "scheduler"))
            self.assertIn(f"(admission: https://127.0.0.1:{adm_port})", v.log())
            wait_for(lambda: self._answers(adm, anonymous), 10, message="the admission listener")

            # The webhook, without a client certificate: a malformed annotation refused with
            # filter's message, a user-written placement annotation refused, a plain VRAM pod mutated.
            for annotations, part in (({"vramd.io/gpu-count": "two"}, "invalid VRAM request"),
                                      ({"vramd.io/gpus": "0"}, "annotation vramd.io/gpus is written by vramd")):
                status, text = call(adm, "POST", "/admission/validate", admission_review(annotations), ctx=anonymous)
                resp = json.loads(text)["response"]
                self.assertEqual((status, resp["uid"], resp["allowed"]), (200, "rev-1", False), text)
                self.assertIn(part, resp["status"]["message"])
            status, text = call(adm, "POST", "/admission/mutate", admission_review({}), ctx=anonymous)
            resp = json.loads(text)["response"]
            self.assertEqual((status, resp["allowed"], resp["patchType"]), (200, True, "JSONPatch"), text)
            patch = json.loads(base64.b64decode(resp["patch"]))
            self.assertIn({"op": "add", "path": "/spec/schedulerName", "value": "vramd-scheduler"}, patch)
            self.assertEqual(call(adm, "POST", "/admission/validate-direct-bind", admission_review({}),
                                  ctx=anonymous)[0], 200)

            # Nothing else on that port: no probes, no /metrics, no /v1, no extender verb.
            for method, path in (("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics"), ("GET", "/v1/nodes"),
                                 ("POST", "/scheduler/bind"), ("POST", "/scheduler/filter"), ("GET", "/v1/locks")):
                body = bind_body("u-a", "ness-linux3") if method == "POST" else None
                self.assertEqual(call(adm, method, path, body, ctx=anonymous)[0], 404, path)
            # ... and the webhook is no longer on the API listener.
            self.assertEqual(call(api, "POST", "/admission/validate", admission_review({}), ctx=anonymous)[0], 404)
            self.assertEqual(call(api, "GET", "/healthz", ctx=anonymous)[0], 200)
            # TLS only: plain HTTP gets no answer.
            with self.assertRaises(Exception):
                urllib.request.urlopen(f"http://127.0.0.1:{adm_port}/admission/validate", timeout=3).read()
            # Its own connection metrics, the shared request metrics (the probe above, then three calls).
            metrics = call(api, "GET", "/metrics", ctx=anonymous)[1]
            self.assertIn('vramd_http_connections{listener="admission_listen"}', metrics)
            validated = re.search(r'^vramd_http_requests_total\{verb="admission_validate",code="200"\} (\d+)$',
                                  metrics, re.M)
            self.assertTrue(validated and int(validated.group(1)) >= 3, "admission_validate requests counted")
            self.assertEqual(v.stop(), 0)

    @staticmethod
    def _answers(url, ctx):
        try:
            return call(url, "POST", "/admission/validate", admission_review({}), ctx=ctx, timeout=2)[0] == 200
        except Exception:
            return False

    def test_admission_listen_without_tls_or_without_the_webhook_is_refused_at_start(self):
        with Workdir() as w:
            for extra, part in ((["--admission-enabled"], "admission.listen needs tls.cert_file"),
                                ([], "admission.listen needs admission.enabled")):
                res = subprocess.run([VRAMD, "--no-kube", "--admission-listen", f"127.0.0.1:{free_port()}", *extra],
                                     capture_output=True, text=True, timeout=10, env=clean_env(), cwd=w.path)
                self.assertEqual(res.returncode, 2, res.stderr)
                self.assertIn(part, res.stderr + res.stdout)


class ApiListenPlain(unittest.TestCase):
    def test_plain_http_api_listener_refuses_the_verbs_that_listen_serves(self):
        with Workdir() as w:
            redis = w.redis()
            api_port = free_port()
            api = f"http://127.0.0.1:{api_port}"
            v = w.vramd(["--config", homelab_config(w, redis.url), "--api-listen", f"127.0.0.1:{api_port}"])
            self.assertEqual(call(api, "GET", "/healthz")[0], 200)
            self.assertEqual(call(api, "POST", "/scheduler/filter", filter_body("u-2", "1Gi"))[0], 403)
            self.assertEqual(call(v.url, "POST", "/scheduler/filter", filter_body("u-2", "1Gi"))[0], 200)
            self.assertEqual(call(api, "GET", "/scheduler/filter")[0], 404)

    def test_a_bad_api_listen_stops_vramd_with_a_clear_message(self):
        with Workdir() as w:
            redis = w.redis()
            cfg = homelab_config(w, redis.url)
            same = f"127.0.0.1:{free_port()}"
            for extra, rc, message in (
                    (["--api-listen", "nohost"], 2, "config key api_listen"),
                    (["--listen", same, "--api-listen", same], 2, "api_listen must differ from listen")):
                out = subprocess.run([VRAMD, "--config", cfg, *extra], capture_output=True, text=True, timeout=30,
                                     env=clean_env())
                self.assertEqual(out.returncode, rc, out.stderr)
                self.assertIn(message, out.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
