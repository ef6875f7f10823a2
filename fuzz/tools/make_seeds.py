#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ from the real extender
fixtures in tests/data/extender/ and small hand-written cases. Rerun after
adding a fixture; files are named after their content's role, so the output
is stable (existing files are overwritten, others left alone)."""
import json
import pathlib

root = pathlib.Path(__file__).resolve().parents[2]
fixtures = root / "tests" / "data" / "extender"
corpus = root / "fuzz" / "corpus"


def put(target, name, data):
    d = corpus / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, (dict, list)):
        data = json.dumps(data, separators=(",", ":"))
    if isinstance(data, str):
        data = data.encode()
    (d / name).write_bytes(data)


# quantity: the forms Kubernetes writes, and the edges of the parser.
for i, q in enumerate([
    "0", "1", "1023", "1024", "54Gi", "1500M", "16k", "1e9", "1E9", "137438953472", "1.5Gi", "0.5", "1500m",
    "-1", "-0", "+5Mi", "9223372036854775807", "9223372036854775808", "1e400", "7Ei", "8Ei", "1E", "100n",
    ".5Ki", "1.", "1e-3", "2e+3", "1.25Mi", "0.0001Ti", "999999999999999999999999", "1..2", "12 Gi", "Gi",
]):
    put("quantity", f"q{i:02d}", q)

# extender: the real requests kube-scheduler sent, and variants.
pod = lambda limits, ann=None, init=None, overhead=None, uid="u-1": {
    "metadata": {"name": "p", "namespace": "default", "uid": uid, **({"annotations": ann} if ann else {})},
    "spec": {
        "containers": [{"name": "c", "resources": {"limits": {"vramd.io/vram": limits}}}],
        **({"initContainers": init} if init else {}),
        **({"overhead": {"vramd.io/vram": overhead}} if overhead else {}),
    },
}
names = ["gpu-a", "gpu-b", "cpu-c", "gpu-d", "unknown"]
for f in sorted(fixtures.glob("*.json")):
    if f.name.startswith(("filter", "prioritize")):
        body = json.loads(f.read_text())
        put("extender", "fixture-" + f.stem, f.read_bytes())
        body["NodeNames"] = names
        put("extender", "fixture-" + f.stem + "-snapshot-nodes", body)
        put("kube_pod", "fixture-" + f.stem + "-pod", body["Pod"])
put("extender", "cache-40Gi", {"Pod": pod("40Gi"), "Nodes": None, "NodeNames": names})
put("extender", "cache-duplicates", {"Pod": pod("10Gi"), "NodeNames": ["gpu-a", "gpu-a", "gpu-b", "gpu-b"]})
put("extender", "tp2-peak", {"Pod": pod("100Gi", {"vramd.io/gpu-count": "2", "vramd.io/vram-peak": "120Gi",
                                                 "vramd.io/model": "llama"}), "NodeNames": names})
put("extender", "sidecar-init", {"Pod": pod("8Gi", init=[
    {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"vramd.io/vram": "2Gi"}}},
    {"name": "i", "resources": {"limits": {"vramd.io/vram": "20Gi"}}}], overhead="1Gi"), "NodeNames": names})
put("extender", "numeric-quantity", {"Pod": pod(1073741824), "NodeNames": names})
put("extender", "no-vram", {"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}},
                            "NodeNames": names})
put("extender", "bad-quantity", {"Pod": pod("-1Gi"), "NodeNames": names})
put("extender", "non-cache", {"Pod": pod("4Gi"), "Nodes": {"metadata": {}, "items": [
    {"metadata": {"name": n, "labels": {"x": "y"}}, "status": {}} for n in names]}, "NodeNames": None})
put("extender", "preempt", {"Pod": pod("30Gi"), "NodeNameToMetaVictims": {
    "gpu-a": {"Pods": [{"UID": "uid-1"}], "NumPDBViolations": 0},
    "gpu-b": {"Pods": [], "NumPDBViolations": 0}}})
put("extender", "lowercase-keys", {"pod": pod("1Gi"), "nodenames": ["gpu-a"]})

# bind
put("bind", "fixture-bind", (fixtures / "bind.json").read_bytes())
put("bind", "bind", {"PodName": "p", "PodNamespace": "default", "PodUID": "u-1", "Node": "gpu-a"})
put("bind", "bind-escapes", {"PodName": "p\u00e9\"\\\n", "PodNamespace": "d\u0001", "PodUID": "u", "Node": "n"})
put("bind", "bind-missing", {"PodName": "p", "PodUID": "u-1"})

# config: the demo config and the documented keys.
put("config", "demo", (root / "deploy" / "demo" / "config.json").read_bytes())
put("config", "full", {
    "listen": "0.0.0.0:8443", "http_threads": 16, "max_body_bytes": "4Mi", "read_timeout_ms": 5000,
    "api_token_file": "/t", "tls": {"cert_file": "/c", "key_file": "/k"},
    "valkey": {"url": "redis://v:6379/0", "key_prefix": "vramd", "pool_size": 8, "timeout_ms": 1000},
    "resource_name": "vramd.io/vram", "policy": "binpack", "reserve": {"percent": 2.5, "min_bytes": "512Mi"},
    "usage_max_age_ms": 60000, "kube": {"enabled": False, "timeout_ms": 4000},
    "nodes": [{"name": "a", "gpus": ["80Gi", {"capacity": "80Gi", "uuid": "GPU-1"}]}, {"name": "b", "gpus": []}],
    "log": {"level": "warn", "json": True}})
put("config", "duplicate-nodes", {"nodes": [{"name": "a", "gpus": ["8Gi"]}, {"name": "a", "gpus": ["16Gi"]}]})
put("config", "bad-type", {"http_threads": [1]})

# usage
put("usage", "bytes", {"gpus": {"0": 1073741824, "1": "12Gi"}})
put("usage", "negative", {"gpus": {"0": -1}})
put("usage", "big", {"gpus": {"0": 9223372036854775807, "1": "8Ei"}})
put("usage", "duplicate", '{"gpus":{"0":1,"00":2}}')
put("usage", "float", '{"gpus":{"0":1.5,"1":1e400}}')

# lock: the first byte picks the operation (0 acquire, 1 heartbeat, 2 release).
for op, body in [(0, {"owner": "3f1c-9a/trainer-0", "ttl_seconds": 30, "wait_seconds": 5}),
                 (1, {"owner": "3f1c-9a/trainer-0", "ttl_seconds": 0.5}),
                 (2, {"owner": "3f1c-9a/trainer-0"}),
                 (0, {"owner": "x/y", "ttl": 30}),
                 (1, {"owner": "x/y", "ttl_seconds": 1e400}),
                 (2, {"owner": 5})]:
    put("lock", f"op{op}-{len(list(corpus.glob('lock/*')))}", bytes([op]) + json.dumps(body).encode())
put("lock", "path-gpu", b"\x007")
put("lock", "path-node", b"\x01node-1.example")

# kube_pod: pods and nodes as the API server sends them.
put("kube_pod", "node-annotation", {"metadata": {"name": "n1", "uid": "x", "resourceVersion": "5",
                                                 "annotations": {"vramd.io/capacity": "80Gi,80Gi"}}})
put("kube_pod", "node-gfd", {"metadata": {"name": "n2", "labels": {"nvidia.com/gpu.count": "8",
                                                                   "nvidia.com/gpu.memory": "81920"}}})
put("kube_pod", "pod-deleting", {"metadata": {"name": "p", "namespace": "ml", "uid": "u1",
                                              "deletionTimestamp": "2026-11-21T06:10:00Z"},
                                 "spec": {"nodeName": "n1", "priority": 5, "containers": [
                                     {"name": "c", "resources": {"requests": {"vramd.io/vram": "8Gi"}}}]},
                                 "status": {"phase": "Running"}})

# kube_pod: hostile shapes (issue 11): bound pods whose placement annotations or
# request are malformed, and nodes whose capacity metadata is. Each one once
# crashed or could overflow a sum; the target checks each is an error or a report.
def bound_pod(ann, vram="1Gi"):
    return {"metadata": {"name": "h", "namespace": "default", "uid": "u-h", "annotations": ann},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "c", "resources": {"limits": {"vramd.io/vram": vram}}}]},
            "status": {"phase": "Running"}}


for name, ann, vram in [
    ("hostile-per-gpu-19-digits", {"vramd.io/gpus": "0", "vramd.io/vram-per-gpu": "9999999999999999999"}, "1Gi"),
    ("hostile-per-gpu-2-pow-60", {"vramd.io/gpus": "0", "vramd.io/vram-per-gpu": str(1 << 60)}, "1Gi"),
    ("hostile-per-gpu-negative", {"vramd.io/gpus": "0", "vramd.io/vram-per-gpu": "-1"}, "1Gi"),
    ("hostile-per-gpu-zero", {"vramd.io/gpus": "0", "vramd.io/vram-per-gpu": "0"}, "1Gi"),
    ("hostile-per-gpu-whitespace", {"vramd.io/gpus": "0", "vramd.io/vram-per-gpu": " 1024"}, "1Gi"),
    ("hostile-per-gpu-empty", {"vramd.io/gpus": "0", "vramd.io/vram-per-gpu": ""}, "1Gi"),
    ("hostile-gpus-duplicate", {"vramd.io/gpus": "0,00", "vramd.io/vram-per-gpu": "1073741824"}, "1Gi"),
    ("hostile-gpus-huge-index", {"vramd.io/gpus": "99999999999999999999", "vramd.io/vram-per-gpu": "1024"}, "1Gi"),
    ("hostile-gpus-text", {"vramd.io/gpus": "all", "vramd.io/vram-per-gpu": "1024"}, "1Gi"),
    ("hostile-gpus-only", {"vramd.io/gpus": "0"}, "1Gi"),
    ("hostile-gpu-count-absurd", {"vramd.io/gpu-count": "99999999999999"}, "1Gi"),
    ("hostile-peak-past-int64", {"vramd.io/vram-peak": "9999999999999999999"}, "1Gi"),
    ("hostile-request-past-int64", {}, "9999999999999999999"),
    ("hostile-request-2pi", {}, "2Pi"),
]:
    put("kube_pod", name, bound_pod(ann, vram))
for name, labels, ann in [
    ("hostile-node-cap-1e30", {}, {"vramd.io/capacity": "1e30"}),
    ("hostile-node-cap-negative", {}, {"vramd.io/capacity": "-5Gi"}),
    ("hostile-node-cap-text", {}, {"vramd.io/capacity": "eighty gigabytes"}),
    ("hostile-node-cap-sum-overflows", {}, {"vramd.io/capacity": "7Ei,7Ei"}),
    ("hostile-node-gfd-count-absurd", {"nvidia.com/gpu.count": "99999999999999", "nvidia.com/gpu.memory": "8192"}, {}),
    ("hostile-node-gfd-memory-past-int64", {"nvidia.com/gpu.count": "1",
                                            "nvidia.com/gpu.memory": "9999999999999999999"}, {}),
    ("hostile-node-gfd-memory-2-pow-40-mib", {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": str(1 << 40)}, {}),
]:
    put("kube_pod", name, {"metadata": {"name": "n-" + name, "uid": "x", "labels": labels, "annotations": ann}})
