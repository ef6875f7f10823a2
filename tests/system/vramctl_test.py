"""vramctl's read commands against the real vramd and redis-server: `nodes`
and `pods` (table, -o wide and -o json, -o before or after the command),
`explain -f`, `version`, shell completion, the kubectl plugin (kubectl-vram,
and `kubectl vram` through a real kubectl when one is installed), TLS (a CA,
a client certificate, both refused cleanly when missing) and the error paths
(vramd not reachable, an error answer, an unknown -o). The lock commands are
tested in tests/integration/lock_cli_test.cc."""

import http.server
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import threading
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (BIN_DIR, GI, Workdir, bind_body, clean_env, filter_body, free_port,  # noqa: E402
                     homelab_config)
from security_test import make_ca, make_cert, openssl  # noqa: E402

VRAMCTL = os.path.abspath(os.path.join(BIN_DIR, "vramctl"))
PLUGIN = os.path.abspath(os.path.join(BIN_DIR, "kubectl-vram"))


def run(argv, env=None):
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=clean_env(env))
    return out.returncode, out.stdout, out.stderr


def vramctl(server, *args, env=None):
    return run([VRAMCTL, "--server", server, *args], env)


class VramctlReads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w = Workdir().__enter__()
        redis = cls.w.redis()
        cls.v = cls.w.vramd(["--config", homelab_config(cls.w, redis.url)])
        status, _ = cls.v.json("POST", "/scheduler/filter", filter_body("u-ctl-1", "24Gi"))
        assert status == 200
        status, body = cls.v.json("POST", "/scheduler/bind", bind_body("u-ctl-1", "ness-linux3"))
        assert status == 200 and not body.get("Error"), body

    @classmethod
    def tearDownClass(cls):
        cls.w.__exit__(None, None, None)

    def test_nodes_table_lists_every_node_and_gpu_with_capacity_and_allocation(self):
        rc, out, err = vramctl(self.v.url, "nodes")
        self.assertEqual(rc, 0, err)
        rows = [line.split() for line in out.splitlines()]
        self.assertEqual(rows[0][:5], ["NODE", "GPU", "CAPACITY", "ALLOCATED", "USED"])
        linux3 = next(r for r in rows if r and r[0] == "ness-linux3")
        self.assertEqual(linux3[1:4], ["all", "96Gi", "24Gi"])
        self.assertTrue(any(r and r[0] == "ness-server2" and r[2] == "8Gi" for r in rows), out)
        self.assertIn("(* usage not reported or stale: U = A)", out)

    def test_the_token_is_never_sent_in_plain_http_to_another_host(self):
        """Issue 33: a token file and an http:// server other than loopback
        is refused before any connection (0.0.0.0 stands for "not loopback"
        and would still stay on this machine); over loopback it works."""
        token = self.w.file("ctl-token", "t0k\n")
        port = self.v.url.rsplit(":", 1)[1]
        rc, out, err = vramctl(f"http://0.0.0.0:{port}", "--token-file", token, "nodes")
        self.assertEqual(rc, 2, err)
        self.assertIn("refusing to send the token (--token-file) over plain http to http://0.0.0.0:" + port, err)
        self.assertEqual(out, "")
        rc, out, err = vramctl(self.v.url, "--token-file", token, "nodes")
        self.assertEqual(rc, 0, err)
        rc, out, err = vramctl(f"http://0.0.0.0:{port}", "--token-file", token, "--insecure-plaintext-token", "nodes")
        self.assertEqual(rc, 0, err)

    def test_raw_sends_one_request_and_prints_the_body(self):
        rc, out, err = vramctl(self.v.url, "raw", "GET", "/v1/nodes/ness-linux3")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["allocated_bytes"], 24 * GI)
        body = self.w.file("filter.json", filter_body("u-raw-1", "200Gi"))
        rc, out, err = vramctl(self.v.url, "raw", "POST", "/scheduler/filter", "-f", body)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["NodeNames"], [])
        rc, out, err = vramctl(self.v.url, "raw", "GET", "/v1/nodes/no-such-node")
        self.assertEqual(rc, 1)
        self.assertIn("404", err)
        for bad in (["raw", "DELETE", "/v1/nodes"], ["raw", "GET", "v1/nodes"], ["raw", "POST", "/scheduler/filter"]):
            rc, _, err = vramctl(self.v.url, *bad)
            self.assertEqual(rc, 2, (bad, err))

    def test_nodes_json_is_the_servers_view(self):
        rc, out, err = vramctl(self.v.url, "nodes", "ness-linux3", "-o", "json")
        self.assertEqual(rc, 0, err)
        nodes = json.loads(out)
        self.assertEqual([n["name"] for n in nodes], ["ness-linux3"])
        self.assertEqual(nodes[0]["allocated_bytes"], 24 * GI)
        self.assertEqual(nodes[0]["capacity_bytes"], 96 * GI)

    def test_pods_lists_the_bound_reservation(self):
        rc, out, err = vramctl(self.v.url, "pods")
        self.assertEqual(rc, 0, err)
        row = next(line.split() for line in out.splitlines() if "default/p-u-ctl-1" in line)
        self.assertEqual(row[0], "ness-linux3")
        self.assertEqual(row[2:4], ["0", "24Gi"])

    def test_explain_a_manifest_says_where_it_fits_and_why_not_elsewhere(self):
        pod = filter_body("u-ctl-2", "40Gi")["Pod"]
        path = self.w.file("pod.json", pod)
        rc, out, err = vramctl(self.v.url, "explain", "-f", path)
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertIn("needs 40Gi", lines[0])
        self.assertIn("fits on 1 of 2 nodes now", lines[0])
        self.assertTrue(any(l.split()[:4] == ["ness-linux3", "fits", "on", "GPU"] for l in lines), out)
        server2 = next(l for l in lines if l.strip().startswith("ness-server2"))
        self.assertIn("never fits", server2)
        self.assertIn("8Gi", server2)

    def test_an_unknown_node_is_an_error_with_the_servers_message(self):
        rc, out, err = vramctl(self.v.url, "nodes", "no-such-node")
        self.assertEqual(rc, 1)
        self.assertIn("HTTP 404", err)

    def test_an_unreachable_server_fails_with_a_clear_message(self):
        url = f"http://127.0.0.1:{free_port()}"
        for args in (["nodes"], ["pods"], ["explain", "default/x"], ["lock", "list"]):
            rc, out, err = vramctl(url, *args)
            self.assertEqual(rc, 1, args)
            self.assertIn(f"cannot reach vramd at {url}", err, args)

    def test_o_json_is_never_a_node_name_before_or_after_the_command(self):
        for argv in (["pods", "-o", "json"], ["-o", "json", "pods"], ["pods", "--output=json"], ["pods", "-ojson"]):
            rc, out, err = vramctl(self.v.url, *argv)
            self.assertEqual(rc, 0, (argv, err))
            pods = json.loads(out)
            mine = [p for p in pods if p["uid"] == "u-ctl-1"]
            self.assertEqual(len(mine), 1, (argv, out))
            self.assertEqual(mine[0]["node"], "ness-linux3")
            self.assertEqual(mine[0]["vram_per_gpu_bytes"], 24 * GI)
            self.assertEqual(mine[0]["gpus"], [0])
        # A node named after the flags: only that node's pods.
        rc, out, err = vramctl(self.v.url, "pods", "ness-server2", "-o", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), [])

    def test_every_command_takes_the_same_o_and_refuses_an_unknown_one(self):
        for args in (["nodes"], ["pods"], ["explain", "default/x"], ["lock", "list"], ["version"]):
            rc, out, err = vramctl(self.v.url, *args, "-o", "yaml")
            self.assertEqual(rc, 2, args)
            self.assertIn('unknown output format "yaml" (use -o table, -o wide or -o json)', err, args)
            self.assertEqual(out, "", args)
        rc, out, err = vramctl(self.v.url, "pods", "-o")
        self.assertEqual(rc, 2)
        self.assertIn("--output needs a value", err)
        rc, out, err = vramctl(self.v.url, "lock", "list", "-o", "json")
        self.assertEqual(rc, 0, err)
        self.assertIsInstance(json.loads(out), list)

    def test_wide_adds_columns_to_the_table(self):
        rc, table, err = vramctl(self.v.url, "pods")
        self.assertEqual(rc, 0, err)
        rc, wide, err = vramctl(self.v.url, "pods", "-o", "wide")
        self.assertEqual(rc, 0, err)
        head, wide_head = table.splitlines()[0].split(), wide.splitlines()[0].split()
        self.assertEqual(wide_head[:len(head)], head)
        self.assertEqual(wide_head[len(head):], ["PEAK/GPU", "PRIORITY", "AGE", "UID", "LIMIT-REASON"])
        row = next(line.split() for line in wide.splitlines() if "default/p-u-ctl-1" in line)
        self.assertEqual(row[-2], "u-ctl-1")
        self.assertEqual(row[-1], "-")  # no agent reports its enforcement (issue 34)
        self.assertEqual(row[head.index("LIMIT")], "-")
        rc, nodes_wide, err = vramctl(self.v.url, "-o", "wide", "nodes", "ness-linux3")
        self.assertEqual(rc, 0, err)
        rows = [line.split() for line in nodes_wide.splitlines()]
        self.assertEqual(rows[0][-3:], ["PODS", "REPORTED", "UUID"])
        self.assertEqual(rows[1][0:2], ["ness-linux3", "all"])
        self.assertEqual(rows[1][-3], "1")  # one reservation on the node

    def test_explain_json_is_the_apis_answer(self):
        pod = filter_body("u-ctl-3", "40Gi")["Pod"]
        path = self.w.file("pod3.json", pod)
        rc, out, err = vramctl(self.v.url, "explain", "-f", path, "-o", "json")
        self.assertEqual(rc, 0, err)
        body = json.loads(out)
        self.assertEqual(body["request"]["total_bytes"], 40 * GI)
        self.assertEqual(body["fits_on"], 1)
        self.assertEqual({n["node"]: n["verdict"] for n in body["nodes"]},
                         {"ness-linux3": "fits", "ness-server2": "never_fits"})

    def test_version_prints_the_client_and_the_servers_version(self):
        status, metrics = self.v.request("GET", "/metrics")
        served = re.search(r'^vramd_build_info\{version="([^"]+)"\}', metrics, re.M).group(1)
        rc, out, err = vramctl(self.v.url, "version")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.splitlines(), [f"Client Version: {served}", f"Server Version: {served} ({self.v.url})"])
        rc, out, err = vramctl(self.v.url, "version", "-o", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), {"client": {"version": served},
                                           "server": {"url": self.v.url, "version": served}})
        url = f"http://127.0.0.1:{free_port()}"
        rc, out, err = vramctl(url, "version")
        self.assertEqual(rc, 1)
        self.assertEqual(out.splitlines(), [f"Client Version: {served}", f"Server Version: unknown ({url})"])
        self.assertIn(f"cannot reach vramd at {url}", err)
        rc, out, err = vramctl(url, "version", "--client")
        self.assertEqual((rc, out), (0, f"Client Version: {served}\n"), err)

    def test_server_and_flags_from_the_environment(self):
        rc, out, err = run([VRAMCTL, "nodes", "ness-linux3", "-o", "json"], {"VRAMD_SERVER": self.v.url})
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)[0]["name"], "ness-linux3")
        # TLS options with an http:// server are a usage error, from a flag or the environment.
        rc, out, err = run([VRAMCTL, "nodes"], {"VRAMD_SERVER": self.v.url, "VRAMD_CACERT": "/nonexistent"})
        self.assertEqual(rc, 2)
        self.assertIn("need an https:// server", err)

    def test_kubectl_vram_is_the_same_program_with_kubectl_usage(self):
        self.assertTrue(os.path.islink(PLUGIN), "the build makes kubectl-vram -> vramctl")
        rc, out, err = run([PLUGIN, "--help"])
        self.assertEqual(rc, 0, err)
        self.assertIn("Usage: kubectl vram [FLAGS] COMMAND", out)
        self.assertNotIn("vramctl [FLAGS]", out)
        rc, out, err = run([PLUGIN, "--server", self.v.url, "pods", "-o", "json"])
        self.assertEqual(rc, 0, err)
        self.assertIn("u-ctl-1", [p["uid"] for p in json.loads(out)])

    def test_kubectl_runs_it_as_a_plugin(self):
        # kubectl on PATH, else the one the Kubernetes testbed builds (the
        # test command builds it before the tiers run); neither is a failure.
        built = os.path.join(os.environ.get("VRAMD_CACHE", os.path.expanduser("~/.cache/vramd")),
                             "k8s-1.20.2", "bin", "kubectl")
        kubectl = shutil.which("kubectl") or (built if os.access(built, os.X_OK) else None)
        self.assertIsNotNone(kubectl, f"no kubectl on PATH nor at {built} (tests/e2e/testbed/build-k8s.sh)")
        env = {"PATH": os.path.dirname(PLUGIN) + os.pathsep + os.environ.get("PATH", "")}
        rc, out, err = run([kubectl, "vram", "--server", self.v.url, "nodes", "ness-linux3", "-o", "json"], env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)[0]["allocated_bytes"], 24 * GI)
        rc, out, err = run([kubectl, "plugin", "list"], env)
        self.assertIn(PLUGIN, out + err)

    def test_bash_completion_offers_commands_flags_and_output_formats(self):
        rc, script, err = vramctl(self.v.url, "completion", "bash")
        self.assertEqual(rc, 0, err)
        path = self.w.file("completion.bash", script)

        def complete(*words):
            line = " ".join(f"'{w}'" for w in words)
            prog = (f"source {path}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _vramctl; "
                    'printf "%s\\n" "${COMPREPLY[@]}"')
            out = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, timeout=30)
            self.assertEqual(out.returncode, 0, out.stderr)
            return out.stdout.split()

        self.assertEqual(complete("vramctl", "pods", "-o", ""), ["table", "wide", "json"])
        self.assertEqual(complete("kubectl-vram", "-o", "w"), ["wide"])
        self.assertTrue({"nodes", "pods", "explain", "lock", "version", "completion"} <= set(complete("vramctl", "")))
        self.assertEqual(complete("vramctl", "--server", "x", "lo"), ["lock"])
        self.assertEqual(set(complete("vramctl", "lock", "")) & {"acquire", "run", "list"}, {"acquire", "run", "list"})
        self.assertIn("--heartbeat", complete("vramctl", "lock", "run", "--"))
        self.assertEqual(complete("vramctl", "--ca"), ["--cacert"])
        self.assertEqual(complete("vramctl", "completion", "")[:2], ["bash", "zsh"])
        for shell in ("zsh", "fish"):
            rc, out, err = vramctl(self.v.url, "completion", shell)
            self.assertEqual(rc, 0 if shell == "zsh" else 2, err)
        rc, out, err = vramctl(self.v.url, "completion", "zsh")
        self.assertTrue(out.startswith("#compdef vramctl kubectl-vram"), out[:80])

    def test_zsh_completion_offers_commands_flags_and_output_formats(self):
        # scripts/install-deps.sh --test installs zsh: a missing zsh is a
        # failure of the test command, never a silent skip.
        self.assertIsNotNone(shutil.which("zsh"), "no zsh on PATH (scripts/install-deps.sh --test installs it)")
        rc, script, err = vramctl(self.v.url, "completion", "zsh")
        self.assertEqual(rc, 0, err)
        path = self.w.file("completion.zsh", script)
        check = subprocess.run(["zsh", "-n", path], capture_output=True, text=True, timeout=30)
        self.assertEqual(check.returncode, 0, check.stderr)

        def complete(*words):
            # compinit's compadd and _files stand in as functions that print what they are offered.
            line = " ".join(f"'{w}'" for w in words)
            prog = ("compdef() { :; }; compadd() { [[ $1 == -- ]] && shift; print -l -- \"$@\"; }; "
                    f"_files() {{ print FILES; }}; source {path}; words=({line}); CURRENT={len(words)}; _vramctl")
            out = subprocess.run(["zsh", "-f", "-c", prog], capture_output=True, text=True, timeout=30)
            self.assertEqual(out.returncode, 0, out.stderr)
            return out.stdout.split()

        self.assertEqual(complete("vramctl", "pods", "-o", ""), ["table", "wide", "json"])
        self.assertEqual(complete("kubectl-vram", "explain", "-f", ""), ["FILES"])
        self.assertTrue({"nodes", "pods", "explain", "lock", "version", "completion", "--cacert", "-o"}
                        <= set(complete("vramctl", "")))
        self.assertEqual(complete("vramctl", "lock", "")[:5], ["acquire", "heartbeat", "release", "list", "run"])
        self.assertIn("--stop-on-loss", complete("vramctl", "--server", "x", "lock", "run", "--no"))
        self.assertEqual(complete("vramctl", "completion", "")[:2], ["bash", "zsh"])


SERVICE_NAME = "vramd.vramd-system.svc"


def make_server_cert(d, ca, name):
    """A server certificate for 127.0.0.1 and the Service's DNS name."""
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write(f"subjectAltName=IP:127.0.0.1,DNS:{SERVICE_NAME}\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)


class VramctlTls(unittest.TestCase):
    """vramd with a server certificate and a client CA (mTLS), as the chart
    runs it: vramctl needs the CA and a client certificate."""

    @classmethod
    def setUpClass(cls):
        cls.w = Workdir().__enter__()
        d = cls.d = cls.w.path
        make_ca(d, "ca")
        make_ca(d, "other-ca")
        make_server_cert(d, "ca", "server")
        make_cert(d, "ca", "client", server=False)
        make_cert(d, "other-ca", "stranger", server=False)
        redis = cls.w.redis()
        ctx = ssl.create_default_context(cafile=f"{d}/ca.crt")
        ctx.load_cert_chain(f"{d}/client.crt", f"{d}/client.key")
        cls.v = cls.w.vramd(["--config", homelab_config(cls.w, redis.url), "--tls-cert-file", f"{d}/server.crt",
                             "--tls-key-file", f"{d}/server.key", "--tls-client-ca-file", f"{d}/ca.crt"],
                            scheme="https", ssl_ctx=ctx)
        cls.client = ["--cert", f"{d}/client.crt", "--key", f"{d}/client.key"]

    @classmethod
    def tearDownClass(cls):
        cls.w.__exit__(None, None, None)

    def test_with_the_ca_and_a_client_certificate_it_works(self):
        rc, out, err = vramctl(self.v.url, "--cacert", f"{self.d}/ca.crt", *self.client, "nodes", "-o", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual({n["name"] for n in json.loads(out)}, {"ness-linux3", "ness-server2"})
        # The same from the environment, flags after the command.
        rc, out, err = run([VRAMCTL, "pods"], {"VRAMD_SERVER": self.v.url, "VRAMD_CACERT": f"{self.d}/ca.crt",
                                               "VRAMD_CERT": f"{self.d}/client.crt",
                                               "VRAMD_KEY": f"{self.d}/client.key"})
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.split()[:2], ["NODE", "POD"])
        rc, out, err = vramctl(self.v.url, "version", "--cacert", f"{self.d}/ca.crt", *self.client)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"Server Version: \S+ \(https://")

    def test_without_the_ca_the_servers_certificate_is_refused_clearly(self):
        rc, out, err = vramctl(self.v.url, *self.client, "nodes")
        self.assertEqual(rc, 1)
        self.assertIn(f"cannot reach vramd at {self.v.url}: SSLServerVerification", err)
        self.assertIn("vramd's certificate is not trusted", err)
        self.assertIn("pass --cacert FILE", err)
        # The right CA, but the certificate does not name the host asked for (it names 127.0.0.1
        # and the Service), as through a port-forward to localhost: --tls-server-name names it.
        trust = ["--cacert", f"{self.d}/ca.crt", *self.client]
        localhost = f"https://localhost:{self.v.port}"
        rc, out, err = vramctl(localhost, *trust, "nodes")
        self.assertEqual(rc, 1)
        self.assertIn("SSLServerVerification", err)
        self.assertIn("hostname mismatch", err)
        self.assertIn("--tls-server-name NAME", err)
        rc, out, err = vramctl(localhost, *trust, "--tls-server-name", SERVICE_NAME, "nodes", "-o", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(json.loads(out)), 2)
        rc, out, err = run([VRAMCTL, "nodes"], {"VRAMD_SERVER": localhost, "VRAMD_TLS_SERVER_NAME": "other.svc",
                                                "VRAMD_CACERT": f"{self.d}/ca.crt", "VRAMD_CERT": f"{self.d}/client.crt",
                                                "VRAMD_KEY": f"{self.d}/client.key"})
        self.assertEqual(rc, 1)
        self.assertIn("does not name other.svc", err)
        # Trusting another CA is no better.
        rc, out, err = vramctl(self.v.url, "--cacert", f"{self.d}/other-ca.crt", *self.client, "nodes")
        self.assertEqual(rc, 1)
        self.assertIn("SSLServerVerification", err)
        # --insecure-skip-tls-verify skips the check (the client certificate is still needed).
        rc, out, err = vramctl(self.v.url, "--insecure-skip-tls-verify", *self.client, "nodes", "-o", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(json.loads(out)), 2)

    def test_without_a_client_certificate_vramd_refuses_and_vramctl_says_why(self):
        for extra in ([], ["--cert", f"{self.d}/stranger.crt", "--key", f"{self.d}/stranger.key"]):
            rc, out, err = vramctl(self.v.url, "--cacert", f"{self.d}/ca.crt", *extra, "nodes")
            self.assertEqual(rc, 1, extra)
            self.assertEqual(out, "", extra)
            self.assertIn(f"cannot reach vramd at {self.v.url}", err, extra)
            self.assertIn("the TLS connection failed", err, extra)
        self.assertIn("--cert FILE --key FILE", vramctl(self.v.url, "--cacert", f"{self.d}/ca.crt", "nodes")[2])

    def test_tls_option_errors_are_usage_errors(self):
        cases = [
            (["--cert", f"{self.d}/client.crt"], "--cert and --key go together"),
            (["--cacert", f"{self.d}/missing.crt"], f"cannot read --cacert {self.d}/missing.crt"),
            (["--cacert", f"{self.d}/ca.crt", "--server", "ftp://127.0.0.1:1"], "is not http(s)://HOST[:PORT]"),
        ]
        for extra, message in cases:
            rc, out, err = vramctl(self.v.url, *extra, "nodes")
            self.assertEqual(rc, 2, (extra, err))
            self.assertIn(message, err, extra)
        # A key that does not belong to the certificate.
        rc, out, err = vramctl(self.v.url, "--cacert", f"{self.d}/ca.crt", "--cert", f"{self.d}/client.crt",
                               "--key", f"{self.d}/stranger.key", "nodes")
        self.assertEqual(rc, 1)
        self.assertIn("cannot use the client certificate", err)


class VramctlOddAnswers(unittest.TestCase):
    """An answer of an unexpected shape (fields missing, of another type) is
    an error message and exit 1, or "-" in a cell, never a crash."""

    ANSWERS = {
        "/v1/nodes": {"nodes": [{"name": "odd", "gpus": [{"index": "zero", "uuid": 7}],
                                 "pods": [{"gpus": ["a"], "name": 3}]}]},
        "/v1/nodes/bare": {"name": "bare"},
        "/v1/locks": {"locks": [{"node": "n", "waiters": [1, "x"]}]},
    }

    @classmethod
    def setUpClass(cls):
        answers = cls.ANSWERS

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = json.dumps(answers.get(self.path.split("?")[0], {})).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        cls.url = f"http://127.0.0.1:{cls.server.server_address[1]}"
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def test_no_command_crashes_on_an_odd_answer(self):
        for args in (["nodes"], ["nodes", "-o", "wide"], ["nodes", "bare", "-o", "wide"], ["pods"],
                     ["pods", "-o", "wide"], ["lock", "list"], ["lock", "list", "-o", "wide"]):
            rc, out, err = vramctl(self.url, *args)
            self.assertIn(rc, (0, 1), (args, rc, out, err))
            if rc == 1:
                self.assertIn("vramctl:", err, args)


if __name__ == "__main__":
    unittest.main()
