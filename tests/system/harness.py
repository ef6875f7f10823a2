"""A small harness for system tests: the real vramd binary against a real
Valkey-compatible server (redis-server), both started here on loopback.
Bounded waits everywhere; processes are killed at teardown. vramd starts from
`clean_env()`, never with the caller's whole environment."""

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

BIN_DIR = os.environ.get("VRAMD_BIN_DIR",
                         os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
VRAMD = os.path.abspath(os.path.join(BIN_DIR, "vramd"))
GI = 1 << 30


# What vramd under test inherits from the caller; nothing else (keep in sync
# with tests/e2e/testbed.py and tests/integration/clean_env.h).
INHERITED_ENV = ("PATH", "HOME", "LANG", "TMPDIR", "ASAN_OPTIONS", "TSAN_OPTIONS",
                 "UBSAN_OPTIONS", "LSAN_OPTIONS", "LLVM_PROFILE_FILE")


def clean_env(extra=None) -> dict:
    """INHERITED_ENV and LC_* from our environment (the sanitizer options as
    scripts/sanitize.sh sets them), then `extra`: a developer's VRAMD_POLICY
    or VRAMD_RESERVE_PERCENT never changes what a test checks."""
    env = {k: v for k, v in os.environ.items() if k in INHERITED_ENV or k.startswith("LC_")}
    env.update(extra or {})
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout, interval=0.05, message="condition"):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)


class Redis:
    def __init__(self, workdir, password=None, appendonly=False, port=None):
        self.dir = os.path.join(workdir, f"redis-{port or 'x'}-{time.monotonic_ns()}")
        os.makedirs(self.dir)
        self.port = port or free_port()
        self.password = password
        self.appendonly = appendonly
        self.proc = None
        self.start()

    def start(self):
        args = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--dir", self.dir,
                "--save", "", "--appendonly", "yes" if self.appendonly else "no",
                "--appendfsync", "always"]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=open(os.path.join(self.dir, "log"), "ab"),
                                     stderr=subprocess.STDOUT)
        wait_for(lambda: self.ping(), 10, message=f"redis on {self.port}")

    def ping(self):
        try:
            return self.cli("PING") == "PONG"
        except Exception:
            return False

    def cli(self, *args):
        cmd = ["redis-cli", "-p", str(self.port)]
        if self.password:
            cmd += ["--no-auth-warning", "-a", self.password]
        out = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=10)
        return out.stdout.strip()

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"


class Vramd:
    def __init__(self, workdir, args, name="vramd", scheme="http", env=None, wait=True, ssl_ctx=None):
        self.port = free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.log_path = os.path.join(workdir, f"{name}-{self.port}.log")
        self.ssl_ctx = ssl_ctx
        self.args = [VRAMD, "--listen", f"127.0.0.1:{self.port}", *args]
        self.proc = subprocess.Popen(self.args, stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT,
                                     env=clean_env(env))
        if wait:
            wait_for(lambda: self.alive_or_raise() and self.healthy(), 15, message=f"{name} /healthz")

    def alive_or_raise(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"vramd exited with {self.proc.returncode}:\n{self.log()}")
        return True

    def healthy(self):
        try:
            return self.request("GET", "/healthz", timeout=1)[0] == 200
        except Exception:
            return False

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def request(self, method, path, body=None, headers=None, timeout=5, ctx=None):
        data = body if isinstance(body, (bytes, type(None))) else (
            body.encode() if isinstance(body, str) else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=ctx or self.ssl_ctx) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def json(self, method, path, body=None, **kw):
        status, text = self.request(method, path, body, **kw)
        return status, json.loads(text)

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


class Workdir:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="vramd-system-")
        self.procs = []
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            try:
                (p.stop if isinstance(p, Vramd) else p.kill)()
            except Exception:
                pass
        shutil.rmtree(self.path, ignore_errors=True)

    def file(self, name, content):
        path = os.path.join(self.path, name)
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        return path

    def redis(self, **kw):
        r = Redis(self.path, **kw)
        self.procs.append(r)
        return r

    def vramd(self, args, **kw):
        v = Vramd(self.path, args, **kw)
        self.procs.append(v)
        return v


def homelab_config(workdir, redis_url, **extra):
    cfg = {"valkey": {"url": redis_url, "timeout_ms": 300}, "kube": {"enabled": False},
           "node_sync_interval_ms": 500,
           "nodes": [{"name": "ness-linux3", "gpus": ["96Gi"]}, {"name": "ness-server2", "gpus": ["8Gi"]}]}
    for k, v in extra.items():
        cfg[k] = v
    return workdir.file(f"config-{time.monotonic_ns()}.json", cfg)


def filter_body(uid, vram, nodes=("ness-linux3", "ness-server2")):
    return {"Pod": {"metadata": {"name": f"p-{uid}", "namespace": "default", "uid": uid},
                    "spec": {"containers": [{"name": "c", "resources": {"limits": {"vramd.io/vram": vram}}}]}},
            "Nodes": None, "NodeNames": list(nodes)}


def bind_body(uid, node):
    return {"PodName": f"p-{uid}", "PodNamespace": "default", "PodUID": uid, "Node": node}
