"""Security (issue 7): HTTPS with client-certificate verification and
certificate reload (SIGHUP and file change), bearer tokens on mutating /v1
calls, Valkey AUTH from a file or the environment, secrets never in logs /
API output / errors / metrics, structured JSON logs with request ids."""

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Workdir, bind_body, filter_body, homelab_config, wait_for  # noqa: E402


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=d)


def make_cert(d, ca, name, server=True, cn=None, days=2):
    ext = os.path.join(d, f"{name}.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n" if server else "extendedKeyUsage=clientAuth\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn or name}", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", str(days), "-extfile", ext, "-out", f"{name}.crt", cwd=d)


def not_after(path):
    """A certificate's notAfter, seconds since the epoch (openssl's own reading)."""
    out = subprocess.run(["openssl", "x509", "-enddate", "-noout", "-in", path], check=True,
                         capture_output=True, text=True).stdout.strip()
    return int(ssl.cert_time_to_seconds(out.split("=", 1)[1]))


def expiry_metric(v, ctx, listener="listen"):
    """vramd_tls_certificate_expiry_timestamp_seconds{listener} on /metrics (None when absent)."""
    text = v.request("GET", "/metrics", ctx=ctx)[1]
    for line in text.splitlines():
        if line.startswith(f'vramd_tls_certificate_expiry_timestamp_seconds{{listener="{listener}"}} '):
            return int(float(line.split()[-1]))
    return None


def client_ctx(d, ca, cert=None):
    ctx = ssl.create_default_context(cafile=os.path.join(d, f"{ca}.crt"))
    if cert:
        ctx.load_cert_chain(os.path.join(d, f"{cert}.crt"), os.path.join(d, f"{cert}.key"))
    return ctx


class Tls(unittest.TestCase):
    def test_tls_12_at_least_and_forward_secret_aead_suites_only(self):
        """Issue 33: the TLS policy is explicit. A TLS 1.2 client offering
        only a suite without forward secrecy (static RSA key exchange) or
        without AEAD (CBC) is refused; ECDHE with AES-GCM, and TLS 1.3, are served."""
        with Workdir() as w:
            d = w.path
            make_ca(d, "ca1")
            make_cert(d, "ca1", "server1")
            redis = w.redis()
            ok = client_ctx(d, "ca1")
            v = w.vramd(["--config", homelab_config(w, redis.url), "--tls-cert-file", f"{d}/server1.crt",
                         "--tls-key-file", f"{d}/server1.key"], scheme="https", ssl_ctx=ok)
            self.assertEqual(v.request("GET", "/healthz")[0], 200)  # TLS 1.3

            def tls12(ciphers):
                ctx = client_ctx(d, "ca1")
                ctx.maximum_version = ssl.TLSVersion.TLSv1_2
                ctx.set_ciphers(ciphers)
                return ctx
            self.assertEqual(v.request("GET", "/healthz", ctx=tls12("ECDHE-RSA-AES128-GCM-SHA256"))[0], 200)
            for weak in ("AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA"):
                with self.subTest(cipher=weak):
                    with self.assertRaises((ssl.SSLError, urllib.error.URLError, ConnectionResetError)):
                        v.request("GET", "/healthz", ctx=tls12(weak))

    def test_https_client_certificates_and_reload(self):
        with Workdir() as w:
            d = w.path
            make_ca(d, "ca1")
            make_ca(d, "ca2")
            make_cert(d, "ca1", "server1")
            make_cert(d, "ca2", "server2", days=30)  # another notAfter, seen on /metrics after the reload
            make_cert(d, "ca1", "client")  # client certificates are signed by ca1
            os.rename(os.path.join(d, "server1.crt"), os.path.join(d, "tls.crt"))
            os.rename(os.path.join(d, "server1.key"), os.path.join(d, "tls.key"))
            redis = w.redis()
            good = client_ctx(d, "ca1", "client")
            v = w.vramd(["--config", homelab_config(w, redis.url), "--tls-cert-file", f"{d}/tls.crt",
                         "--tls-key-file", f"{d}/tls.key", "--tls-client-ca-file", f"{d}/ca1.crt"],
                        scheme="https", ssl_ctx=good)
            self.assertEqual(v.request("GET", "/healthz")[0], 200)
            # Issue 33: the served certificate's notAfter, for the alert weeks before it.
            self.assertEqual(expiry_metric(v, good), not_after(os.path.join(d, "tls.crt")))
            # No client certificate: the handshake is refused.
            with self.assertRaises((ssl.SSLError, urllib.error.URLError, ConnectionResetError)):
                v.request("GET", "/healthz", ctx=client_ctx(d, "ca1"))
            # Plain HTTP on the TLS port does not get an answer.
            with self.assertRaises(Exception):
                urllib.request.urlopen(f"http://127.0.0.1:{v.port}/healthz", timeout=3).read()

            # Rotate to a certificate of another CA, then SIGHUP.
            os.replace(os.path.join(d, "server2.crt"), os.path.join(d, "tls.crt"))
            os.replace(os.path.join(d, "server2.key"), os.path.join(d, "tls.key"))
            v.proc.send_signal(signal.SIGHUP)
            ca2 = client_ctx(d, "ca2", "client")
            wait_for(lambda: self._ok(v, ca2), 5, message="the new certificate after SIGHUP")
            with self.assertRaises((ssl.SSLError, urllib.error.URLError)):
                v.request("GET", "/healthz", ctx=good)  # trusts only ca1
            self.assertIn("TLS certificate reloaded", v.log())
            self.assertEqual(expiry_metric(v, ca2), not_after(os.path.join(d, "tls.crt")))
            self.assertGreater(expiry_metric(v, ca2) - time.time(), 29 * 86400)  # server2's 30 days

            # Rotate back without a signal: the file watcher reloads it.
            make_cert(d, "ca1", "server3")
            os.replace(os.path.join(d, "server3.key"), os.path.join(d, "tls.key"))
            os.replace(os.path.join(d, "server3.crt"), os.path.join(d, "tls.crt"))
            t0 = time.monotonic()
            wait_for(lambda: self._ok(v, good), 10, message="the certificate reloaded after a file change")
            print(f"\nTLS: reloaded on file change after {time.monotonic() - t0:.2f} s (check every 2 s)")

    def test_a_client_certificate_must_name_an_allowed_client_and_the_client_ca_reloads(self):
        """Issue 33 (attack): with a shared CA (one cert-manager issuer for the
        organisation), any client certificate it signed could call bind. With
        tls.client_names only the scheduler's name gets past the handshake;
        the client CA file is read again on SIGHUP, as the server's certificate."""
        with Workdir() as w:
            d = w.path
            make_ca(d, "ca1")
            make_ca(d, "ca2")
            make_cert(d, "ca1", "server1")
            make_cert(d, "ca1", "scheduler", server=False, cn="vramd-scheduler")
            make_cert(d, "ca1", "intruder", server=False, cn="billing-batch")
            make_cert(d, "ca2", "scheduler2", server=False, cn="vramd-scheduler")
            shutil.copy(os.path.join(d, "ca1.crt"), os.path.join(d, "client-ca.crt"))
            redis = w.redis()
            scheduler = client_ctx(d, "ca1", "scheduler")
            v = w.vramd(["--config", homelab_config(w, redis.url), "--tls-cert-file", f"{d}/server1.crt",
                         "--tls-key-file", f"{d}/server1.key", "--tls-client-ca-file", f"{d}/client-ca.crt",
                         "--tls-client-names", "vramd-scheduler,system:kube-scheduler"],
                        scheme="https", ssl_ctx=scheduler)
            self.assertEqual(v.request("GET", "/healthz")[0], 200)
            nodes = v.json("GET", "/v1/nodes")[1]
            with self.assertRaises((ssl.SSLError, urllib.error.URLError, ConnectionResetError)):
                v.request("POST", "/scheduler/bind", {"PodName": "x", "PodNamespace": "default",
                                                      "PodUID": "c0ffee00-0000-4000-8000-000000000001",
                                                      "Node": "ness-linux3"}, ctx=client_ctx(d, "ca1", "intruder"))
            wait_for(lambda: 'CN "billing-batch" is not among tls.client_names' in v.log(), 5,
                     message="the refusal logged with the certificate's name")
            self.assertEqual(v.json("GET", "/v1/nodes")[1]["epoch"], nodes["epoch"], "the ledger moved")
            # The client CA rotates to ca2: SIGHUP reads it again.
            shutil.copy(os.path.join(d, "ca2.crt"), os.path.join(d, "client-ca.crt"))
            v.proc.send_signal(signal.SIGHUP)
            scheduler2 = client_ctx(d, "ca1", "scheduler2")
            wait_for(lambda: self._ok(v, scheduler2), 5, message="the new client CA after SIGHUP")
            self.assertFalse(self._ok(v, scheduler), "a certificate of the old client CA still accepted")

    @staticmethod
    def _ok(v, ctx):
        try:
            return v.request("GET", "/healthz", ctx=ctx, timeout=2)[0] == 200
        except Exception:
            return False


class TokensAndSecrets(unittest.TestCase):
    PASSWORD = "valkey-S3cret-pw-4711"
    TOKEN = "api-T0ken-8a1c5e"

    def test_bearer_token_auth_and_no_secret_leaks(self):
        with Workdir() as w:
            redis = w.redis(password=self.PASSWORD)
            token_file = w.file("token", self.TOKEN + "\n")
            pw_file = w.file("pw", self.PASSWORD + "\n")
            cfg = homelab_config(w, redis.url)
            v = w.vramd(["--config", cfg, "--valkey-password-file", pw_file, "--api-token-file", token_file,
                         "--log-level", "debug"])
            wait_for(lambda: v.json("GET", "/v1/nodes")[1].get("nodes"), 10, message="nodes (AUTH works)")
            epoch = v.json("GET", "/v1/nodes")[1]["epoch"]
            body = {"gpus": {"0": "10Gi"}}
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": self.TOKEN},
                            {"Authorization": "Bearer " + self.TOKEN + "x"}):
                status, reply = v.json("PUT", "/v1/nodes/ness-linux3/usage", body, headers=headers)
                self.assertEqual(status, 401, headers)
                self.assertIn("bearer token", reply["error"])
            self.assertEqual(v.json("GET", "/v1/nodes")[1]["epoch"], epoch, "a refused call changed the ledger")
            status, _ = v.json("PUT", "/v1/nodes/ness-linux3/usage", body,
                               headers={"Authorization": "Bearer " + self.TOKEN})
            self.assertEqual(status, 200)
            # Lock calls need the token too.
            status, _ = v.json("POST", "/v1/locks/ness-linux3/0/acquire", {"owner": "pod-1/h1"})
            self.assertEqual(status, 401)
            # Extender verbs and reads work; an error path runs too.
            v.json("POST", "/scheduler/filter", filter_body("u1", "1Gi"))
            v.json("POST", "/scheduler/bind", bind_body("never-seen", "ness-linux3"))
            outputs = [v.request("GET", p)[1] for p in ("/metrics", "/v1/nodes", "/readyz", "/v1/locks")]

            # The same password from the environment; and a wrong one: errors must not echo it.
            v2 = w.vramd(["--config", cfg], env={"VRAMD_VALKEY_PASSWORD": self.PASSWORD})
            self.assertEqual(v2.request("GET", "/readyz")[0], 200)
            bad_pw = w.file("badpw", "not-the-" + self.PASSWORD)
            v3 = w.vramd(["--config", cfg, "--valkey-password-file", bad_pw])
            status, text = v3.request("GET", "/readyz")
            self.assertEqual(status, 503)
            outputs.append(text)
            outputs.append(v3.json("POST", "/scheduler/filter", filter_body("u2", "1Gi"))[1]["Error"])
            for proc in (v, v2, v3):
                proc.stop()
                outputs.append(proc.log())
            for text in outputs:
                self.assertNotIn(self.PASSWORD, text)
                self.assertNotIn(self.TOKEN, text)
            print(f"\nsecrets: checked {len(outputs)} outputs (logs at debug, /metrics, /v1, /readyz, errors)")


class Logs(unittest.TestCase):
    def test_json_logs_with_request_ids_and_no_per_request_info_lines(self):
        with Workdir() as w:
            redis = w.redis()
            v = w.vramd(["--config", homelab_config(w, redis.url), "--log-json"])
            wait_for(lambda: v.json("GET", "/v1/nodes")[1].get("nodes"), 10, message="nodes")
            # The epoch watch subscribes on a thread of its own and logs it at
            # info, after the API answers on a loaded machine: counted first.
            wait_for(lambda: "following ledger changes" in v.log(), 10, message="the epoch watch's subscription")
            lines_before = len(v.log().splitlines())
            for i in range(50):
                v.json("POST", "/scheduler/filter", filter_body(f"q{i}", "1Gi"))
            self.assertEqual(len(v.log().splitlines()), lines_before, "successful requests logged at info")
            v.json("POST", "/scheduler/bind", bind_body("weird \"pod\"", "ness-linux3"),
                   headers={"X-Request-Id": "req-42"})
            v.stop()
            records = [json.loads(line) for line in v.log().splitlines() if line.startswith("{")]
            self.assertEqual(len(records), len([l for l in v.log().splitlines() if l.strip()]),
                             "every log line is a JSON object")
            warn = [r for r in records if r.get("request_id") == "req-42"]
            self.assertTrue(warn, records[-5:])
            self.assertEqual(warn[0]["level"], "warning")
            self.assertIn('weird "pod"', warn[0]["msg"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
