"""Shared set-up for vramd's end-to-end tests: RBAC for the vramd user
(exactly what the Helm chart grants), nodes of the capacity model's homelab,
and a running vramd pointed at the testbed."""

import json
import os
import shutil
import subprocess
import sys
import unittest
import urllib.error
import urllib.request

from testbed import Testbed

GI = 1 << 30
BIN_DIR = os.environ.get("VRAMD_BIN_DIR",
                         os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
VRAMD = os.path.join(BIN_DIR, "vramd")

# Least privilege: the verbs vramd uses (keep in sync with deploy/helm/vramd).
VRAMD_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["pods/binding", "pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    {"apiGroups": ["vramd.io"], "resources": ["vramqueues"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["vramd.io"], "resources": ["vramqueues/status"], "verbs": ["patch", "update"]},
]

# The chart's VramQueue CRD (issue 16), applied as is by apply_queue_crd.
QUEUE_CRD_FILE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                               "deploy", "helm", "vramd", "crds", "vramqueues.yaml"))
QUEUES_PATH = "/apis/vramd.io/v1alpha1/vramqueues"

HOMELAB = {  # the capacity model's three nodes, as GPU Feature Discovery labels them
    "ness-linux3": 98304,
    "ness-server2": 8192,
    "ness-legion1": 8192,
}


def create_homelab(tb: Testbed, extra_labels=None):
    for name, mib in HOMELAB.items():
        labels = {"nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": str(mib)}
        labels.update((extra_labels or {}).get(name, {}))
        tb.create_node(name, labels=labels)
    tb.create_node("cpu-only")


def start_vramd(tb: Testbed, config=None, extra_args=(), name=None, grant_rbac=True,
                token_file=None, wait_sealed=True):
    """Starts vramd as the testbed's `vramd` user, or with `token_file` (e.g.
    the chart's ServiceAccount token)."""
    if token_file is None and grant_rbac:
        grant_vramd_rules(tb)
    if not getattr(tb, "redis_url", None):
        tb.start_redis()
    # Bindings here take milliseconds: a rebuilt (or new) ledger is sealed 1 s
    # after its rebuild began instead of 3 API timeouts later.
    cfg = {"node_sync_interval_ms": 500, "reconcile_interval_ms": 1000, "rebuild_quiet_ms": 1000}
    cfg.update(config or {})
    port = __import__("testbed").free_port()
    path = tb.write_file(f"vramd-{port}.json", json.dumps(cfg))
    proc = tb.start_vramd(VRAMD, tb.vramd_args(port, path, token_file=token_file) + list(extra_args),
                          name=name)
    proc.port = port
    if wait_sealed:
        wait_ledger_sealed(tb, proc)
    return proc


def grant_vramd_rules(tb: Testbed):
    """Grants VRAMD_RULES to the `vramd` user and waits until the authorizer
    allows every verb. Done for every vramd started, not once per testbed: a
    test may have replaced the user's grants meanwhile, and what vramd may do
    must not depend on which test ran before."""
    tb.create_clusterrole_binding_for("vramd", VRAMD_RULES, wait=False)
    for rule in VRAMD_RULES:
        group = rule["apiGroups"][0]
        for res in rule["resources"]:
            resource, _, sub = res.partition("/")
            for verb in rule["verbs"]:
                tb.wait_for(lambda v=verb, r=resource, s=sub: tb.can_i("vramd", v, r, group=group, subresource=s),
                            timeout=10, message=f"RBAC: vramd may {verb} {res}")


def ledger_sealed(vramd) -> bool:
    """Whether vramd's view of the ledger is sealed (GET /readyz details)."""
    try:
        with urllib.request.urlopen(vramd.url + "/readyz", timeout=5) as r:
            body = r.read()
    except urllib.error.HTTPError as e:
        body = e.read()
    except OSError:
        return False
    return json.loads(body).get("ledger_sealed") is True


def wait_ledger_sealed(tb: Testbed, vramd, timeout=30):
    """Waits until the leader has sealed the ledger (a new store is unsealed
    until its first rebuild; nothing is granted before)."""
    tb.wait_for(lambda: ledger_sealed(vramd), timeout, message="the ledger to be sealed")


def get_json(url: str, timeout: float = 5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def ledger_nodes(vramd) -> dict:
    return {n["name"]: n for n in get_json(vramd.url + "/v1/nodes")["nodes"]}


def wait_ledger_nodes(tb: Testbed, vramd, names, timeout=20):
    tb.wait_for(lambda: set(names) <= set(ledger_nodes(vramd)), timeout,
                message=f"vramd to learn nodes {sorted(names)}")


def chart_service_account_token(tb: Testbed) -> str:
    """Applies the Helm chart's rendered RBAC (ClusterRole + ClusterRoleBinding
    to ServiceAccount vramd-system/vramd) as is, creates that ServiceAccount and
    returns a token file for it from the TokenRequest API. vramd then runs with
    exactly the chart's permissions. The rendered objects come from
    tests/deploy/helm_test.sh (VRAMD_TEST_DEPLOY_OUT)."""
    out = os.environ.get("VRAMD_TEST_DEPLOY_OUT")
    path = os.path.join(out or "", "vramd-rbac.json")
    if not out or not os.path.isfile(path):
        raise RuntimeError("VRAMD_TEST_DEPLOY_OUT/vramd-rbac.json is missing: run "
                           "tests/deploy/helm_test.sh DIR first and set VRAMD_TEST_DEPLOY_OUT=DIR "
                           "(ctest does this through the deploy_out fixture)")
    with open(path) as f:
        objects = json.load(f)
    sa = None
    for obj in objects:
        tb.apply(obj)
        if obj["kind"] == "ClusterRoleBinding":
            sa = obj["subjects"][0]
    ns, name = sa["namespace"], sa["name"]
    if tb.api.get_or_none(f"/api/v1/namespaces/{ns}") is None:
        tb.create_namespace(ns)
    tb.api.post(f"/api/v1/namespaces/{ns}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    req = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
           "spec": {"expirationSeconds": 3600}}
    tok = tb.api.post(f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token", req)["status"]["token"]
    return tb.write_file("vramd-sa.token", tok)


def metrics_text(vramd) -> str:
    with urllib.request.urlopen(vramd.url + "/metrics", timeout=5) as r:
        return r.read().decode()


def metric_value(vramd, name: str, labels: dict | None = None) -> float | None:
    """The value of one sample on vramd's /metrics (None when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in (labels or {}).items())
    for line in metrics_text(vramd).splitlines():
        if line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        if series == name and not want or series == f"{name}{{{want}}}":
            return float(value)
    return None


def ledger_view(vramd) -> dict:
    """node -> sorted [(pod uid, gpus, bytes per GPU, state)], for comparisons."""
    out = {}
    for name, n in ledger_nodes(vramd).items():
        out[name] = sorted((p["uid"], tuple(p["gpus"]), p["vram_per_gpu_bytes"], p["state"])
                           for p in n["pods"])
    return out


class SharedTestbed(unittest.TestCase):
    """One testbed per test class: setUpClass enters it and calls
    `cls.prepare(tb)` (nodes, vramd, kube-scheduler); when that fails, the
    processes' log tails are printed and the testbed is torn down."""

    @classmethod
    def prepare(cls, tb: Testbed):
        pass

    @classmethod
    def setUpClass(cls):
        cls.tb = Testbed().__enter__()
        try:
            cls.prepare(cls.tb)
        except BaseException:
            print(cls.tb.log_tails(), file=sys.stderr)
            cls.tb.__exit__(None, None, None)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.tb.__exit__(None, None, None)


def kubectl(tb: Testbed, *args: str, timeout: float = 60) -> str:
    """Runs kubectl as the testbed's admin and returns its stdout: the testbed's
    own kubectl 1.20.2 (tests/e2e/testbed/build-k8s.sh builds it beside the API
    server), else one on PATH. Its discovery cache lives in the testbed's
    directory (never ~/.kube). Raises RuntimeError with kubectl's stderr when
    it fails."""
    binary = os.path.join(tb.k8s_bin_dir, "kubectl")
    if not os.access(binary, os.X_OK):
        binary = shutil.which("kubectl") or ""
    if not binary:
        raise RuntimeError(f"no kubectl in {tb.k8s_bin_dir} or on PATH: run tests/e2e/testbed/build-k8s.sh")
    config = tb.path("cfg", "admin.kubeconfig")
    if not os.path.exists(config):
        config = tb.write_kubeconfig("admin.kubeconfig", tb.admin_token)
    done = subprocess.run([binary, f"--kubeconfig={config}", f"--cache-dir={tb.path('cfg', 'kubectl-cache')}", *args],
                          capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def apply_queue_crd(tb: Testbed, timeout: float = 30) -> None:
    """Applies the chart's VramQueue CRD file (deploy/helm/vramd/crds/vramqueues.yaml)
    as is with `kubectl apply` and waits until the API server serves it: the
    CRD is Established and a list of vramqueues answers."""
    kubectl(tb, "apply", "-f", QUEUE_CRD_FILE)
    kubectl(tb, "wait", "--for=condition=Established", f"--timeout={int(timeout)}s",
            "crd/vramqueues.vramd.io", timeout=timeout + 10)
    tb.wait_for(lambda: tb.api.get_or_none(QUEUES_PATH) is not None, timeout,
                message="the API server to serve vramqueues.vramd.io/v1alpha1")
    # kubectl's discovery cache predates the CRD: without this, `kubectl get vq`
    # would answer 'the server doesn't have a resource type "vq"' for minutes.
    shutil.rmtree(tb.path("cfg", "kubectl-cache"), ignore_errors=True)


def queue_manifest(name: str, deserved: int | str, namespaces=(), limit: int | str | None = None,
                   weight: int | None = None, parent: str | None = None) -> dict:
    """A VramQueue object (quantities as given: "16Gi" or an integer of bytes)."""
    spec: dict = {"deserved": deserved}
    if namespaces:
        spec["namespaces"] = list(namespaces)
    if limit is not None:
        spec["limit"] = limit
    if weight is not None:
        spec["overQuotaWeight"] = weight
    if parent is not None:
        spec["parent"] = parent
    return {"apiVersion": "vramd.io/v1alpha1", "kind": "VramQueue", "metadata": {"name": name}, "spec": spec}


def create_queue(tb: Testbed, name: str, deserved: int | str, **kwargs) -> dict:
    """Creates (or replaces) a VramQueue; see queue_manifest for the arguments."""
    return tb.apply(queue_manifest(name, deserved, **kwargs))


def queue_status(tb: Testbed, name: str) -> dict:
    """A VramQueue's status as vramd wrote it ({} before the first write)."""
    return (tb.api.get(f"{QUEUES_PATH}/{name}") or {}).get("status") or {}
