#!/usr/bin/env python3
"""Writes vramd's Grafana dashboard (deploy/helm/vramd/files/vramd-dashboard.json).

The JSON is generated so that the panels stay regular and the PromQL is in one
readable place; tests/deploy/helm_test.sh checks the committed file is what
this script produces and that every vramd_* metric it names is listed in
tests/deploy/metrics-used.txt.

  deploy/grafana/make-dashboard.py            # rewrite the JSON
  deploy/grafana/make-dashboard.py --check    # exit 1 if the JSON is stale

Every vramd replica exports the same ledger gauges (read from Valkey), so
ledger queries deduplicate with `max by (...)`; request counters are per
replica and are summed.
"""
import json
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helm", "vramd", "files",
                   "vramd-dashboard.json")
DS = {"type": "prometheus", "uid": "${datasource}"}
NODE = 'node=~"$node"'
EXT_VERBS = 'verb=~"filter|prioritize|bind|preempt"'


class Layout:
    """Places panels left to right on Grafana's 24-column grid."""

    def __init__(self):
        self.panels = []
        self.x = 0
        self.y = 0
        self.row_h = 0
        self.next_id = 1

    def _id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def row(self, title):
        if self.x:
            self.y += self.row_h
        self.x, self.row_h = 0, 0
        self.panels.append({"type": "row", "id": self._id(), "title": title, "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.y += 1

    def add(self, panel, w, h):
        if self.x + w > 24:
            self.y += self.row_h
            self.x, self.row_h = 0, 0
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)


def targets(*queries):
    out = []
    for i, q in enumerate(queries):
        expr, legend = q if isinstance(q, tuple) else (q, "")
        t = {"datasource": DS, "expr": expr, "refId": chr(ord("A") + i), "range": True}
        if legend:
            t["legendFormat"] = legend
        out.append(t)
    return out


def thresholds(*steps):
    s = [{"color": "green", "value": None}]
    for value, color in steps:
        s.append({"color": color, "value": value})
    return {"mode": "absolute", "steps": s}


def timeseries(title, queries, unit="short", description="", steps=(), stack=False, minimum=None):
    defaults = {"unit": unit, "custom": {"lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
                                         "stacking": {"mode": "normal" if stack else "none", "group": "A"}}}
    if steps:
        defaults["thresholds"] = thresholds(*steps)
        defaults["custom"]["thresholdsStyle"] = {"mode": "line"}
    if minimum is not None:
        defaults["min"] = minimum
    return {"type": "timeseries", "title": title, "description": description, "datasource": DS,
            "targets": targets(*queries), "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}}}


def stat(title, expr, unit="short", description="", steps=()):
    defaults = {"unit": unit}
    if steps:
        defaults["thresholds"] = thresholds(*steps)
    return {"type": "stat", "title": title, "description": description, "datasource": DS,
            "targets": [{"datasource": DS, "expr": expr, "refId": "A", "instant": True}],
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area", "textMode": "auto"}}


def bargauge(title, expr, legend, unit="short", description="", steps=(), maximum=None):
    defaults = {"unit": unit, "min": 0}
    if maximum is not None:
        defaults["max"] = maximum
    if steps:
        defaults["thresholds"] = thresholds(*steps)
    return {"type": "bargauge", "title": title, "description": description, "datasource": DS,
            "targets": [{"datasource": DS, "expr": expr, "refId": "A", "instant": True, "legendFormat": legend}],
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"orientation": "horizontal", "displayMode": "gradient",
                        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}}


def gpu(metric):
    return f'max by (node, gpu) ({metric}{{{NODE}}})'


def free_per_gpu():
    c, a, u = gpu("vramd_gpu_capacity_bytes"), gpu("vramd_gpu_allocated_bytes"), gpu("vramd_gpu_used_bytes")
    return f"clamp_min({c} - (({a} > {u}) or {u}), 0)"


def build():
    L = Layout()

    L.row("Cluster")
    all_gpu = lambda m: f"sum(max by (node, gpu) ({m}))"
    L.add(stat("Capacity", all_gpu("vramd_gpu_capacity_bytes"), "bytes",
               "Σ C: physical VRAM minus the per-GPU reserve."), 4, 4)
    L.add(stat("Allocated", all_gpu("vramd_gpu_allocated_bytes"), "bytes",
               "Σ A: VRAM promised to pods (reserved, bound, terminating)."), 4, 4)
    L.add(stat("Used", all_gpu("vramd_gpu_used_bytes"), "bytes",
               "Σ U: VRAM observed in use (A where no fresh usage report exists)."), 4, 4)
    L.add(stat("Schedulable", free_per_gpu().replace(NODE, 'node=~".*"').join(["sum(", ")"]), "bytes",
               "Σ max(0, C − max(A, U)): what the fit rule can still place."), 4, 4)
    L.add(stat("Nodes in ledger", "max(vramd_ledger_nodes)", "short"), 4, 4)
    L.add(stat("Ledger readable", "min(vramd_ledger_up)", "short",
               "1 when every replica reads the ledger from Valkey.", steps=((1, "green"),)) | {
        "fieldConfig": {"defaults": {"unit": "short", "thresholds": thresholds((0, "red"), (1, "green")),
                                     "mappings": [{"type": "value", "options": {
                                         "0": {"text": "DOWN", "color": "red"},
                                         "1": {"text": "OK", "color": "green"}}}]},
                        "overrides": []}}, 4, 4)

    L.row("Per node: capacity, allocation, usage")
    L.add(timeseries("Capacity, allocation and usage per node", [
        (f'max by (node) (vramd_node_capacity_bytes{{{NODE}}})', "{{node}} capacity"),
        (f'max by (node) (vramd_node_allocated_bytes{{{NODE}}})', "{{node}} allocated"),
        (f'max by (node) (vramd_node_used_bytes{{{NODE}}})', "{{node}} used"),
    ], "bytes", minimum=0), 12, 9)
    L.add(timeseries("Schedulable VRAM per node", [
        (f"sum by (node) ({free_per_gpu()})", "{{node}}"),
    ], "bytes", "max(0, C − max(A, U)) summed over the node's GPUs.", minimum=0), 12, 9)

    L.row("Per GPU")
    L.add(timeseries("Allocated per GPU", [
        (gpu("vramd_gpu_allocated_bytes"), "{{node}}/{{gpu}}")], "bytes", minimum=0), 8, 8)
    L.add(timeseries("Used per GPU", [
        (gpu("vramd_gpu_used_bytes"), "{{node}}/{{gpu}}")], "bytes",
        "Falls back to allocation while no fresh usage report exists (see usage freshness).", minimum=0), 8, 8)
    L.add(bargauge("Usage report fresh", gpu("vramd_gpu_usage_fresh"), "{{node}}/{{gpu}}", "short",
                   "1: a node agent reported usage recently; 0: usage shown equals allocation.",
                   steps=((1, "green"),), maximum=1) | {
        "fieldConfig": {"defaults": {"unit": "short", "min": 0, "max": 1,
                                     "thresholds": thresholds((0, "orange"), (1, "green"))}, "overrides": []}},
        8, 8)

    L.row("The six metrics (per GPU)")
    six = [
        ("Over-subscription A / C", "vramd_gpu_over_subscription_ratio", "percentunit",
         "> 100%: more VRAM promised than exists.", ((1, "red"),)),
        ("Utilization U / A", "vramd_gpu_utilization_ratio", "percentunit",
         "> 100%: starvation (usage beyond allocation); < 30%: waste.", ((1, "red"),)),
        ("Saturation U / C", "vramd_gpu_saturation_ratio", "percentunit",
         "Physical stress; alert above 85%.", ((0.85, "red"),)),
        ("Headroom C − U", "vramd_gpu_headroom_bytes", "bytes",
         "Buffer before the card is full (may be negative).", ()),
        ("Potential A − U", "vramd_gpu_potential_bytes", "bytes",
         "Reserved but idle (negative: usage above allocation).", ()),
        ("Risk potential / headroom", "vramd_gpu_risk_ratio", "short",
         "> 1: a simultaneous burst of the tenants would exceed the card.", ((1, "red"),)),
    ]
    for title, metric, unit, desc, steps in six:
        L.add(timeseries(title, [(gpu(metric), "{{node}}/{{gpu}}")], unit, desc, steps), 8, 8)

    L.row("Pods")
    pod_bytes = f'max by (node, namespace, pod, gpu) (vramd_pod_allocated_bytes{{{NODE}}})'
    L.add(bargauge("Largest allocations", f"topk(15, sum by (namespace, pod) ({pod_bytes}))",
                   "{{namespace}}/{{pod}}", "bytes", "VRAM reserved per pod (all its GPUs)."), 12, 9)
    L.add(timeseries("Held by terminating pods (phantom rule)", [
        (f"sum by (node, namespace, pod) ({pod_bytes} * on (node, namespace, pod) group_left () "
         f"(max by (node, namespace, pod) (vramd_pod_terminating{{{NODE}}}) == 1))",
         "{{namespace}}/{{pod}} on {{node}}"),
    ], "bytes", "Pods with a deletionTimestamp keep their VRAM until the object is gone.", minimum=0), 12, 9)

    L.row("Extender verbs")
    L.add(timeseries("Requests by verb", [
        (f"sum by (verb) (rate(vramd_http_requests_total{{{EXT_VERBS}}}[$__rate_interval]))", "{{verb}}"),
    ], "reqps"), 8, 8)
    L.add(timeseries("Errors by verb and code", [
        (f'sum by (verb, code) (rate(vramd_http_requests_total{{{EXT_VERBS}, code!~"2.."}}[$__rate_interval]))',
         "{{verb}} {{code}}"),
    ], "reqps"), 8, 8)
    L.add(timeseries("Bind results", [
        ("sum by (result) (rate(vramd_bind_total[$__rate_interval]))", "{{result}}"),
    ], "ops", "bound / already_bound: success; rejected: no room (races); failed: Valkey or API errors."), 8, 8)
    for q, label in (("0.5", "p50"), ("0.99", "p99")):
        L.add(timeseries(f"Latency {label} by verb", [
            (f"histogram_quantile({q}, sum by (verb, le) "
             f"(rate(vramd_http_request_duration_seconds_bucket{{{EXT_VERBS}}}[$__rate_interval])))", "{{verb}}"),
        ], "s"), 12, 8)

    L.row("Reconcile and drift")
    L.add(timeseries("Drift corrected", [
        ("sum(increase(vramd_reconcile_orphans_readded_total[$__rate_interval]))", "orphans re-added"),
        ("sum(increase(vramd_reconcile_stale_reservations_freed_total[$__rate_interval]))",
         "stale reservations freed"),
        ("sum(increase(vramd_reconcile_errors_total[$__rate_interval]))", "reconcile errors"),
    ], "short", "Ledger entries the reconcile loop had to fix: each one is a drift from the cluster."), 8, 8)
    L.add(timeseries("Phantom bytes per node", [
        (f"max by (node) (vramd_reconcile_phantom_bytes{{{NODE}}})", "{{node}}"),
    ], "bytes", "VRAM held by pods that are terminating (freed when the pod object is gone).", minimum=0), 8, 8)
    L.add(timeseries("Reconcile pass duration", [
        ("histogram_quantile(0.99, sum by (le) (rate(vramd_reconcile_duration_seconds_bucket[$__rate_interval])))",
         "p99"),
    ], "s"), 8, 8)
    L.add(timeseries("Node capacity sync", [
        ("sum by (result) (rate(vramd_node_sync_passes_total[$__rate_interval]))", "{{result}}"),
    ], "ops"), 12, 7)
    L.add(timeseries("Nodes with capacity below allocation", [
        ("max by (node) (vramd_node_capacity_below_allocation)", "{{node}}"),
    ], "short", steps=((1, "red"),)), 12, 7)

    L.row("GPU locks")
    L.add(timeseries("Locks held", [
        (f"max by (node, gpu) (vramd_lock_held{{{NODE}}})", "{{node}}/{{gpu}}"),
    ], "short", stack=True), 8, 8)
    L.add(timeseries("Waiters", [
        (f"max by (node, gpu) (vramd_lock_waiters{{{NODE}}})", "{{node}}/{{gpu}}"),
    ], "short"), 8, 8)
    L.add(timeseries("Lock wait p99", [
        ("histogram_quantile(0.99, sum by (le) (rate(vramd_lock_wait_seconds_bucket[$__rate_interval])))", "p99"),
    ], "s"), 8, 8)
    L.add(timeseries("Lock operations", [
        ("sum by (op, result) (rate(vramd_lock_operations_total[$__rate_interval]))", "{{op}} {{result}}"),
    ], "ops"), 8, 7)
    L.add(timeseries("Lock expirations (holder stopped heartbeating)", [
        ("sum(increase(vramd_lock_expirations_total[$__rate_interval]))", "expired"),
    ], "short"), 8, 7)
    L.add(timeseries("Fencing token", [
        (f"max by (node, gpu) (vramd_lock_fencing_token{{{NODE}}})", "{{node}}/{{gpu}}"),
    ], "short", "Increases by one on every grant: a step is a new holder."), 8, 7)

    L.row("Valkey and replicas")
    L.add(timeseries("Ledger readable per replica", [
        ("vramd_ledger_up", "{{instance}}"),
    ], "short", minimum=0), 8, 7)
    L.add(timeseries("Valkey errors", [
        ("sum by (instance) (rate(vramd_valkey_errors_total[$__rate_interval]))", "{{instance}}"),
    ], "ops"), 8, 7)
    L.add(timeseries("Ledger writes", [
        ("max(rate(vramd_ledger_epoch[$__rate_interval]))", "epoch increments/s"),
    ], "ops", "The epoch moves on every ledger write (reserve, release, capacity, usage)."), 8, 7)
    L.add({"type": "table", "title": "Replicas and versions", "datasource": DS,
           "targets": [{"datasource": DS, "expr": "max by (instance, version) (vramd_build_info)",
                        "refId": "A", "instant": True, "format": "table"}],
           "fieldConfig": {"defaults": {}, "overrides": []},
           "transformations": [{"id": "organize", "options": {"excludeByName": {"Time": True, "Value": True}}}],
           "options": {"showHeader": True}}, 24, 5)

    return {
        "title": "vramd: GPU memory",
        "uid": "vramd-overview",
        "description": "VRAM capacity, allocation and usage per node and GPU, the six capacity metrics, "
                       "extender verbs, reconcile drift and GPU locks.",
        "tags": ["vramd", "gpu", "scheduler"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0, "refresh": 1, "options": []},
            {"name": "node", "label": "Node", "type": "query", "datasource": DS,
             "definition": "label_values(vramd_node_capacity_bytes, node)",
             "query": {"query": "label_values(vramd_node_capacity_bytes, node)", "refId": "node"},
             "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "refresh": 2,
             "sort": 1, "hide": 0, "options": []},
        ]},
        "annotations": {"list": []},
        "links": [],
        "panels": L.panels,
    }


def render():
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main():
    text = render()
    if "--check" in sys.argv[1:]:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{OUT} is stale: run deploy/grafana/make-dashboard.py", file=sys.stderr)
                return 1
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
