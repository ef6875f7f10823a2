"""Shared set-up for vramd's end-to-end tests: RBAC for the vramd user
(exactly what the Helm chart grants), nodes of the capacity model's homelab,
and a running vramd pointed at the testbed."""

import json
import os
import urllib.request

from testbed import Testbed

GI = 1 << 30
BIN_DIR = os.environ.get("VRAMD_BIN_DIR",
                         os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
VRAMD = os.path.join(BIN_DIR, "vramd")

# Least privilege: the verbs vramd uses (keep in sync with deploy/helm/vramd).
VRAMD_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
]

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


def start_vramd(tb: Testbed, config=None, extra_args=(), name=None, grant_rbac=True):
    """Starts vramd as the testbed's `vramd` user (RBAC granted once)."""
    if grant_rbac and not getattr(tb, "_vramd_rbac", False):
        tb.create_clusterrole_binding_for("vramd", VRAMD_RULES)
        tb._vramd_rbac = True
    if not getattr(tb, "redis_url", None):
        tb.start_redis()
    cfg = {"node_sync_interval_ms": 500, "reconcile_interval_ms": 1000}
    cfg.update(config or {})
    port = __import__("testbed").free_port()
    path = tb.write_file(f"vramd-{port}.json", json.dumps(cfg))
    proc = tb.start_vramd(VRAMD, tb.vramd_args(port, path) + list(extra_args), name=name)
    proc.port = port
    return proc


def get_json(url: str, timeout: float = 5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def ledger_nodes(vramd) -> dict:
    return {n["name"]: n for n in get_json(vramd.url + "/v1/nodes")["nodes"]}


def wait_ledger_nodes(tb: Testbed, vramd, names, timeout=20):
    tb.wait_for(lambda: set(names) <= set(ledger_nodes(vramd)), timeout,
                message=f"vramd to learn nodes {sorted(names)}")
