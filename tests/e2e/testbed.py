"""A real Kubernetes control plane on 127.0.0.1 for vramd's end-to-end tests.

Standard library only. A `Testbed` runs etcd, kube-apiserver and (on demand)
kube-scheduler, a Valkey/Redis server and vramd itself, each in its own process
group with its output in a log file under the testbed's temporary directory.
Nodes are plain API objects (no kubelet): pods get bound but never run, which
is all a scheduler extender needs.

    with Testbed() as tb:
        tb.create_node("gpu-1", labels={"nvidia.com/gpu.count": "1",
                                        "nvidia.com/gpu.memory": "8192"})
        tb.start_scheduler()
        tb.create_pod("p")
        tb.wait_for(lambda: tb.get_pod("p")["spec"].get("nodeName"), 30)

kube-apiserver and kube-scheduler 1.20.2 come from
tests/e2e/testbed/build-k8s.sh (cached under ${VRAMD_CACHE:-~/.cache/vramd});
etcd and redis-server from Debian packages that script also installs.

Every process starts from `clean_env()`: the caller's environment is not
passed on (a developer's VRAMD_POLICY must not change what is tested), only
PATH, HOME, LANG, LC_*, TMPDIR, the sanitizers' *_OPTIONS and
LLVM_PROFILE_FILE, plus what a test passes explicitly.

Environment:
  VRAMD_K8S_BIN        directory holding kube-apiserver and kube-scheduler
  VRAMD_CACHE          cache root used by build-k8s.sh (default ~/.cache/vramd)
  VRAMD_KEEP_TESTBED=1 keep the temporary directory (logs, configs) on teardown
  VRAMD_TESTBED_DIR    parent directory for the temporary directory
                       (default /dev/shm when writable: etcd fsyncs a lot)
"""

from __future__ import annotations

import atexit
import concurrent.futures
import datetime
import email.utils
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from typing import Any, Callable, Iterable, Mapping, Sequence

K8S_VERSION = "1.20.2"
VRAM_RESOURCE = "vramd.io/vram"

_HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_SCRIPT = os.path.join(_HERE, "testbed", "build-k8s.sh")

# Bounds for every wait in this module.
ETCD_READY_TIMEOUT = 30.0
APISERVER_READY_TIMEOUT = 90.0
SCHEDULER_READY_TIMEOUT = 30.0
REDIS_READY_TIMEOUT = 10.0
VRAMD_READY_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
REQUEST_TIMEOUT = 15.0


class TestbedError(RuntimeError):
    """The testbed could not be set up or a managed process misbehaved."""


class WaitTimeout(AssertionError):
    """`Testbed.wait_for` ran out of time (an AssertionError: a test failure)."""


class ApiError(Exception):
    """The API server answered with a non-2xx status."""

    def __init__(self, method: str, path: str, status: int, body: str):
        self.method, self.path, self.status, self.body = method, path, status, body
        try:
            self.reason = json.loads(body).get("reason", "")
        except ValueError:
            self.reason = ""
        super().__init__(f"{method} {path} -> HTTP {status}: {body[:500]}")


# ---------------------------------------------------------------------------
# Small helpers


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """n distinct free ports; all sockets are held until every port is chosen."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# What a process under test inherits from the caller; nothing else (keep in
# sync with tests/system/harness.py and tests/integration/clean_env.h).
INHERITED_ENV = ("PATH", "HOME", "LANG", "TMPDIR", "ASAN_OPTIONS", "TSAN_OPTIONS",
                 "UBSAN_OPTIONS", "LSAN_OPTIONS", "LLVM_PROFILE_FILE")


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a process under test: INHERITED_ENV and LC_* from
    ours (the sanitizer options as scripts/sanitize.sh set them), then `extra`.
    No VRAMD_* (or anything else) from the caller's shell."""
    env = {k: v for k, v in os.environ.items() if k in INHERITED_ENV or k.startswith("LC_")}
    env.update(extra or {})
    return env


def quantity(value: int | str) -> str:
    """A Kubernetes quantity string: ints are bytes, strings pass through."""
    return str(value)


def parse_rfc3339(stamp: str) -> datetime.datetime:
    """An API object's timestamp (creationTimestamp: "2026-01-02T03:04:05Z")."""
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _now_rfc3339() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tail(path: str, lines: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    return "\n".join(data.splitlines()[-lines:])


def _http_get_status(url: str, timeout: float = 2.0, context: ssl.SSLContext | None = None) -> int | None:
    """Status of a GET (https with `context`), or None when nothing answers."""
    u = urllib.parse.urlsplit(url)
    conn = (http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout, context=context)
            if u.scheme == "https" else http.client.HTTPConnection(u.hostname, u.port, timeout=timeout))
    try:
        conn.request("GET", u.path or "/")
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


_DIR_PREFIX = "vramd-e2e-"
_OWNER_FILE = "owner.pid"


def _sweep_stale_dirs(parent: str) -> None:
    """Removes testbed dirs left by test processes that died without cleanup
    (they may sit in /dev/shm, i.e. in RAM). Kept dirs have no owner file."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        if not name.startswith(_DIR_PREFIX):
            continue
        d = os.path.join(parent, name)
        try:
            with open(os.path.join(d, _OWNER_FILE)) as f:
                owner = int(f.read().strip())
        except (OSError, ValueError):
            continue
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:
            pass  # alive, someone else's


# ---------------------------------------------------------------------------
# Processes


# `setpriv --pdeathsig KILL` (util-linux) makes a child die with the test
# process even when that is SIGKILLed and never runs its cleanup. The signal
# follows the *thread* that started the child: start processes from the main
# thread (or one that outlives them).
_SETPRIV = shutil.which("setpriv")


class ManagedProcess:
    """A child process in its own process group, its output in a log file; its
    environment is `clean_env(env)`."""

    url: str | None = None  # base URL, for servers started by the testbed

    def __init__(self, name: str, args: Sequence[str], log_path: str, cwd: str,
                 env: Mapping[str, str] | None = None):
        self.name = name
        self.args = list(args)
        self.log_path = log_path
        argv = ([_SETPRIV, "--pdeathsig", "KILL", "--"] if _SETPRIV else []) + self.args
        with open(log_path, "ab") as log:
            log.write(f"### {_now_rfc3339()} {' '.join(self.args)}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, cwd=cwd, env=clean_env(env),
                start_new_session=True)  # own process group: killpg reaches children

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        return _tail(self.log_path, lines)

    def ensure_alive(self) -> None:
        if not self.alive():
            raise TestbedError(
                f"{self.name} exited with status {self.popen.returncode}; "
                f"last log lines ({self.log_path}):\n{self.tail()}")

    def send_signal(self, sig: int) -> None:
        if self.alive():
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, timeout: float = STOP_TIMEOUT, sig: int = signal.SIGTERM) -> int | None:
        """Signals the group, then SIGKILLs it after `timeout`. Returns the exit status."""
        if self.alive():
            self.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.send_signal(signal.SIGKILL)
                self.popen.wait(5)
        # Leftover grandchildren in the group, if any.
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return self.popen.returncode


# ---------------------------------------------------------------------------
# Kubernetes REST client


class KubeClient:
    """A tiny JSON client for the API server: bearer token, TLS verified with the CA.

    Keeps one HTTPS connection per thread (a TLS handshake per request would
    dominate scale tests) and reconnects once when a kept connection went stale.
    """

    PATCH_TYPES = {
        "merge": "application/merge-patch+json",
        "strategic": "application/strategic-merge-patch+json",
        "json": "application/json-patch+json",
    }

    def __init__(self, api_url: str, ca_file: str, token: str,
                 timeout: float = REQUEST_TIMEOUT):
        u = urllib.parse.urlsplit(api_url)
        self.host, self.port = u.hostname, u.port or 443
        self.token = token
        self.timeout = timeout
        self._ssl = ssl.create_default_context(cafile=ca_file)
        self._local = threading.local()
        self._all_conns: list[http.client.HTTPSConnection] = []
        self._lock = threading.Lock()

    def _conn(self, fresh: bool = False) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                               context=self._ssl)
            self._local.conn = conn
            with self._lock:
                self._all_conns.append(conn)
        elif fresh:
            conn.close()  # the next request reconnects
        return conn

    def close(self) -> None:
        """Closes the connections of every thread that used this client."""
        with self._lock:
            conns, self._all_conns = self._all_conns, []
        for conn in conns:
            conn.close()
        self._local = threading.local()

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json",
                params: Mapping[str, Any] | None = None, raw: bool = False) -> Any:
        """Sends a request; returns the decoded JSON (or text when raw / not JSON).

        Raises ApiError on a non-2xx answer.
        """
        if params:
            path += ("&" if "?" in path else "?") + urllib.parse.urlencode(params)
        payload = None if body is None else (
            body if isinstance(body, (bytes, str)) else json.dumps(body))
        if isinstance(payload, str):
            payload = payload.encode()
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = content_type
        for attempt in (0, 1):
            conn = self._conn(fresh=attempt > 0)
            try:
                conn.request(method, path, body=payload, headers=headers)
                resp = conn.getresponse()
                data = resp.read().decode("utf-8", "replace")
                self._local.date = resp.getheader("Date")
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # A kept-alive connection the server had closed: retry once, fresh.
                conn.close()
                if attempt:
                    raise
            except BaseException:
                conn.close()  # never reuse a connection left mid-exchange
                raise
        if not 200 <= resp.status < 300:
            raise ApiError(method, path, resp.status, data)
        if raw:
            return data
        try:
            return json.loads(data) if data else None
        except ValueError:
            return data

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)

    def server_time(self) -> datetime.datetime:
        """The API server's clock now: the Date header of a GET /version (whole
        seconds, as the creationTimestamp it writes)."""
        self.get("/version")
        return email.utils.parsedate_to_datetime(self._local.date)

    def get_or_none(self, path: str, **params: Any) -> Any:
        """GET, but None for 404."""
        try:
            return self.get(path, **params)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def post(self, path: str, obj: Any) -> Any:
        return self.request("POST", path, obj)

    def put(self, path: str, obj: Any) -> Any:
        return self.request("PUT", path, obj)

    def patch(self, path: str, patch: Any, kind: str = "merge") -> Any:
        """PATCH with kind 'merge' (RFC 7386), 'strategic' or 'json' (RFC 6902)."""
        return self.request("PATCH", path, patch, content_type=self.PATCH_TYPES[kind])

    def delete(self, path: str, body: Any = None) -> Any:
        return self.request("DELETE", path, body)


# Resource paths for `Testbed.apply`: kind -> (plural, namespaced).
_KINDS = {
    "Namespace": ("namespaces", False),
    "Node": ("nodes", False),
    "Pod": ("pods", True),
    "ConfigMap": ("configmaps", True),
    "Secret": ("secrets", True),
    "Service": ("services", True),
    "ServiceAccount": ("serviceaccounts", True),
    "PriorityClass": ("priorityclasses", False),
    "ClusterRole": ("clusterroles", False),
    "ClusterRoleBinding": ("clusterrolebindings", False),
    "Role": ("roles", True),
    "RoleBinding": ("rolebindings", True),
    "Lease": ("leases", True),
    "CustomResourceDefinition": ("customresourcedefinitions", False),
    "VramQueue": ("vramqueues", False),
    "MutatingWebhookConfiguration": ("mutatingwebhookconfigurations", False),
    "ValidatingWebhookConfiguration": ("validatingwebhookconfigurations", False),
}


def resource_path(obj: Mapping[str, Any], with_name: bool = True) -> str:
    """The REST path of an object from its apiVersion, kind and metadata."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    if kind not in _KINDS:
        raise TestbedError(f"resource_path: unknown kind {kind!r}; add it to _KINDS")
    plural, namespaced = _KINDS[kind]
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    meta = obj.get("metadata", {})
    if namespaced:
        base += f"/namespaces/{meta.get('namespace', 'default')}"
    base += f"/{plural}"
    return f"{base}/{meta['name']}" if with_name else base


# ---------------------------------------------------------------------------
# The testbed


class Testbed:
    """etcd + kube-apiserver (+ kube-scheduler, redis, vramd) on 127.0.0.1.

    Use as a context manager; `close()` is idempotent and also runs at exit.
    Attributes once started: api_url, ca_file, admin_token, admin_token_file,
    vramd_token, vramd_token_file, dir, api (admin KubeClient), vramd_api
    (KubeClient as user `vramd`, who starts with no permissions).
    """

    def __init__(self, k8s_bin_dir: str | None = None, keep: bool | None = None,
                 address: str = "127.0.0.1",
                 apiserver_flags: Mapping[str, str | None] | None = None,
                 extra_san_ips: Sequence[str] = (),
                 extra_users: Mapping[str, str] | None = None):
        """`address`: where kube-apiserver binds and what it advertises (and the
        host part of api_url). `apiserver_flags`: flags merged over the defaults
        ("--name": value; None drops the flag). `extra_san_ips`: more IP SANs in
        the serving certificate (e.g. the `kubernetes` Service's ClusterIP).
        `extra_users`: user name -> comma-separated groups; each gets a static
        token in `self.tokens[user]`. The real-node tier uses these."""
        self.address = address
        self.apiserver_flags = dict(apiserver_flags or {})
        self.extra_san_ips = list(extra_san_ips)
        self.extra_users = dict(extra_users or {})
        self.tokens: dict[str, str] = {}
        self.k8s_bin_dir = k8s_bin_dir or os.environ.get("VRAMD_K8S_BIN") or os.path.join(
            os.environ.get("VRAMD_CACHE") or os.path.expanduser("~/.cache/vramd"),
            f"k8s-{K8S_VERSION}", "bin")
        self.keep = (os.environ.get("VRAMD_KEEP_TESTBED") == "1") if keep is None else keep
        self.dir: str | None = None
        self.procs: dict[str, ManagedProcess] = {}
        self.api_url = ""
        self.ca_file = self.admin_token_file = self.vramd_token_file = ""
        self.admin_token = self.vramd_token = ""
        self.api: KubeClient | None = None
        self.vramd_api: KubeClient | None = None
        self.redis_url: str | None = None
        self.redis_port: int | None = None
        self.scheduler_kubeconfig = ""
        self.startup_seconds = 0.0
        self._closed = False
        self._vramd_count = 0

    # -- lifecycle ----------------------------------------------------------

    def __enter__(self) -> "Testbed":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> None:
        """Creates the temp dir, TLS material and tokens; starts etcd and the API server."""
        t0 = time.monotonic()
        apiserver = self._require_binary(os.path.join(self.k8s_bin_dir, "kube-apiserver"))
        self._require_binary(os.path.join(self.k8s_bin_dir, "kube-scheduler"))
        etcd = self._require_tool("etcd", "etcd-server")
        self._require_tool("openssl", "openssl")

        parent = os.environ.get("VRAMD_TESTBED_DIR")
        if not parent and os.access("/dev/shm", os.W_OK):
            parent = "/dev/shm"
        _sweep_stale_dirs(parent or tempfile.gettempdir())
        self.dir = tempfile.mkdtemp(prefix=_DIR_PREFIX, dir=parent)
        with open(self.path(_OWNER_FILE), "w") as f:
            f.write(str(os.getpid()))
        atexit.register(self.close)
        for sub in ("pki", "logs", "etcd", "cfg"):
            os.makedirs(self.path(sub), exist_ok=True)

        self._make_pki()
        self._make_tokens()

        etcd_port, peer_port, api_port = free_ports(3)
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        etcd_proc = self._spawn("etcd", [
            etcd, "--name=e2e", f"--data-dir={self.path('etcd')}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=e2e={peer_url}", "--log-level=warn",
            # A lone member still waits one election timeout to lead: shorten it.
            "--heartbeat-interval=20", "--election-timeout=200",
        ])
        self._wait_ready(etcd_proc, lambda: _http_get_status(etcd_url + "/health") == 200,
                         ETCD_READY_TIMEOUT, "etcd /health")

        pki = self.path("pki")
        self.api_url = f"https://{self.address}:{api_port}"
        flags = {
            "--etcd-servers": etcd_url,
            "--secure-port": str(api_port), "--bind-address": self.address,
            "--advertise-address": self.address, "--insecure-port": "0",
            "--cert-dir": pki,
            "--tls-cert-file": f"{pki}/apiserver.crt",
            "--tls-private-key-file": f"{pki}/apiserver.key",
            "--client-ca-file": f"{pki}/ca.crt",
            "--token-auth-file": f"{pki}/tokens.csv",
            "--service-account-issuer": "https://kubernetes.default.svc",
            "--service-account-key-file": f"{pki}/sa.pub",
            "--service-account-signing-key-file": f"{pki}/sa.key",
            "--authorization-mode": "RBAC",
            "--service-cluster-ip-range": "10.96.0.0/16",
            # The `kubernetes` Service cannot point at a loopback address; the
            # reconciler would log an error every 10 s.
            "--endpoint-reconciler-type": "none",
            # No controller-manager creates the `default` service account.
            "--disable-admission-plugins": "ServiceAccount",
        }
        flags.update(self.apiserver_flags)
        api_proc = self._spawn("kube-apiserver", [apiserver] + [
            f"{k}={v}" for k, v in flags.items() if v is not None])
        self.api = KubeClient(self.api_url, self.ca_file, self.admin_token)
        self.vramd_api = KubeClient(self.api_url, self.ca_file, self.vramd_token)
        self._wait_ready(api_proc, self._apiserver_ready, APISERVER_READY_TIMEOUT,
                         "kube-apiserver /readyz")
        self._wait_ready(api_proc, self._default_namespace_exists, APISERVER_READY_TIMEOUT,
                         "namespace default")
        self.startup_seconds = time.monotonic() - t0

    def close(self) -> None:
        """Stops every process (newest first) and removes the temp dir unless kept."""
        if self._closed:
            return
        self._closed = True
        for client in (self.api, self.vramd_api):
            if client is not None:
                client.close()
        for name in reversed(list(self.procs)):
            self.procs[name].stop()
        if self.dir:
            if self.keep:
                try:
                    os.remove(self.path(_OWNER_FILE))  # no owner: never swept
                except OSError:
                    pass
                print(f"[testbed] kept {self.dir}", flush=True)
            else:
                shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, *parts: str) -> str:
        """A path inside the testbed's temp dir."""
        assert self.dir, "testbed not started"
        return os.path.join(self.dir, *parts)

    def write_file(self, name: str, content: str | bytes | Mapping | list) -> str:
        """Writes cfg/<name> (dicts and lists as JSON) and returns its path."""
        p = self.path("cfg", name)
        if isinstance(content, (dict, list)):
            content = json.dumps(content, indent=2)
        with open(p, "wb") as f:
            f.write(content.encode() if isinstance(content, str) else content)
        return p

    # -- diagnostics ----------------------------------------------------------

    def log_tails(self, lines: int = 40) -> str:
        """The last lines of every process log, for failure messages."""
        out = []
        for name, proc in self.procs.items():
            state = "running" if proc.alive() else f"exited {proc.popen.returncode}"
            out.append(f"===== {name} ({state}) {proc.log_path}\n{proc.tail(lines)}")
        return "\n".join(out)

    # -- setup internals ------------------------------------------------------

    @staticmethod
    def _require_binary(path: str) -> str:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise TestbedError(
                f"{path} is missing. Build the Kubernetes {K8S_VERSION} binaries first: "
                f"run {BUILD_SCRIPT} (as root; 5-10 minutes once, cached afterwards), "
                f"or point VRAMD_K8S_BIN at a directory holding them.")
        return path

    @staticmethod
    def _require_tool(tool: str, package: str) -> str:
        found = shutil.which(tool)
        if not found:
            raise TestbedError(
                f"'{tool}' not found on PATH (Debian package {package}); "
                f"run {BUILD_SCRIPT}, which installs the testbed's packages.")
        return found

    def _openssl(self, *args: str) -> None:
        res = subprocess.run(["openssl", *args], cwd=self.path("pki"),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        if res.returncode != 0:
            raise TestbedError(f"openssl {' '.join(args)} failed:\n{res.stdout.decode()}")

    def _make_pki(self) -> None:
        """CA, API server serving cert (SANs 127.0.0.1, the address, extra_san_ips),
        service-account key pair."""
        ssl_ = self._openssl
        ssl_("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3",
             "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=vramd-e2e-ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-addext", "subjectKeyIdentifier=hash")
        ssl_("req", "-new", "-newkey", "rsa:2048", "-nodes",
             "-keyout", "apiserver.key", "-out", "apiserver.csr", "-subj", f"/CN={self.address}")
        ips = list(dict.fromkeys(["127.0.0.1", self.address, *self.extra_san_ips]))
        with open(self.path("pki", "apiserver.ext"), "w") as f:
            f.write("basicConstraints=CA:FALSE\n"
                    "keyUsage=critical,digitalSignature,keyEncipherment\n"
                    "extendedKeyUsage=serverAuth\n"
                    "subjectKeyIdentifier=hash\n"
                    "authorityKeyIdentifier=keyid,issuer\n"
                    f"subjectAltName={','.join('IP:' + ip for ip in ips)},DNS:localhost,"
                    "DNS:kubernetes.default.svc\n")
        ssl_("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "3", "-extfile", "apiserver.ext",
             "-out", "apiserver.crt")
        ssl_("genrsa", "-out", "sa.key", "2048")
        ssl_("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")
        self.ca_file = self.path("pki", "ca.crt")

    def _make_tokens(self) -> None:
        """Static tokens: `admin` in system:masters, `vramd` in no group."""
        self.admin_token = secrets.token_hex(24)
        self.vramd_token = secrets.token_hex(24)
        with open(self.path("pki", "tokens.csv"), "w") as f:
            f.write(f'{self.admin_token},admin,uid-admin,"system:masters"\n')
            f.write(f"{self.vramd_token},vramd,uid-vramd\n")
            for user, groups in self.extra_users.items():
                self.tokens[user] = secrets.token_hex(24)
                f.write(f'{self.tokens[user]},{user},uid-{user},"{groups}"\n')
        # Token files hold the bare token, no newline (like a service-account token).
        self.admin_token_file = self.path("pki", "admin.token")
        self.vramd_token_file = self.path("pki", "vramd.token")
        for p, tok in ((self.admin_token_file, self.admin_token),
                       (self.vramd_token_file, self.vramd_token)):
            with open(p, "w") as f:
                f.write(tok)
            os.chmod(p, 0o600)

    def _spawn(self, name: str, args: Sequence[str],
               env: Mapping[str, str] | None = None) -> ManagedProcess:
        if name in self.procs and self.procs[name].alive():
            raise TestbedError(f"process {name} already running")
        proc = ManagedProcess(name, args, self.path("logs", f"{name}.log"), self.dir, env)
        self.procs[name] = proc
        return proc

    def _wait_ready(self, proc: ManagedProcess, ready: Callable[[], bool],
                    timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            proc.ensure_alive()
            try:
                if ready():
                    return
            except (OSError, ApiError, TestbedError, http.client.HTTPException):
                pass  # not up yet (ssl.SSLError is an OSError)
            if time.monotonic() > deadline:
                raise TestbedError(f"{what} not ready after {timeout:.0f} s; "
                                   f"last log lines of {proc.name}:\n{proc.tail()}")
            time.sleep(0.2)

    def _apiserver_ready(self) -> bool:
        return self.api.request("GET", "/readyz", raw=True).strip() == "ok"

    def _default_namespace_exists(self) -> bool:
        return self.api.get_or_none("/api/v1/namespaces/default") is not None

    # -- kube-scheduler -----------------------------------------------------

    def scheduler_config(self, extender_url_prefixes: Iterable[str] = (),
                         scheduler_name: str = "default-scheduler",
                         extender_overrides: Mapping[str, Any] | None = None,
                         config_overrides: Mapping[str, Any] | None = None) -> dict:
        """A v1beta1 KubeSchedulerConfiguration (as a dict) for this testbed.

        One extender entry per URL prefix, in order; `extender_overrides` is
        merged into each (e.g. {"preemptVerb": "preempt"} or {"ignorable": True}),
        `config_overrides` into the top level.
        """
        self._ensure_scheduler_kubeconfig()
        extenders = []
        for prefix in extender_url_prefixes:
            ext = {
                "urlPrefix": prefix,
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "bindVerb": "bind",
                "weight": 1,
                "nodeCacheCapable": True,
                "ignorable": False,
                "httpTimeout": "5s",
                "managedResources": [{"name": VRAM_RESOURCE, "ignoredByScheduler": True}],
            }
            ext.update(extender_overrides or {})
            extenders.append(ext)
        # With --config, 1.20 ignores --port=0 and serves healthz and metrics
        # on 0.0.0.0:10251 unless the file says otherwise: keep them on
        # loopback, on a free port (so testbeds can run side by side).
        health = f"127.0.0.1:{free_port()}"
        cfg = {
            "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": self.scheduler_kubeconfig},
            "healthzBindAddress": health,
            "metricsBindAddress": health,
            "leaderElection": {"leaderElect": False},
            "percentageOfNodesToScore": 100,
            "profiles": [{
                "schedulerName": scheduler_name,
                # 1.20.2 panics in DefaultPreemption when an extender rejects a
                # pod on >= 2 nodes that need no victims (kubernetes #101548).
                "plugins": {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}},
            }],
        }
        if extenders:
            cfg["extenders"] = extenders
        cfg.update(config_overrides or {})
        return cfg

    def start_scheduler(self, extender_url_prefixes: Iterable[str] = (),
                        scheduler_name: str = "default-scheduler",
                        extender_overrides: Mapping[str, Any] | None = None,
                        config_overrides: Mapping[str, Any] | None = None,
                        config_path: str | None = None,
                        extra_args: Sequence[str] = (),
                        health_address: str | None = None) -> ManagedProcess:
        """Starts kube-scheduler (stopping a running one first).

        With `config_path` the caller's configuration file is used as is (its
        clientConnection.kubeconfig may point at `self.scheduler_kubeconfig`);
        `health_address` is its healthzBindAddress (HOST:PORT; pin it to a
        free loopback port, 1.20 binds 0.0.0.0:10251 otherwise), waited on
        like the testbed's own. Otherwise a file is written from
        `scheduler_config(...)`. JSON is valid YAML, so the files are JSON.
        """
        self.stop_scheduler()
        health = health_address
        if config_path is None:
            cfg = self.scheduler_config(extender_url_prefixes, scheduler_name,
                                        extender_overrides, config_overrides)
            health = cfg.get("healthzBindAddress")
            config_path = self.write_file("scheduler-config.yaml", cfg)
        proc = self._spawn("kube-scheduler", [
            os.path.join(self.k8s_bin_dir, "kube-scheduler"),
            f"--config={config_path}", "--port=0", "--secure-port=0", "--v=2",
            *extra_args,
        ])
        if health:
            proc.url = f"http://{health}"
            ready = lambda: _http_get_status(f"http://{health}/healthz") == 200  # noqa: E731
        else:  # a caller's file: its healthz address is unknown, use the log
            ready = lambda: self._log_contains(proc, "Starting Kubernetes Scheduler")  # noqa: E731
        self._wait_ready(proc, ready, SCHEDULER_READY_TIMEOUT, "kube-scheduler start")
        return proc

    def scheduler_metric(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """One sample of the running kube-scheduler's /metrics (on its healthz
        address; None when absent), e.g. scheduler_pending_pods{queue=...}."""
        url = getattr(self.procs.get("kube-scheduler"), "url", None)
        if url is None:
            raise TestbedError("no kube-scheduler with a known metrics address is running")
        with urllib.request.urlopen(url + "/metrics", timeout=REQUEST_TIMEOUT) as r:
            text = r.read().decode()
        want = ",".join(f'{k}="{v}"' for k, v in sorted((labels or {}).items()))
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            series, _, value = line.rpartition(" ")
            if series == (f"{name}{{{want}}}" if want else name):
                return float(value)
        return None

    def stop_scheduler(self) -> None:
        proc = self.procs.get("kube-scheduler")
        if proc is not None:
            proc.stop()

    def _ensure_scheduler_kubeconfig(self) -> None:
        if self.scheduler_kubeconfig:
            return
        self.scheduler_kubeconfig = self.write_kubeconfig("scheduler.kubeconfig",
                                                          self.admin_token)

    def write_kubeconfig(self, name: str, token: str) -> str:
        """A kubeconfig for this API server with a bearer token; returns its path."""
        return self.write_file(name, {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "e2e", "cluster": {
                "server": self.api_url, "certificate-authority": self.ca_file}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "u"}}],
            "current-context": "e2e",
        })

    @staticmethod
    def _log_contains(proc: ManagedProcess, needle: str) -> bool:
        try:
            with open(proc.log_path, "rb") as f:
                return needle.encode() in f.read()
        except OSError:
            return False

    # -- redis / vramd --------------------------------------------------------

    def start_redis(self) -> str:
        """Starts redis-server on a free loopback port; returns redis://127.0.0.1:PORT."""
        redis = self._require_tool("redis-server", "redis-server")
        port = free_port()
        data = self.path("redis")
        os.makedirs(data, exist_ok=True)
        proc = self._spawn("redis", [
            redis, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", data, "--daemonize", "no", "--logfile", "",
        ])
        self.redis_port = port
        self._wait_ready(proc, lambda: self.redis_command("PING") == "PONG",
                         REDIS_READY_TIMEOUT, "redis PING")
        self.redis_url = f"redis://127.0.0.1:{port}"
        return self.redis_url

    def restart_redis(self) -> None:
        """Kills redis-server (nothing saved on the way down) and starts it again
        on the same port and directory: it comes back from its last snapshot
        (a SAVE's dump.rdb), as a crashed Valkey with periodic snapshots does."""
        old = self.procs["redis"]
        old.stop(sig=signal.SIGKILL)
        proc = self._spawn("redis", old.args)

        def ready() -> bool:
            try:
                return self.redis_command("PING") == "PONG"
            except (OSError, TestbedError):  # refused, or LOADING
                return False
        self._wait_ready(proc, ready, REDIS_READY_TIMEOUT, "redis PING after the restart")

    def redis_command(self, *args: str | int | bytes) -> Any:
        """Sends one command to the testbed's redis; returns the decoded reply.

        Simple strings and bulk strings come back as str, integers as int,
        nil as None, arrays as lists; an error reply raises TestbedError.
        """
        with socket.create_connection(("127.0.0.1", self.redis_port), timeout=5) as s:
            parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
            req = b"*%d\r\n" % len(parts) + b"".join(
                b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
            s.sendall(req)
            return _RespReader(s).read()

    def vramd_args(self, listen_port: int, config_path: str,
                   redis_url: str | None = None, token_file: str | None = None) -> list[str]:
        """The standard vramd command-line arguments for this testbed."""
        return [
            "--listen", f"127.0.0.1:{listen_port}",
            "--valkey", redis_url or self.redis_url or "",
            "--kube-api", self.api_url,
            "--kube-token-file", token_file or self.vramd_token_file,
            "--kube-ca-file", self.ca_file,
            "--config", config_path,
        ]

    def start_vramd(self, binary: str, args: Sequence[str], name: str | None = None,
                    health_url: str | None = None,
                    timeout: float = VRAMD_READY_TIMEOUT,
                    env: Mapping[str, str] | None = None,
                    ssl_context: ssl.SSLContext | None = None) -> ManagedProcess:
        """Starts vramd and waits until GET {health_url} answers 200.

        Its environment is `clean_env(env)`: the test's own `env` (e.g. a
        VRAMD_* variable under test) and nothing of the caller's VRAMD_*.

        `health_url` defaults to http://<--listen address>/healthz taken from
        `args`. Several instances may run; each gets its own name and log
        (vramd, vramd-1, ...). The returned process has a `.url` attribute.
        """
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            raise TestbedError(f"vramd binary {binary} is missing: build the project first")
        args = list(args)
        if health_url is None:
            listen = next((a.split("=", 1)[1] for a in args if a.startswith("--listen=")),
                          None)
            if listen is None and "--listen" in args:
                listen = args[args.index("--listen") + 1]
            if listen is None:
                raise TestbedError("start_vramd: no --listen in args and no health_url")
            health_url = f"http://{listen}/healthz"
        if name is None:
            name = "vramd" if self._vramd_count == 0 else f"vramd-{self._vramd_count}"
        self._vramd_count += 1
        proc = self._spawn(name, [os.path.abspath(binary), *args], env=env)
        proc.url = health_url.rsplit("/", 1)[0]
        self._wait_ready(proc, lambda: _http_get_status(health_url, context=ssl_context) == 200, timeout,
                         f"{name} {health_url}")
        return proc

    # -- API helpers ----------------------------------------------------------

    def apply(self, obj: Mapping[str, Any]) -> dict:
        """Creates the object, or replaces it (PUT) when it already exists."""
        try:
            return self.api.post(resource_path(obj, with_name=False), obj)
        except ApiError as e:
            if e.status != 409:
                raise
        path = resource_path(obj)
        current = self.api.get(path)
        obj = json.loads(json.dumps(obj))
        obj.setdefault("metadata", {})["resourceVersion"] = \
            current["metadata"]["resourceVersion"]
        return self.api.put(path, obj)

    def create_clusterrole_binding_for(self, user: str, rules: list[dict],
                                       name: str | None = None,
                                       wait: bool = True) -> None:
        """A ClusterRole with `rules`, bound to `user` (kind User).

        With `wait`, returns only once the authorizer grants the first verb of
        the first rule (RBAC reads from an informer cache, so grants lag a bit).
        """
        name = name or f"e2e-{user}"
        self.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": name}, "rules": rules})
        self.apply({"apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding", "metadata": {"name": name},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                "kind": "ClusterRole", "name": name},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "User", "name": user}]})
        if wait and rules:
            r = rules[0]
            res = r.get("resources", ["*"])[0]
            resource, _, sub = res.partition("/")
            self.wait_for(lambda: self.can_i(user, r["verbs"][0], resource,
                                             group=r.get("apiGroups", [""])[0],
                                             subresource=sub),
                          timeout=10, message=f"RBAC grant for {user} to take effect")

    def can_i(self, user: str, verb: str, resource: str, group: str = "",
              namespace: str | None = None, subresource: str = "",
              groups: Sequence[str] = ()) -> bool:
        """Whether `user` may do `verb` on `resource` (a SubjectAccessReview)."""
        attrs = {"verb": verb, "resource": resource, "group": group}
        if subresource:
            attrs["subresource"] = subresource
        if namespace:
            attrs["namespace"] = namespace
        review = self.api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": list(groups), "resourceAttributes": attrs}})
        return bool(review.get("status", {}).get("allowed"))

    def create_namespace(self, name: str) -> dict:
        return self.apply({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": name}})

    def create_node(self, name: str, labels: Mapping[str, str] | None = None,
                    annotations: Mapping[str, str] | None = None,
                    capacity: Mapping[str, str] | None = None,
                    ready: bool = True) -> dict:
        """A schedulable Node object: created, given capacity and a Ready
        condition through /status, then stripped of the not-ready taint that
        admission adds (no node controller runs here to do it)."""
        self.api.post("/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels or {}),
                         "annotations": dict(annotations or {})}})
        cap = {"cpu": "64", "memory": "512Gi", "pods": "250"}
        cap.update(capacity or {})
        now = _now_rfc3339()
        self.api.patch(f"/api/v1/nodes/{name}/status", {"status": {
            "capacity": cap, "allocatable": cap,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                            "reason": "E2ETestbed", "message": "node object only",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
        return self.api.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})

    def create_nodes(self, names: Iterable[str], workers: int = 8,
                     **kwargs: Any) -> None:
        """create_node for many names in parallel (same labels etc. for all)."""
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            for f in [pool.submit(self.create_node, n, **kwargs) for n in names]:
                f.result()

    def requeue_unschedulable(self, node: str) -> None:
        """Makes kube-scheduler retry the pods it parked as unschedulable now,
        not after its one-minute flush: a node label change (here
        e2e.vramd.io/requeue on `node`, a fresh value each call) moves them
        all back to its queues, as vramd's own nudge does."""
        self.api.patch(f"/api/v1/nodes/{node}",
                       {"metadata": {"labels": {"e2e.vramd.io/requeue": str(time.monotonic_ns())}}})

    def delete_node(self, name: str) -> None:
        self.api.delete(f"/api/v1/nodes/{name}")

    @staticmethod
    def _container(name: str, vram: int | str | None) -> dict:
        c: dict[str, Any] = {"name": name, "image": "registry.invalid/e2e:never-pulled"}
        if vram is not None:
            q = {VRAM_RESOURCE: quantity(vram)}
            c["resources"] = {"limits": dict(q), "requests": dict(q)}
        return c

    def pod_manifest(self, name: str, vram: int | str | None = None,
                     gpu_count: int | None = None, model: str | None = None,
                     annotations: Mapping[str, str] | None = None,
                     namespace: str = "default",
                     scheduler_name: str = "default-scheduler",
                     extra_containers: Sequence[dict | int | str] = (),
                     init_containers: Sequence[dict | int | str] = (),
                     labels: Mapping[str, str] | None = None,
                     priority_class_name: str | None = None,
                     node_name: str | None = None,
                     extra_spec: Mapping[str, Any] | None = None) -> dict:
        """The Pod object `create_pod` posts (see there)."""
        ann = dict(annotations or {})
        if gpu_count is not None:
            ann["vramd.io/gpu-count"] = str(gpu_count)
        if model is not None:
            ann["vramd.io/model"] = model

        def containers(items: Sequence[dict | int | str], prefix: str) -> list[dict]:
            return [c if isinstance(c, dict) else self._container(f"{prefix}{i}", c)
                    for i, c in enumerate(items)]

        spec: dict[str, Any] = {
            "schedulerName": scheduler_name,
            "containers": [self._container("main", vram)]
                          + containers(extra_containers, "extra"),
            "terminationGracePeriodSeconds": 30,
        }
        if init_containers:
            spec["initContainers"] = containers(init_containers, "init")
        if priority_class_name:
            spec["priorityClassName"] = priority_class_name
        if node_name:
            spec["nodeName"] = node_name
        spec.update(extra_spec or {})
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace,
                             "labels": dict(labels or {}), "annotations": ann},
                "spec": spec}

    def create_pod(self, name: str, vram: int | str | None = None, **kwargs: Any) -> dict:
        """Creates a pod whose container `main` requests (and limits) `vram`
        of vramd.io/vram (an int is bytes, a str any quantity such as "4Gi";
        None requests none, so the extender never sees the pod).

        Keyword arguments: gpu_count and model (the vramd.io/gpu-count and
        vramd.io/model annotations), annotations, namespace, scheduler_name,
        extra_containers and init_containers (each item a container dict used as
        is, or a VRAM quantity for a generated container), labels,
        priority_class_name, node_name (pre-bound: bypasses the scheduler),
        extra_spec (merged into spec).
        """
        pod = self.pod_manifest(name, vram, **kwargs)
        ns = pod["metadata"]["namespace"]
        return self.api.post(f"/api/v1/namespaces/{ns}/pods", pod)

    def get_pod(self, name: str, namespace: str = "default") -> dict | None:
        """The pod, or None when it does not exist."""
        return self.api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def list_pods(self, namespace: str = "default", **params: Any) -> list[dict]:
        return self.api.get(f"/api/v1/namespaces/{namespace}/pods", **params)["items"]

    def delete_pod(self, name: str, grace: int | None = None,
                   namespace: str = "default") -> None:
        """Deletes a pod. Without a kubelet a bound pod deleted with a grace
        period stays (deletionTimestamp set) until deleted again with grace=0."""
        body = None
        if grace is not None:
            body = {"apiVersion": "v1", "kind": "DeleteOptions",
                    "gracePeriodSeconds": grace}
        self.api.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", body)

    def set_pod_phase(self, name: str, phase: str, namespace: str = "default") -> dict:
        """Sets status.phase (Running, Succeeded, Failed...) via the status subresource."""
        return self.api.patch(f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                              {"status": {"phase": phase}})

    def pod_node(self, name: str, namespace: str = "default") -> str | None:
        """spec.nodeName of the pod, or None (unbound or gone)."""
        pod = self.get_pod(name, namespace)
        return (pod or {}).get("spec", {}).get("nodeName")

    def wait_pod_bound(self, name: str, timeout: float = 30,
                       namespace: str = "default") -> str:
        """Waits until the pod has spec.nodeName; returns it. Failure messages
        include the pod's events and the process logs."""
        try:
            return self.wait_for(lambda: self.pod_node(name, namespace), timeout,
                                 message=f"pod {namespace}/{name} to be bound")
        except WaitTimeout as e:
            raise WaitTimeout(f"{e}\nevents: {self.pod_events(name, namespace)}\n"
                              f"{self.log_tails()}") from None

    def pod_events(self, name: str, namespace: str = "default",
                   reason: str | None = None) -> list[str]:
        """Messages of the pod's events, oldest first, e.g. reason="FailedScheduling"."""
        events = self.api.get(
            f"/api/v1/namespaces/{namespace}/events",
            fieldSelector=f"involvedObject.kind=Pod,involvedObject.name={name}")["items"]
        events.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime")
                    or e["metadata"].get("creationTimestamp") or "")
        return [e.get("message", "") for e in events
                if reason is None or e.get("reason") == reason]

    @staticmethod
    def wait_for(predicate: Callable[[], Any], timeout: float = 30,
                 interval: float = 0.2, message: str | None = None) -> Any:
        """Polls `predicate` until it returns something truthy, which is returned.

        Raises WaitTimeout (an AssertionError) after `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise WaitTimeout(f"timed out after {timeout} s waiting for "
                                  f"{message or getattr(predicate, '__name__', 'condition')}")
            time.sleep(interval)


class _RespReader:
    """Reads one RESP2/RESP3 reply from a socket (enough for tests)."""

    def __init__(self, sock: socket.socket):
        self.f = sock.makefile("rb")

    def _line(self) -> bytes:
        line = self.f.readline()
        if not line.endswith(b"\r\n"):
            raise TestbedError("redis: connection closed mid-reply")
        return line[:-2]

    def read(self) -> Any:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise TestbedError(f"redis error: {rest.decode()}")
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data.decode("utf-8", "replace")
        if kind in (b"*", b"%"):
            n = int(rest)
            if n < 0:
                return None
            items = [self.read() for _ in range(n * (2 if kind == b"%" else 1))]
            return items if kind == b"*" else dict(zip(items[::2], items[1::2]))
        if kind == b"_":
            return None
        raise TestbedError(f"redis: unexpected reply {line!r}")
