"""A real Kubernetes node on this machine for vramd's real-node tier.

Standard library only; root required. `RealNode` starts, on top of the e2e
testbed's etcd + kube-apiserver (tests/e2e/testbed.py):

  kube-apiserver   bound to and advertising the bridge gateway (GATEWAY), Node
                   and RBAC authorization, NodeRestriction and ServiceAccount
                   admission, a client certificate for talking to the kubelet
  kube-controller-manager, kube-scheduler (the default one, no extender)
  containerd + runc (Debian's), CNI bridge + host-local (pods get NO default
                   route: only the pod subnet and the service range via GATEWAY)
  kube-proxy       iptables mode, FORWARD guards so forwarding is bridge -> bridge only
  dnsmasq          cluster DNS on GATEWAY, its hosts file kept in step with Services
  kubelet          registered as NODE_NAME, Ready

and loads the images in build/images/*.tar (scripts/images.sh) into containerd.

Nothing may leave the machine: pods have no default route, the FORWARD chain
drops anything that does not go bridge -> bridge, the service range is a
blackhole for the host, dnsmasq has no upstream server.

`close()` always tears everything down (kubelet, containerd tasks and shims,
containerd, mounts, /run/netns/cni-*, the bridge and veths, kubepods cgroups,
iptables rules and chains, routes, sysctls incl. ip_forward, files the run
created outside its directory) and `verify_restored()` compares the machine
with the snapshot taken before anything was changed. A run that crashed leaves
its state file in NODE_DIR; the next run tears that down first.

Constants below are fixed (one real node per machine at a time, guarded by a
lock file): the bridge, the pod subnet and the service range must not be in
use on the machine; `preflight()` checks that and fails loudly.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from typing import Any, Callable

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))
sys.path.insert(0, os.path.join(_ROOT, "tests", "e2e"))

import testbed as tb_mod  # noqa: E402
from testbed import ManagedProcess, Testbed, TestbedError, free_ports  # noqa: E402

BRIDGE = "vramdrn0"
POD_SUBNET = "10.213.7.0/24"
GATEWAY = "10.213.7.1"
SERVICE_CIDR = "10.213.128.0/20"
KUBERNETES_SERVICE_IP = "10.213.128.1"
NODE_NAME = "realnode"
CLUSTER_DOMAIN = "cluster.local"
CNI_NETWORK = "vramd-realnode"
# On tmpfs when there is one: unpacking and deleting the image layers on the
# disk took 25 s of each run here, on /dev/shm about 1 s.
NODE_DIR = os.environ.get("VRAMD_REALNODE_DIR") or (
    "/dev/shm/vramd-realnode" if os.access("/dev/shm", os.W_OK) else "/var/tmp/vramd-realnode")
LOCK_FILE = "/run/lock/vramd-realnode.lock"
STATE_FILE = "state.json"
CNI_BIN_DIR = "/usr/lib/cni"
CONTAINERD_NS = "k8s.io"

# Paths outside NODE_DIR that containerd, CNI or the kubelet create by
# themselves (hard-coded in those programs); removed at teardown when the run
# created them.
GLOBAL_PATHS = ("/run/containerd", "/var/lib/cni", "/var/log/pods", "/var/log/containers",
                "/run/netns", "/var/lib/kubelet", "/var/lib/containerd", "/etc/cni",
                "/opt/cni")
# Sysctl subtrees snapshotted, restored and compared (per-interface entries of
# net.ipv4.conf.* only for all/default: the bridge's own go with it).
SYSCTL_DIRS = ("kernel", "vm", "net/ipv4", "net/ipv6/conf/all", "net/ipv6/conf/default",
               "net/bridge", "net/netfilter", "net/core")
SYSCTL_VOLATILE = ("kernel/random/", "kernel/ns_last_pid", "kernel/pty/nr",
                   "net/netfilter/nf_conntrack_count", "kernel/tainted",
                   "net/ipv4/tcp_fastopen_key", "kernel/sched_domain",
                   "vm/stat_refresh", "vm/drop_caches", "vm/compact_memory")
IPT_BUILTIN = {"INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING"}

PACKAGES = ("containerd", "runc", "containernetworking-plugins", "iptables", "conntrack",
            "socat", "dnsmasq-base", "nftables")
IMAGES = ("vramd", "valkey", "pause", "kube-scheduler")

NODE_READY_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0


class NodeError(TestbedError):
    """The real node could not be set up or torn down."""


def log(msg: str) -> None:
    print(f"[realnode {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs a command, output captured; raises NodeError on failure with `check`."""
    res = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         timeout=timeout, env=tb_mod.clean_env())
    if check and res.returncode != 0:
        raise NodeError(f"`{shlex.join(args)}` failed ({res.returncode}):\n"
                        f"{res.stdout.decode(errors='replace')[-3000:]}")
    return res


def out(*args: str) -> str:
    return run(*args).stdout.decode(errors="replace")


# ---------------------------------------------------------------------------
# The machine's state: snapshot, compare


def _sysctls() -> dict[str, str]:
    vals: dict[str, str] = {}
    for top in SYSCTL_DIRS:
        base = os.path.join("/proc/sys", top)
        for dirpath, dirnames, filenames in os.walk(base):
            rel_dir = os.path.relpath(dirpath, "/proc/sys")
            if rel_dir.startswith("net/ipv4/conf/") and rel_dir.split("/")[3] not in (
                    "all", "default"):
                dirnames[:] = []
                continue
            if rel_dir.startswith("net/ipv4/neigh/"):
                dirnames[:] = []
                continue
            for f in filenames:
                key = f"{rel_dir}/{f}"
                if key.startswith(SYSCTL_VOLATILE):
                    continue
                try:
                    st = os.stat(os.path.join(dirpath, f))
                    if not st.st_mode & 0o444:
                        continue
                    with open(os.path.join(dirpath, f)) as fh:
                        vals[key] = fh.read().strip()
                except OSError:
                    pass
    return vals


def _ipt_save(cmd: str) -> dict[str, dict[str, Any]]:
    """{table: {"chains": {name: policy}, "rules": [line, ...]}} of `cmd`-save."""
    if not shutil.which(cmd):
        return {}
    tables: dict[str, dict[str, Any]] = {}
    cur = None
    for line in out(cmd).splitlines():
        if line.startswith("*"):
            cur = tables.setdefault(line[1:], {"chains": {}, "rules": []})
        elif line.startswith(":") and cur is not None:
            name, policy = line[1:].split()[:2]
            cur["chains"][name] = policy
        elif line.startswith("-A") and cur is not None:
            cur["rules"].append(line)
    return tables


def _ipt_canonical(tables: dict[str, dict[str, Any]]) -> set[str]:
    """A set of facts; a table with only built-in ACCEPT chains and no rules is
    the same as no table (iptables-nft creates tables on first use)."""
    facts = set()
    for t, d in tables.items():
        for c, p in d["chains"].items():
            if c not in IPT_BUILTIN or p != "ACCEPT":
                facts.add(f"{t} chain {c} {p}")
        for r in d["rules"]:
            facts.add(f"{t} {r}")
    return facts


def _nft_tables() -> list[str]:
    """nf_tables tables ("ip nat", ...). iptables-nft creates them on first use
    and never removes them; an existing nat table keeps connection tracking on
    for every connection of the host, so the teardown deletes those it made."""
    if not shutil.which("nft"):
        return []
    return sorted(l.split(None, 1)[1] for l in out("nft", "list", "tables").splitlines()
                  if l.startswith("table "))


def _ip_json(*args: str) -> list[dict]:
    return json.loads(out("ip", "-j", *args) or "[]")


def _ip_json_in(pid: int, *args: str) -> list[dict]:
    return json.loads(out("nsenter", "-t", str(pid), "-n", "ip", "-j", *args) or "[]")


def _mountpoints() -> list[str]:
    pts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pts.append(line.split()[4].replace("\\040", " "))
    return pts


def _kubepods_cgroups() -> list[str]:
    found = []
    root = "/sys/fs/cgroup"
    for h in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        for name in ("kubepods", "kubepods.slice"):
            p = os.path.join(root, h, name)
            if os.path.isdir(p):
                found.append(p)
    return found


def _procs_mentioning(needle: str) -> list[int]:
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if needle.encode() in f.read():
                    pids.append(int(d))
        except OSError:
            pass
    return pids


def snapshot() -> dict[str, Any]:
    """What the real node may change on this machine."""
    return {
        "links": sorted(l["ifname"] for l in _ip_json("link", "show")),
        "addrs": sorted(f"{a['ifname']} {i['local']}/{i['prefixlen']}"
                        for a in _ip_json("addr", "show") for i in a.get("addr_info", [])),
        "routes": sorted(json.dumps({k: r.get(k) for k in ("type", "dst", "gateway", "dev",
                                                          "table", "protocol")},
                                    sort_keys=True)
                         for r in _ip_json("route", "show", "table", "all")),
        "rules": sorted(json.dumps(r, sort_keys=True) for r in _ip_json("rule", "show")),
        "iptables": sorted(_ipt_canonical(_ipt_save("iptables-save"))),
        "ip6tables": sorted(_ipt_canonical(_ipt_save("ip6tables-save"))),
        "nft_tables": _nft_tables(),
        "sysctls": _sysctls(),
        "mounts": sorted(m for m in set(_mountpoints()) if _node_may_mount(m)),
        "netns": sorted(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else [],
        "paths": sorted(p for p in GLOBAL_PATHS if os.path.lexists(p)),
        "cgroups": _kubepods_cgroups(),
        "procs": len(_procs_mentioning(NODE_DIR)),
    }


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Human-readable differences; empty when the machine is as before."""
    diffs = []
    for key in before:
        b, a = before[key], after.get(key)
        if key == "sysctls":
            for k, v in b.items():
                if a.get(k) != v:
                    diffs.append(f"sysctl {k.replace('/', '.')}: was {v!r}, now {a.get(k)!r}")
        elif isinstance(b, list):
            for x in sorted(set(a) - set(b)):
                diffs.append(f"{key}: added {x}")
            for x in sorted(set(b) - set(a)):
                diffs.append(f"{key}: removed {x}")
        elif a != b:
            diffs.append(f"{key}: was {b!r}, now {a!r}")
    return diffs


# ---------------------------------------------------------------------------
# The testbed with what a real node needs from the API server


class RealNodeTestbed(Testbed):
    """The e2e Testbed, plus a client certificate the API server presents to
    the kubelet (CN kube-apiserver-kubelet-client, group system:masters)."""

    def _make_pki(self) -> None:
        super()._make_pki()
        ssl_ = self._openssl
        ssl_("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "kubelet-client.key",
             "-out", "kubelet-client.csr",
             "-subj", "/O=system:masters/CN=kube-apiserver-kubelet-client")
        with open(self.path("pki", "client.ext"), "w") as f:
            f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,"
                    "keyEncipherment\nextendedKeyUsage=clientAuth\n")
        ssl_("x509", "-req", "-in", "kubelet-client.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "3", "-extfile", "client.ext",
             "-out", "kubelet-client.crt")
        self.apiserver_flags.update({
            "--kubelet-client-certificate": self.path("pki", "kubelet-client.crt"),
            "--kubelet-client-key": self.path("pki", "kubelet-client.key")})


# ---------------------------------------------------------------------------
# The node


class RealNode:
    """See the module docstring. Use as a context manager; `close()` is idempotent."""

    def __init__(self, images_dir: str | None = None):
        self.images_dir = images_dir or os.environ.get("VRAMD_IMAGES_DIR") or os.path.join(
            _ROOT, "build", "images")
        self.tb: RealNodeTestbed | None = None
        self.before: dict[str, Any] | None = None
        self.timings: list[tuple[str, float]] = []
        self.image_refs: dict[str, str] = {}
        self.admin_kubeconfig = ""
        self._lock_fd: int | None = None
        self._closed = False
        self._dns_stop = threading.Event()
        self._dns_thread: threading.Thread | None = None
        self._dns_hosts = os.path.join(NODE_DIR, "dns", "hosts")
        self._dns_error: str | None = None
        self.sock = os.path.join(NODE_DIR, "containerd", "containerd.sock")

    # -- helpers --------------------------------------------------------------

    def stage(self, name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.monotonic()
        log(f"{name} ...")
        result = fn()
        dt = time.monotonic() - t0
        self.timings.append((name, dt))
        log(f"{name}: {dt:.1f} s")
        return result

    def path(self, *parts: str) -> str:
        return os.path.join(NODE_DIR, *parts)

    def _write(self, rel: str, content: str | dict) -> str:
        p = self.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(json.dumps(content, indent=2) if isinstance(content, dict) else content)
        return p

    def ctr(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        return run("ctr", "--address", self.sock, "--namespace", CONTAINERD_NS, *args,
                   check=check, timeout=timeout).stdout.decode(errors="replace")

    @property
    def procs(self) -> dict[str, ManagedProcess]:
        return self.tb.procs if self.tb else {}

    def _spawn(self, name: str, args: list[str]) -> ManagedProcess:
        return self.tb._spawn(name, args)

    def _wait(self, proc: ManagedProcess | None, ready: Callable[[], Any], timeout: float,
              what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            if proc is not None:
                proc.ensure_alive()
            try:
                v = ready()
                if v:
                    return v
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if time.monotonic() > deadline:
                tail = f"\nlast log lines of {proc.name}:\n{proc.tail(60)}" if proc else ""
                raise NodeError(f"{what} not ready after {timeout:.0f} s{tail}")
            time.sleep(0.5)

    # -- lifecycle ------------------------------------------------------------

    def __enter__(self) -> "RealNode":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> None:
        self.stage("preflight", self.preflight)
        self.stage("host network (bridge, guards, blackhole)", self._host_network)
        self.stage("etcd + kube-apiserver", self._control_plane)
        self.stage("controller-manager + scheduler", self._controllers)
        self.stage("containerd", self._containerd)
        self.stage("images import", self._import_images)
        self.stage("kube-proxy + dnsmasq", self._proxy_and_dns)
        self.stage("kubelet to node Ready", self._kubelet)

    # -- preflight ------------------------------------------------------------

    def preflight(self) -> None:
        if "vramd-realnode" not in os.path.basename(NODE_DIR.rstrip("/")):
            # It is emptied and removed: never a directory of something else.
            raise NodeError(f"VRAMD_REALNODE_DIR={NODE_DIR}: its name must contain "
                            f"'vramd-realnode'")
        if os.geteuid() != 0:
            raise NodeError("the real-node tier needs root (it runs a kubelet, containerd "
                            "and changes iptables/routes on this machine, then restores them)")
        missing = [p for p in PACKAGES if run("dpkg-query", "-W", "-f=${Status}", p,
                                               check=False).stdout.decode().find(
                                                   "install ok installed") < 0]
        if missing:
            raise NodeError(f"Debian packages missing: {' '.join(missing)} "
                            f"(scripts/install-deps.sh --test installs them)")
        for tool in ("containerd", "runc", "ctr", "iptables", "iptables-save", "dnsmasq", "ip"):
            if not shutil.which(tool):
                raise NodeError(f"{tool} not found on PATH")
        for plugin in ("bridge", "host-local", "loopback"):
            if not os.access(os.path.join(CNI_BIN_DIR, plugin), os.X_OK):
                raise NodeError(f"CNI plugin {CNI_BIN_DIR}/{plugin} missing")
        for img in IMAGES:
            p = os.path.join(self.images_dir, f"{img}.tar")
            if not os.path.isfile(p):
                raise NodeError(f"{p} is missing: run scripts/images.sh first "
                                f"(it builds {', '.join(i + '.tar' for i in IMAGES)})")
            self.image_refs[img] = self._image_ref(p)
        os.makedirs(os.path.dirname(LOCK_FILE), exist_ok=True)
        self._lock_fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise NodeError(f"another real-node run holds {LOCK_FILE}") from None
        state = self.path(STATE_FILE)
        if os.path.exists(state):
            log(f"{state} exists: an earlier run did not finish; tearing its node down first")
            with open(state) as f:
                self.before = json.load(f)["before"]
            errors = self._teardown_node(stale=True)
            if errors:
                raise NodeError("could not tear down the earlier run's node:\n"
                                + "\n".join(errors))
            diffs = compare(self.before, snapshot())
            if diffs:
                raise NodeError("after tearing down an earlier run the machine still differs "
                                "from before it:\n" + "\n".join(diffs))
            self.before = None
        if os.path.lexists(BRIDGE_PATH := f"/sys/class/net/{BRIDGE}"):
            raise NodeError(f"network interface {BRIDGE} exists ({BRIDGE_PATH})")
        for net in (POD_SUBNET, SERVICE_CIDR):
            addr = net.split("/")[0]
            routes = _ip_json("route", "show", "match", addr)
            overlapping = [r for r in routes if r.get("dst") != "default"]
            if overlapping:
                raise NodeError(f"{net} overlaps routes on this machine: {overlapping}")
        self.before = snapshot()
        if self.before["procs"]:
            raise NodeError(f"processes mentioning {NODE_DIR} are running: "
                            f"{_procs_mentioning(NODE_DIR)}")
        if os.path.exists(NODE_DIR):
            if _mounts_under(NODE_DIR):
                raise NodeError(f"{NODE_DIR} has mounts but no {STATE_FILE}: "
                                f"{_mounts_under(NODE_DIR)}")
            shutil.rmtree(NODE_DIR)
        os.makedirs(NODE_DIR)
        self._write(STATE_FILE, {"before": self.before})

    @staticmethod
    def _image_ref(tar_path: str) -> str:
        with tarfile.open(tar_path) as t:
            manifest = json.load(t.extractfile("manifest.json"))
        tags = manifest[0].get("RepoTags") or []
        if not tags:
            raise NodeError(f"{tar_path} names no image (RepoTags empty in manifest.json)")
        return tags[0]

    # -- host network -----------------------------------------------------------

    def _host_network(self) -> None:
        prefix = POD_SUBNET.split("/")[1]
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        run("ip", "addr", "add", f"{GATEWAY}/{prefix}", "dev", BRIDGE)
        run("ip", "link", "set", BRIDGE, "up")
        run("ip", "route", "add", "blackhole", SERVICE_CIDR)
        self._insert_forward_guards()
        self._set_sysctl("net/ipv4/ip_forward", "1")

    def _forward_guards(self) -> list[list[str]]:
        return [["!", "-i", BRIDGE, "-j", "DROP"],
                ["-i", BRIDGE, "!", "-o", BRIDGE, "-j", "DROP"]]

    def _insert_forward_guards(self) -> None:
        """Guards at the top of FORWARD (re-run after kube-proxy put its jumps first)."""
        for g in self._forward_guards():
            while run("iptables", "-C", "FORWARD", *g, check=False).returncode == 0:
                run("iptables", "-D", "FORWARD", *g)
            run("iptables", "-I", "FORWARD", "1", *g)

    @staticmethod
    def _set_sysctl(key: str, value: str) -> None:
        with open(os.path.join("/proc/sys", key), "w") as f:
            f.write(value)

    # -- control plane ----------------------------------------------------------

    def _control_plane(self) -> None:
        self.tb = RealNodeTestbed(
            address=GATEWAY,
            extra_san_ips=[KUBERNETES_SERVICE_IP],
            extra_users={f"system:node:{NODE_NAME}": "system:nodes"},
            apiserver_flags={
                "--authorization-mode": "Node,RBAC",
                "--enable-admission-plugins": "NodeRestriction",
                "--disable-admission-plugins": None,
                "--endpoint-reconciler-type": None,  # the `kubernetes` Service -> GATEWAY
                "--allow-privileged": "true",
                "--service-cluster-ip-range": SERVICE_CIDR,
                "--kubelet-preferred-address-types": "InternalIP",
                # Admission webhooks (and aggregated APIs) reached at the Service's
                # endpoints (a pod address on the bridge) instead of its ClusterIP:
                # the host has the service range as a blackhole route (nothing may
                # leave the machine), so the API server, a host process, cannot
                # reach a ClusterIP. Real control planes without a route to the
                # service range (no kube-proxy on the control-plane hosts) set the
                # same flag; clientConfig.service is resolved through it
                # (kube-apiserver's buildServiceResolver), TLS still verifies the
                # name NAME.NAMESPACE.svc.
                "--enable-aggregator-routing": "true",
            })
        self.tb.start()
        self.admin_kubeconfig = self.tb.write_kubeconfig("admin.kubeconfig",
                                                         self.tb.admin_token)

    def _controllers(self) -> None:
        pki = self.tb.path("pki")
        kcm = self._spawn("kube-controller-manager", [
            os.path.join(self.tb.k8s_bin_dir, "kube-controller-manager"),
            f"--kubeconfig={self.admin_kubeconfig}",
            f"--service-account-private-key-file={pki}/sa.key",
            f"--root-ca-file={pki}/ca.crt",
            "--leader-elect=false", "--port=0", "--secure-port=0",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--use-service-account-credentials=false", "--v=1"])
        # The default scheduler: for pods that do not name vramd-scheduler
        # (the chart's own pods, among them vramd-scheduler itself).
        self.tb.start_scheduler()
        self._wait(kcm, lambda: self.tb.api.get_or_none(
            "/api/v1/namespaces/default/serviceaccounts/default"), 60,
            "the `default` service account (kube-controller-manager)")

    # -- containerd -------------------------------------------------------------

    def _containerd(self) -> None:
        cfg = f"""version = 2
root = "{self.path('containerd', 'root')}"
state = "{self.path('containerd', 'state')}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{self.sock}"
[ttrpc]
  address = "{self.sock}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{self.path('containerd', 'opt')}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{self.image_refs['pause']}"
  # This VM's bounding set lacks CAP_SYS_RESOURCE: without it every sandbox
  # fails ("can't get final child's PID from pipe: EOF").
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{self.path('cni', 'net.d')}"
"""
        self._write("cni/net.d/10-vramd-realnode.conflist", {
            "cniVersion": "0.4.0", "name": CNI_NETWORK,
            "plugins": [{
                "type": "bridge", "bridge": BRIDGE,
                # isGateway would turn net.ipv4.ip_forward on by itself and give
                # pods a default route: neither is wanted.
                "isGateway": False, "ipMasq": False, "hairpinMode": True,
                "ipam": {"type": "host-local",
                         "ranges": [[{"subnet": POD_SUBNET, "gateway": GATEWAY}]],
                         "routes": [{"dst": SERVICE_CIDR, "gw": GATEWAY}],
                         "dataDir": self.path("cni", "ipam")},
            }]})
        conf = self._write("containerd/config.toml", cfg)
        proc = self._spawn("containerd", ["containerd", "--config", conf])
        self._wait(proc, lambda: run("ctr", "--address", self.sock, "version",
                                     check=False).returncode == 0, 30, "containerd")

    def _import_images(self) -> None:
        for img in IMAGES:
            self.ctr("images", "import", "--snapshotter", "overlayfs",
                     os.path.join(self.images_dir, f"{img}.tar"), timeout=300)
        listed = self.ctr("images", "ls", "-q")
        for img, ref in self.image_refs.items():
            if ref not in listed.split():
                raise NodeError(f"image {ref} not in containerd after import:\n{listed}")

    # -- kube-proxy and DNS -----------------------------------------------------

    def _proxy_and_dns(self) -> None:
        hp, mp = free_ports(2)
        proxy = self._spawn("kube-proxy", [
            os.path.join(self.tb.k8s_bin_dir, "kube-proxy"),
            f"--kubeconfig={self.admin_kubeconfig}", "--proxy-mode=iptables",
            "--masquerade-all=true", f"--cluster-cidr={POD_SUBNET}",
            f"--hostname-override={NODE_NAME}", f"--bind-address={GATEWAY}",
            f"--nodeport-addresses={GATEWAY}/32",
            "--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0",
            "--conntrack-tcp-timeout-close-wait=0", "--oom-score-adj=0",
            f"--healthz-bind-address=127.0.0.1:{hp}", f"--metrics-bind-address=127.0.0.1:{mp}",
            "--v=1"])
        self._wait(proxy, lambda: "KUBE-FORWARD" in out("iptables", "-S", "FORWARD"), 60,
                   "kube-proxy's FORWARD rules")
        self._insert_forward_guards()
        first = out("iptables", "-S", "FORWARD").splitlines()[1:3]
        if not all("DROP" in r and BRIDGE in r for r in first):
            raise NodeError(f"the FORWARD guards are not first: {first}")

        os.makedirs(os.path.dirname(self._dns_hosts), exist_ok=True)
        self._sync_dns_once(signal_dnsmasq=False)
        dns = self._spawn("dnsmasq", [
            "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
            "--no-hosts", f"--listen-address={GATEWAY}", "--bind-interfaces",
            f"--local=/{CLUSTER_DOMAIN}/", "--domain-needed",
            f"--addn-hosts={self._dns_hosts}", "--log-facility=-",
            f"--pid-file={self.path('dns', 'dnsmasq.pid')}"])
        # SIGHUP before dnsmasq installed its handler would kill it: wait until
        # it answers (the `kubernetes` Service's name, from the hosts file).
        self._wait(dns, lambda: dns_query(GATEWAY, f"kubernetes.default.svc.{CLUSTER_DOMAIN}")
                   == [KUBERNETES_SERVICE_IP], 15, "dnsmasq answering")
        self._dns_thread = threading.Thread(target=self._dns_loop, name="dns-sync",
                                            daemon=True)
        self._dns_thread.start()

    def _sync_dns_once(self, signal_dnsmasq: bool = True) -> None:
        items = self.tb.api.get("/api/v1/services")["items"]
        lines = []
        for s in items:
            ip = s["spec"].get("clusterIP")
            if not ip or ip == "None":
                continue
            n, ns = s["metadata"]["name"], s["metadata"]["namespace"]
            lines.append(f"{ip} {n}.{ns}.svc.{CLUSTER_DOMAIN} {n}.{ns}.svc")
        text = "\n".join(sorted(lines)) + "\n"
        try:
            with open(self._dns_hosts) as f:
                if f.read() == text:
                    return
        except OSError:
            pass
        with open(self._dns_hosts + ".tmp", "w") as f:
            f.write(text)
        os.replace(self._dns_hosts + ".tmp", self._dns_hosts)
        if signal_dnsmasq:
            self.procs["dnsmasq"].ensure_alive()
            self.procs["dnsmasq"].send_signal(signal.SIGHUP)

    def _dns_loop(self) -> None:
        while not self._dns_stop.wait(1.0):
            try:
                self._sync_dns_once()
                self._dns_error = None
            except Exception as e:  # noqa: BLE001 - reported by dns_records()
                self._dns_error = str(e)

    def dns_records(self) -> str:
        """The hosts file dnsmasq serves (for assertions and messages)."""
        if self._dns_error:
            raise NodeError(f"DNS sync failing: {self._dns_error}")
        with open(self._dns_hosts) as f:
            return f.read()

    # -- kubelet ----------------------------------------------------------------

    def _kubelet(self) -> None:
        port, health = free_ports(2)
        resolv = self._write("kubelet/resolv.conf", "")
        token = self.tb.tokens[f"system:node:{NODE_NAME}"]
        kubeconfig = self.tb.write_kubeconfig("kubelet.kubeconfig", token)
        cfg = self._write("kubelet/config.json", {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": GATEWAY, "port": port, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": health,
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": self.tb.ca_file}},
            "authorization": {"mode": "AlwaysAllow"},
            "cgroupDriver": "cgroupfs", "failSwapOn": False,
            "clusterDNS": [GATEWAY], "clusterDomain": CLUSTER_DOMAIN, "resolvConf": resolv,
            "makeIPTablesUtilChains": False, "oomScoreAdj": 0,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                             "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "volumePluginDir": self.path("kubelet", "volume-plugins"),
            "serializeImagePulls": False,
        })
        proc = self._spawn("kubelet", [
            os.path.join(self.tb.k8s_bin_dir, "kubelet"),
            f"--config={cfg}", f"--kubeconfig={kubeconfig}",
            "--container-runtime=remote",
            f"--container-runtime-endpoint=unix://{self.sock}",
            f"--pod-infra-container-image={self.image_refs['pause']}",
            f"--root-dir={self.path('kubelet', 'root')}",
            f"--cert-dir={self.path('kubelet', 'pki')}",
            f"--node-ip={GATEWAY}", f"--hostname-override={NODE_NAME}", "--v=1"])

        def ready() -> bool:
            node = self.tb.api.get_or_none(f"/api/v1/nodes/{NODE_NAME}")
            conds = (node or {}).get("status", {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)
        self._wait(proc, ready, NODE_READY_TIMEOUT, f"node {NODE_NAME} Ready")

    # -- checks -----------------------------------------------------------------

    def pod_routes(self) -> dict[str, list[str]]:
        """Routes inside each running container's network namespace (by task
        id, read with nsenter on the task's pid): what a pod can reach."""
        routes = {}
        for line in self.ctr("tasks", "ls").splitlines()[1:]:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "RUNNING":
                table = _ip_json_in(int(parts[1]), "route", "show")
                routes[parts[0][:12]] = sorted(r["dst"] for r in table)
        return routes

    # -- teardown ---------------------------------------------------------------

    def close(self) -> list[str]:
        """Tears the node down; returns the errors met (also logged)."""
        if self._closed:
            return []
        self._closed = True
        t0 = time.monotonic()
        self._dns_stop.set()
        errors: list[str] = []
        if self.before is not None:
            errors = self._teardown_node(stale=False)
        log(f"teardown: node {time.monotonic() - t0:.1f} s")
        if self.tb is not None:
            if errors:
                self.tb.keep = True
            # Its state is thrown away: no need to wait for a graceful stop.
            if "kube-apiserver" in self.tb.procs:
                self.tb.procs["kube-apiserver"].stop(2)
            self.tb.close()
        log(f"teardown: control plane {time.monotonic() - t0:.1f} s")
        if self.before is not None and not errors:
            # The state file (the snapshot from before this run) goes only when
            # the machine is as it was: else the next run tears down against
            # it again, instead of taking this run's leftovers as its baseline.
            diffs = compare(self.before, snapshot())
            if _mounts_under(NODE_DIR):
                errors.append(f"mounts remain under {NODE_DIR}: {_mounts_under(NODE_DIR)}")
            elif diffs:
                errors.append(f"the machine differs from before; {NODE_DIR}/{STATE_FILE} kept "
                              f"for the next run's teardown: {diffs}")
            else:
                shutil.rmtree(NODE_DIR, ignore_errors=True)
        if self._lock_fd is not None:
            try:
                os.remove(LOCK_FILE)  # nothing of the run stays behind
            except OSError:
                pass
            os.close(self._lock_fd)
        for e in errors:
            log(f"teardown: {e}")
        self.timings.append(("teardown", time.monotonic() - t0))
        log(f"teardown: {time.monotonic() - t0:.1f} s")
        return errors

    def verify_restored(self) -> list[str]:
        """Differences between the machine now and before the node (empty: as before)."""
        if self.before is None:
            return ["no snapshot was taken"]
        diffs = compare(self.before, snapshot())
        if os.path.exists(NODE_DIR):
            diffs.append(f"{NODE_DIR} still exists")
        return diffs

    def _teardown_node(self, stale: bool) -> list[str]:
        errors: list[str] = []

        def attempt(what: str, fn: Callable[[], Any]) -> None:
            t0 = time.monotonic()
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - keep tearing down, report all
                errors.append(f"{what}: {e}")
            if time.monotonic() - t0 > 1:
                log(f"teardown: {what}: {time.monotonic() - t0:.1f} s")

        before = self.before
        assert before is not None
        procs = self.procs
        if "kubelet" in procs:
            attempt("stop kubelet", lambda: procs["kubelet"].stop(STOP_TIMEOUT))
        if os.path.exists(self.sock):
            attempt("containerd tasks", self._kill_tasks)
        if "containerd" in procs:
            attempt("stop containerd", lambda: procs["containerd"].stop(STOP_TIMEOUT))
        attempt("leftover processes", self._kill_leftovers)
        for name in ("kube-proxy", "dnsmasq", "kube-controller-manager"):
            if name in procs:
                attempt(f"stop {name}", lambda n=name: procs[n].stop(STOP_TIMEOUT))
        if self.tb is not None:
            attempt("kube-proxy --cleanup", lambda: run(
                os.path.join(self.tb.k8s_bin_dir, "kube-proxy"), "--cleanup",
                check=False, timeout=60))
        attempt("iptables", lambda: self._restore_iptables(before))
        attempt("nft tables", lambda: self._remove_nft_tables(before))
        attempt("conntrack", lambda: self._flush_conntrack(before))
        attempt("mounts", lambda: self._unmount_all(before))
        attempt("netns", lambda: self._remove_netns(before))
        attempt("links", lambda: self._remove_links(before))
        attempt("routes", lambda: self._remove_routes(before))
        attempt("cgroups", lambda: self._remove_cgroups(before))
        attempt("sysctls", lambda: self._restore_sysctls(before))
        attempt("paths", lambda: self._remove_paths(before))
        if stale and not errors and not compare(before, snapshot()):
            if _mounts_under(NODE_DIR):
                errors.append(f"mounts remain under {NODE_DIR}")
            else:
                shutil.rmtree(NODE_DIR, ignore_errors=True)
        return errors

    def _kill_tasks(self) -> None:
        tasks = [l.split()[0] for l in self.ctr("tasks", "ls", check=False).splitlines()[1:]
                 if l.strip()]
        for t in tasks:
            self.ctr("tasks", "kill", "--all", "--signal", "SIGKILL", t, check=False)
        for t in tasks:
            self.ctr("tasks", "delete", "--force", t, check=False, timeout=30)
        for c in self.ctr("containers", "ls", "-q", check=False).split():
            self.ctr("containers", "delete", c, check=False)

    @staticmethod
    def _kill_leftovers() -> None:
        """Shims and container processes this run started (they name NODE_DIR
        or sit in the kubepods cgroups), by pid."""
        pids = set(_procs_mentioning(NODE_DIR))
        for cg in _kubepods_cgroups():
            for dirpath, _, files in os.walk(cg):
                if "cgroup.procs" in files:
                    with open(os.path.join(dirpath, "cgroup.procs")) as f:
                        pids.update(int(x) for x in f.read().split())
        pids.discard(os.getpid())
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") and
                                                  not _is_zombie(p) for p in pids):
            time.sleep(0.1)

    @staticmethod
    def _restore_iptables(before: dict[str, Any]) -> None:
        for cmd, key in (("iptables", "iptables"), ("ip6tables", "ip6tables")):
            if not shutil.which(cmd):
                continue
            was = set(before[key])
            now = _ipt_save(f"{cmd}-save")
            new_chains = [(t, c) for t, d in now.items() for c in d["chains"]
                          if c not in IPT_BUILTIN and f"{t} chain {c} {d['chains'][c]}"
                          not in was]
            for t, c in new_chains:
                run(cmd, "-t", t, "-F", c)
            now = _ipt_save(f"{cmd}-save")
            for t, d in now.items():
                for r in d["rules"]:
                    if f"{t} {r}" not in was:
                        run(cmd, "-t", t, "-D", *shlex.split(r)[1:])
            for t, c in new_chains:
                run(cmd, "-t", t, "-X", c)

    @staticmethod
    def _remove_nft_tables(before: dict[str, Any]) -> None:
        """Tables that appeared, once _restore_iptables emptied them (a table
        still holding rules is left, and the comparison reports it)."""
        for t in _nft_tables():
            if t in before.get("nft_tables", []):
                continue
            rules = [l for l in out("nft", "list", "table", *t.split()).splitlines()
                     if l.strip() and not l.strip().startswith(("table ", "chain ", "type ",
                                                                "}", "policy "))]
            if not rules:
                run("nft", "delete", "table", *t.split())

    @staticmethod
    def _flush_conntrack(before: dict[str, Any]) -> None:
        """Connection-tracking entries: all of them when the machine had no
        netfilter tables before (nothing tracked connections then, and
        nothing uses the entries now), else those of the pod subnet and the
        service range (conntrack exits 1 when there were none)."""
        if not shutil.which("conntrack"):
            return
        if not before.get("nft_tables") and not before["iptables"] and not _nft_tables():
            run("conntrack", "-F", check=False, timeout=30)
            return
        for net in (POD_SUBNET, SERVICE_CIDR):
            for direction in ("--orig-src", "--orig-dst", "--reply-src", "--reply-dst"):
                run("conntrack", "-D", direction, net, check=False, timeout=30)

    @staticmethod
    def _unmount_all(before: dict[str, Any]) -> None:
        keep = set(before["mounts"])
        roots = [NODE_DIR, "/run/containerd", "/run/netns", "/var/lib/kubelet"]
        for _ in range(3):
            targets = [m for m in set(_mountpoints()) if m not in keep and any(
                m == r or m.startswith(r + "/") for r in roots)]
            if not targets:
                return
            for m in sorted(targets, key=lambda p: p.count("/"), reverse=True):
                if run("umount", m, check=False).returncode != 0:
                    run("umount", "-l", m, check=False)
        left = [m for m in _mountpoints() if m not in keep and any(
            m == r or m.startswith(r + "/") for r in roots)]
        if left:
            raise NodeError(f"cannot unmount {left}")

    @staticmethod
    def _remove_netns(before: dict[str, Any]) -> None:
        if not os.path.isdir("/run/netns"):
            return
        for n in os.listdir("/run/netns"):
            if n not in before["netns"] and n.startswith("cni-"):
                os.remove(os.path.join("/run/netns", n))

    @staticmethod
    def _remove_links(before: dict[str, Any]) -> None:
        for l in _ip_json("link", "show"):
            if l["ifname"] not in before["links"] and (
                    l["ifname"] == BRIDGE or l.get("master") == BRIDGE
                    or l["ifname"].startswith("veth")):
                run("ip", "link", "del", l["ifname"], check=False)
        left = [l["ifname"] for l in _ip_json("link", "show")
                if l["ifname"] not in before["links"]]
        if left:
            raise NodeError(f"links remain: {left}")

    @staticmethod
    def _remove_routes(before: dict[str, Any]) -> None:
        for r in _ip_json("route", "show", "table", "all"):
            key = json.dumps({k: r.get(k) for k in ("type", "dst", "gateway", "dev", "table",
                                                   "protocol")}, sort_keys=True)
            if key in before["routes"]:
                continue
            if r.get("dst") in (SERVICE_CIDR, POD_SUBNET) or r.get("dev") == BRIDGE:
                args = ["ip", "route", "del"]
                if r.get("type") and r["type"] != "unicast":
                    args.append(r["type"])
                args.append(r["dst"])
                if r.get("table"):
                    args += ["table", r["table"]]
                run(*args, check=False)

    @staticmethod
    def _remove_cgroups(before: dict[str, Any]) -> None:
        for cg in _kubepods_cgroups():
            if cg in before["cgroups"]:
                continue
            for dirpath, _, _ in sorted(os.walk(cg), key=lambda w: w[0].count("/"),
                                        reverse=True):
                deadline = time.monotonic() + 5
                while True:
                    try:
                        os.rmdir(dirpath)
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)

    @staticmethod
    def _restore_sysctls(before: dict[str, Any]) -> None:
        now = _sysctls()
        failed = []
        for k, v in before["sysctls"].items():
            if now.get(k) != v:
                try:
                    with open(os.path.join("/proc/sys", k), "w") as f:
                        f.write(v)
                except OSError as e:
                    failed.append(f"{k}: {e}")
        if failed:
            raise NodeError(f"cannot restore sysctls: {failed}")

    @staticmethod
    def _remove_paths(before: dict[str, Any]) -> None:
        mounts = _mountpoints()
        for p in GLOBAL_PATHS:
            if p in before["paths"]:
                continue
            if not os.path.lexists(p):
                continue
            under = [m for m in mounts if m == p or m.startswith(p + "/")]
            if under:
                raise NodeError(f"not removing {p}: mounts under it {under}")
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.remove(p)
        # /var/lib/cni existed before: remove only this network's cache files.
        for d in ("/var/lib/cni/results", f"/var/lib/cni/networks/{CNI_NETWORK}"):
            if "/var/lib/cni" in before["paths"] and os.path.isdir(d):
                for f in os.listdir(d):
                    if d.endswith(CNI_NETWORK) or f.startswith(CNI_NETWORK):
                        os.remove(os.path.join(d, f))


# Where the node's programs mount things (compared before/after; mounts
# elsewhere belong to other work on the machine).
MOUNT_ROOTS = (NODE_DIR, "/run", "/var/run", "/var/lib", "/sys/fs/cgroup", "/proc/sys")


def _node_may_mount(m: str) -> bool:
    return any(m == r or m.startswith(r + "/") for r in MOUNT_ROOTS)


def dns_query(server: str, name: str, timeout: float = 2.0) -> list[str] | None:
    """The A records a DNS server gives for `name` ([] for none or an error
    answer), None when it does not answer. Enough of RFC 1035 for a test."""
    qid = int.from_bytes(os.urandom(2), "big")
    q = qid.to_bytes(2, "big") + b"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\x00"
    q += b"\x00\x01\x00\x01"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        try:
            s.sendto(q, (server, 53))
            data = s.recv(4096)
        except OSError:
            return None
    if len(data) < 12 or int.from_bytes(data[:2], "big") != qid or data[3] & 0x0F:
        return []
    ancount = int.from_bytes(data[6:8], "big")
    i = len(q)  # the answer repeats the question
    addrs = []
    for _ in range(ancount):
        if data[i] & 0xC0 == 0xC0:
            i += 2
        else:
            while data[i]:
                i += data[i] + 1
            i += 1
        rtype, rdlen = int.from_bytes(data[i:i + 2], "big"), int.from_bytes(data[i + 8:i + 10],
                                                                            "big")
        i += 10
        if rtype == 1 and rdlen == 4:
            addrs.append(".".join(str(b) for b in data[i:i + 4]))
        i += rdlen
    return addrs


def _mounts_under(root: str) -> list[str]:
    return [m for m in _mountpoints() if m == root or m.startswith(root + "/")]


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
