#!/usr/bin/env python3
"""Scheduling throughput on the real testbed (issue 6, item 5).

A real kube-apiserver + kube-scheduler 1.20 (tests/e2e/testbed.py), 100 Node
objects labelled like GPU Feature Discovery labels 8 x 80 GiB GPUs, and 1,000
pods that each request 8Gi of vramd.io/vram. The pods are created while no
scheduler runs; then kube-scheduler starts and a watch records when each pod
gets its nodeName. Two configurations, same pods, same nodes:

  without   kube-scheduler alone (the nodes also advertise vramd.io/vram in
            status.capacity, so the default fit check admits the pods)
  with      vramd as extender: filter + prioritize + bind (vramd reserves in
            Valkey, writes the GPU annotations and creates the Binding)

Throughput = pods bound / (last bind - first bind), from the watch; the time
from scheduler start to the last bind is reported too. Bench only: never run by
the test command.

    python3 bench/sched_throughput.py [--nodes 100] [--pods 1000] [--rounds 1]
        [--scheduler-qps default|N] [--vramd-http-threads N] [--vramd-args FLAGS] [--api-requests] [--rotate]
        [--keep-vramd] [--json FILE]

--scheduler-qps N raises kube-scheduler's client rate limit (qps N, burst 2N):
with the default (qps 50) the scheduler's own Binding POSTs are throttled,
which the extender's bind path does not go through.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shlex
import shutil
import socket
import ssl
import statistics
import subprocess
import tempfile
import sys
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.dont_write_bytecode = True

from common import ledger_view, start_vramd, wait_ledger_nodes  # noqa: E402
from testbed import Testbed, _http_get_status, free_port  # noqa: E402

GI = 1 << 30


class BindWatch:
    """Watches pods of a namespace and records when each first has a nodeName."""

    def __init__(self, tb: Testbed, namespace: str):
        self.tb, self.ns = tb, namespace
        self.bound: dict[str, float] = {}
        self.lock = threading.Lock()
        self.stop = False
        rv = tb.api.get(f"/api/v1/namespaces/{namespace}/pods", limit=1)["metadata"]["resourceVersion"]
        u = urllib.parse.urlsplit(tb.api_url)
        ctx = ssl.create_default_context(cafile=tb.ca_file)
        self.conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=600)
        self.conn.request("GET", f"/api/v1/namespaces/{namespace}/pods?watch=1&resourceVersion={rv}",
                          headers={"Authorization": f"Bearer {tb.admin_token}"})
        self.resp = self.conn.getresponse()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                line = self.resp.readline()
            except (OSError, ValueError, http.client.HTTPException):
                return
            if not line:
                return
            ev = json.loads(line)
            pod = ev.get("object", {})
            name = pod.get("metadata", {}).get("name")
            if pod.get("spec", {}).get("nodeName") and name:
                with self.lock:
                    self.bound.setdefault(name, time.monotonic())

    def count(self) -> int:
        with self.lock:
            return len(self.bound)

    def close(self):
        self.stop = True
        try:  # unblocks the reader thread, which holds the response's lock
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(timeout=5)
        self.conn.close()


def create_pods(tb: Testbed, namespace: str, n: int, workers: int = 8):
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futs = [pool.submit(tb.create_pod, f"p-{i:04d}", "8Gi", namespace=namespace) for i in range(n)]
        for f in futs:
            f.result()


def proc_cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """User + system CPU seconds of each process so far (/proc/PID/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for name, pid in pids.items():
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[name] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return out


def testbed_pids(tb: Testbed, extra: dict[str, int]) -> dict[str, int]:
    pids = {name: p.pid for name, p in tb.procs.items() if p.alive() and p.pid not in extra.values()}
    pids.update(extra)  # vramd under one name whichever instance runs
    return pids


def tcp_active_opens() -> int:
    """The kernel's count of TCP connections this machine opened (/proc/net/snmp)."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    return int(rows[1][rows[0].index("ActiveOpens")])


def run_round(tb: Testbed, label: str, namespace: str, pods: int, extenders: list[str],
              config_overrides: dict, timeout: float, extender_overrides: dict | None = None,
              extra_pids: dict[str, int] | None = None, perf_out: str | None = None) -> dict:
    tb.stop_scheduler()
    tb.create_namespace(namespace)
    t0 = time.monotonic()
    create_pods(tb, namespace, pods)
    create_s = time.monotonic() - t0
    watch = BindWatch(tb, namespace)
    load_before = os.getloadavg()[0]
    start = time.monotonic()
    cpu_before = proc_cpu_seconds(testbed_pids(tb, extra_pids or {}))
    opens_before = tcp_active_opens()
    perf = None
    if perf_out and extra_pids and "vramd" in extra_pids:
        perf_args = os.environ.get("BENCH_PERF_ARGS", "-F 499 --call-graph dwarf,16384").split()
        perf = subprocess.Popen(["perf", "record", *perf_args, "-o", perf_out, "-p", str(extra_pids["vramd"])],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tb.start_scheduler(extenders, config_overrides=config_overrides, extender_overrides=extender_overrides)
    sched_pid = tb.procs["kube-scheduler"].pid
    cpu_before["kube-scheduler"] = 0.0  # started with this round; its start-up counts
    ready = time.monotonic()
    deadline = ready + timeout
    while watch.count() < pods and time.monotonic() < deadline:
        time.sleep(0.05)
    cpu_after = proc_cpu_seconds(testbed_pids(tb, extra_pids or {}))
    opens = tcp_active_opens() - opens_before
    if perf:
        perf.send_signal(2)
        perf.wait(60)
    watch.close()
    assert tb.procs["kube-scheduler"].pid == sched_pid
    times = sorted(watch.bound.values())
    tb.stop_scheduler()
    if len(times) < 2:
        raise RuntimeError(f"{label}: only {len(times)} of {pods} pods bound\n{tb.log_tails()}")
    span = times[-1] - times[0]
    r = {
        "label": label,
        "pods": pods,
        "bound": len(times),
        "pods_per_s": (len(times) - 1) / span if span > 0 else float("inf"),
        "first_to_last_s": span,
        "scheduler_start_to_last_s": times[-1] - start,
        "scheduler_ready_to_first_s": times[0] - ready,
        "create_pods_s": create_s,
        "load1_before": load_before,
        "load1_after": os.getloadavg()[0],
        # CPU seconds per process from the scheduler's start to the last bind
        "cpu_s": {k: round(cpu_after[k] - cpu_before.get(k, 0.0), 3) for k in sorted(cpu_after)},
        # TCP connections opened on the machine (all of them loopback here) from the
        # scheduler's start to the last bind: kube-scheduler's extender client keeps
        # 2 idle connections, so calls that overlap open new ones
        "tcp_opens": opens,
    }
    print(f"  {label:10s} {r['bound']}/{pods} bound, {r['pods_per_s']:.1f} pods/s "
          f"(first->last {span:.2f} s; scheduler start->last {r['scheduler_start_to_last_s']:.2f} s); "
          f"load {load_before:.1f}->{r['load1_after']:.1f}", flush=True)
    print(f"  CPU s: {r['cpu_s']} (all {sum(r['cpu_s'].values()):.2f}); TCP connections opened: {opens}",
          flush=True)
    return r


def verb_latency(vramd_url: str) -> dict:
    """Mean latency (ms) and count per verb from vramd's request histogram."""
    import re
    import urllib.request
    text = urllib.request.urlopen(vramd_url + "/metrics", timeout=10).read().decode()
    out = {}
    for verb in ("filter", "prioritize", "bind"):
        m_sum = re.search(r'vramd_http_request_duration_seconds_sum\{verb="%s"\} (\S+)' % verb, text)
        m_cnt = re.search(r'vramd_http_request_duration_seconds_count\{verb="%s"\} (\S+)' % verb, text)
        if m_sum and m_cnt and float(m_cnt.group(1)) > 0:
            out[verb] = {"count": int(float(m_cnt.group(1))),
                         "mean_ms": 1000 * float(m_sum.group(1)) / float(m_cnt.group(1))}
    # How the replica's ledger cache followed the writes (own_write: a reserve
    # or bound mark taken from its script's answer, nothing read).
    for kind in ("full", "incremental", "own_write"):
        m = re.search(r'vramd_ledger_snapshot_refreshes_total\{kind="%s"\} (\S+)' % kind, text)
        if m:
            out["refresh_" + kind] = {"count": int(float(m.group(1))), "mean_ms": 0.0}
    # Reconcile passes in the round, and the bind events that asked for none
    # (the ledger accounted them already).
    passes = sum(float(v) for v in re.findall(r'^vramd_reconcile_passes_total\{[^}]*\} (\S+)', text, re.M))
    m = re.search(r'^vramd_watch_binds_accounted_total(?:\{\})? (\S+)', text, re.M)
    out["reconcile_passes"] = {"count": int(passes), "mean_ms": 0.0}
    out["binds_accounted"] = {"count": int(float(m.group(1))) if m else 0, "mean_ms": 0.0}
    # Connections vramd refused (every one being answered) or closed to admit
    # new ones: each can cost kube-scheduler a failed call and a requeued pod.
    for reason in ("refused", "evicted"):
        n = sum(float(v) for v in re.findall(
            r'^vramd_http_connections_closed_total\{[^}]*reason="%s"[^}]*\} (\S+)' % reason, text, re.M))
        out["conns_" + reason] = {"count": int(n), "mean_ms": 0.0}
    return out


def api_requests(tb: Testbed) -> dict:
    """kube-apiserver's request counters: {"VERB resource[/subresource]": count}."""
    import re
    text = tb.api.request("GET", "/metrics", raw=True)
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line[:line.rindex("}")]))
        key = f"{labels.get('verb')} {labels.get('resource')}" + (
            f"/{labels['subresource']}" if labels.get("subresource") else "")
        out[key] = out.get(key, 0) + float(line.rsplit(" ", 1)[1])
    return out


def valkey_commands(tb: Testbed) -> dict:
    """Valkey's command counters (INFO commandstats): {"cmd": calls}, the
    microseconds Valkey spent in each as "usec cmd", and its network bytes as
    "bytes in" / "bytes out"."""
    import re
    if not getattr(tb, "redis_port", None):
        return {}
    text = tb.redis_command("INFO", "commandstats")
    out = {}
    for m in re.finditer(r"cmdstat_([\w|]+):calls=(\d+),usec=(\d+)", text):
        out[m.group(1)] = float(m.group(2))
        out["usec " + m.group(1)] = float(m.group(3))
    stats = tb.redis_command("INFO", "stats")
    for key, name in (("total_net_input_bytes", "bytes in"), ("total_net_output_bytes", "bytes out")):
        m = re.search(key + r":(\d+)", stats)
        if m:
            out[name] = float(m.group(1))
    return out


def valkey_slowlog_start(tb: Testbed):
    """Logs every command Valkey runs from here on (SLOWLOG at 0 us)."""
    tb.redis_command("CONFIG", "SET", "slowlog-max-len", "200000")
    tb.redis_command("CONFIG", "SET", "slowlog-log-slower-than", "0")
    tb.redis_command("SLOWLOG", "RESET")


def valkey_slowlog_scripts(tb: Testbed) -> dict:
    """Valkey's microseconds per script call since valkey_slowlog_start, by
    script (its SHA1's first 8 hex digits and its key count): calls, mean
    and total us; then logging stops."""
    entries = tb.redis_command("SLOWLOG", "GET", "-1")
    tb.redis_command("CONFIG", "SET", "slowlog-log-slower-than", "10000")
    by = {}
    for e in entries or []:
        args = [a.decode() if isinstance(a, bytes) else str(a) for a in e[3]]
        if not args or args[0].lower() not in ("evalsha", "eval"):
            continue
        key = f"{args[1][:8]}/{args[2] if len(args) > 2 else '?'} keys"
        c = by.setdefault(key, {"calls": 0, "us": 0})
        c["calls"] += 1
        c["us"] += int(e[2])
    for c in by.values():
        c["mean_us"] = round(c["us"] / c["calls"], 1)
    return dict(sorted(by.items(), key=lambda kv: -kv[1]["us"]))


def metric_sum(url: str, name: str) -> float:
    """The sum of a counter's series in vramd's /metrics."""
    import urllib.request
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def idle_valkey(tb: Testbed, vramd, seconds: float) -> dict:
    """Valkey's commands and bytes while vramd idles with the round's pods
    bound: its reconcile passes, node syncs and watches, no scheduling."""
    passes0 = metric_sum(vramd.url, "vramd_reconcile_passes_total")
    before = valkey_commands(tb)
    cpu0 = proc_cpu_seconds({"vramd": vramd.popen.pid}).get("vramd", 0.0)
    time.sleep(seconds)
    cpu = proc_cpu_seconds({"vramd": vramd.popen.pid}).get("vramd", 0.0) - cpu0
    after = valkey_commands(tb)
    passes = metric_sum(vramd.url, "vramd_reconcile_passes_total") - passes0
    d = api_delta(before, after)
    out = {"seconds": seconds, "reconcile_passes": passes, "valkey": d, "vramd_cpu_s": round(cpu, 2)}
    if passes > 0:
        cmds = sum(v for k, v in d.items() if not k.startswith(("bytes", "usec")) and k != "info")
        out["per_pass"] = {"commands": round(cmds / passes, 1),
                           "bytes": round((d.get("bytes in", 0) + d.get("bytes out", 0)) / passes)}
    print(f"  idle {seconds:.0f} s with the pods bound: {passes:.0f} reconcile passes, vramd {cpu:.2f} CPU-s; "
          f"Valkey {d}; per pass {out.get('per_pass')}", flush=True)
    return out


def api_delta(before: dict, after: dict) -> dict:
    d = {k: int(after[k] - before.get(k, 0)) for k in after}
    return {k: v for k, v in sorted(d.items(), key=lambda kv: -kv[1]) if v > 0}


def delete_namespace_pods(tb: Testbed, namespace: str):
    tb.api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods",
                   body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    tb.wait_for(lambda: not tb.list_pods(namespace, limit=1), timeout=120, interval=0.5,
                message=f"pods of {namespace} to be deleted")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--scheduler-qps", default="default")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--slow-round-s", type=float, default=10.0,
                    help="a vramd round whose first->last bind takes longer keeps vramd's and kube-scheduler's "
                         "logs in a directory under /tmp (printed), for finding what waited")
    ap.add_argument("--vramd-http-threads", type=int, default=0,
                    help="vramd's http_threads, and the echo's worker threads (default: vramd's own "
                         "default, 8, for both)")
    ap.add_argument("--vramd-args", default="",
                    help="more command-line flags for vramd, one string (e.g. '--kube-max-connections 64')")
    ap.add_argument("--echo-extender", action="store_true",
                    help="add a round with the do-nothing simdjson echo (bench/baseline_server) as "
                         "filter + prioritize extender: kube-scheduler's own cost of calling an extender")
    ap.add_argument("--bind-echo", action="store_true",
                    help="with --echo-extender, also a round where the echo binds too (it creates each pod's "
                         "Binding and nothing else): the least any extender that binds costs")
    ap.add_argument("--api-requests", action="store_true",
                    help="print kube-apiserver's requests (by verb and resource) and Valkey's commands for each round")
    ap.add_argument("--production-intervals", action="store_true",
                    help="vramd's default node sync and reconcile intervals (5 s) instead of the e2e tier's "
                         "0.5 s / 1 s (which cost more at thousands of nodes)")
    ap.add_argument("--idle", type=float, default=0,
                    help="after the first 'with' round, count Valkey's commands for this many seconds while vramd "
                         "idles with the pods bound (reconcile passes, node sync): the cost of a pass")
    ap.add_argument("--perf", help="record a perf profile of vramd (perf record $BENCH_PERF_ARGS, default -F 499 --call-graph "
                                   "dwarf,16384) during the first "
                                   "'with' round into this file")
    ap.add_argument("--rotate", action="store_true",
                    help="rotate the order of the configurations from one run to the next (run r starts with the "
                         "r-th), so that none is always last")
    ap.add_argument("--keep-vramd", action="store_true",
                    help="vramd rounds only (no 'without' or echo rounds), all served by one vramd started before "
                         "the first: its cost per pod once warm (by default each round starts a fresh vramd, whose "
                         "first burst also pays for its API connections, worker threads and buffers)")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    if a.keep_vramd and (a.echo_extender or a.bind_echo or a.idle):
        ap.error("--keep-vramd runs vramd rounds only (no --echo-extender, --bind-echo or --idle)")

    overrides = {}
    if a.scheduler_qps != "default":
        q = int(a.scheduler_qps)
        overrides = {"clientConnection": None}  # filled once the kubeconfig is known
    results = []
    with Testbed() as tb:
        print(f"testbed up in {tb.startup_seconds:.1f} s ({tb.dir}); {os.cpu_count()} CPUs, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        if overrides:
            kubeconfig = tb.scheduler_config()["clientConnection"]["kubeconfig"]
            overrides["clientConnection"] = {"kubeconfig": kubeconfig, "qps": q, "burst": 2 * q}
        names = [f"gpu-node-{i:05d}" for i in range(a.nodes)]
        t0 = time.monotonic()
        tb.create_nodes(names, labels={"nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81920"},
                        capacity={"vramd.io/vram": str(640 * GI), "pods": "250"})
        print(f"{a.nodes} nodes created in {time.monotonic() - t0:.1f} s", flush=True)
        vcfg = {"log": {"level": os.environ.get("BENCH_VRAMD_LOG", "warn")}}
        if a.vramd_http_threads:
            vcfg["http_threads"] = a.vramd_http_threads
        if a.production_intervals:
            vcfg.update({"node_sync_interval_ms": 5000, "reconcile_interval_ms": 5000})
        echo = None
        if a.echo_extender:
            bin_dir = os.environ.get("VRAMD_BIN_DIR", os.path.join(ROOT, "build", "bin"))
            eport = free_port()
            token = tb.write_file("echo-token", tb.admin_token + "\n")
            # Its bind verb (the "bind-echo" round only) creates the Binding
            # and does nothing else.
            echo = subprocess.Popen([os.path.join(bin_dir, "baseline_server"), "--parser", "simdjson",
                                     "--listen", f"127.0.0.1:{eport}", "--bind-api", tb.api_url,
                                     "--bind-token-file", token, "--bind-ca-file", tb.ca_file,
                                     "--threads", str(a.vramd_http_threads or 8)],
                                    stdout=subprocess.DEVNULL)
            echo.url = f"http://127.0.0.1:{eport}"
            tb.wait_for(lambda: _http_get_status(echo.url + "/healthz") == 200, 10,
                        message="the echo extender to listen")
        labels = (("without", "echo", "bind-echo", "with") if a.bind_echo else ("without", "echo", "with")) \
            if echo else ("without", "with")
        if a.keep_vramd:
            labels = ("with",)
        kept = None  # --keep-vramd: the one vramd of every round
        for rnd in range(a.rounds):
            # --rotate: run r starts at configuration r (mod their number), so
            # that each takes each place in a run (a later round may find the
            # API server and etcd slower, with more history behind them).
            k = rnd % len(labels) if a.rotate else 0
            for label in labels[k:] + labels[:k]:
                ns = f"{label}-{rnd}"
                # vramd runs only in its own round: in the other one it would
                # account the pods kube-scheduler binds alone (orphans re-added,
                # then freed on deletion, with node nudges) and load both rounds.
                vramd = None
                if label == "with":
                    vramd = kept or start_vramd(tb, config=vcfg, extra_args=shlex.split(a.vramd_args))
                    if kept is None:
                        wait_ledger_nodes(tb, vramd, names, timeout=60 + a.nodes / 50)
                    if a.keep_vramd:
                        kept = vramd
                extenders = [vramd.url + "/scheduler"] if vramd else []
                ext_overrides = None
                if label == "echo":  # filter + prioritize only: kube-scheduler binds itself
                    extenders, ext_overrides = [echo.url + "/scheduler"], {"bindVerb": ""}
                if label == "bind-echo":  # filter + prioritize + bind: the echo posts the Binding
                    extenders = [echo.url + "/scheduler"]
                before = verb_latency(vramd.url) if vramd else {}
                api_before = api_requests(tb) if a.api_requests else {}
                valkey_before = valkey_commands(tb) if a.api_requests else {}
                if a.api_requests and vramd:
                    valkey_slowlog_start(tb)
                extra = {"vramd": vramd.popen.pid} if vramd else ({"echo": echo.pid} if "echo" in label else {})
                r = run_round(tb, label, ns, a.pods, extenders, overrides, a.timeout, ext_overrides, extra,
                              a.perf if (a.perf and label == "with" and rnd == 0) else None)
                if vramd and r["first_to_last_s"] > a.slow_round_s:
                    keep = tempfile.mkdtemp(prefix=f"sched-slow-{ns}-", dir="/tmp")
                    for proc in (vramd, tb.procs.get("kube-scheduler")):
                        if proc is not None and os.path.exists(proc.log_path):
                            shutil.copy(proc.log_path, keep)
                    print(f"  SLOW ROUND: first->last {r['first_to_last_s']:.1f} s > {a.slow_round_s:g} s; "
                          f"vramd's and kube-scheduler's logs kept in {keep}", flush=True)
                if a.api_requests:
                    r["api_requests"] = api_delta(api_before, api_requests(tb))
                    print(f"  API requests (pod creation included): {r['api_requests']}", flush=True)
                    r["valkey_commands"] = api_delta(valkey_before, valkey_commands(tb))
                    print(f"  Valkey commands: {r['valkey_commands']}", flush=True)
                    if vramd:
                        r["valkey_scripts"] = valkey_slowlog_scripts(tb)
                        print(f"  Valkey scripts (SLOWLOG): {r['valkey_scripts']}", flush=True)
                if vramd:
                    after = verb_latency(vramd.url)
                    r["vramd_verbs"] = {}
                    for verb, v in after.items():
                        b = before.get(verb, {"count": 0, "mean_ms": 0})
                        n = v["count"] - b["count"]
                        if verb in ("filter", "prioritize", "bind"):
                            if n > 0:
                                mean = (v["mean_ms"] * v["count"] - b["mean_ms"] * b["count"]) / n
                                r["vramd_verbs"][verb] = {"count": n, "mean_ms": round(mean, 3)}
                        elif n > 0 or verb.startswith("conns_"):
                            r["vramd_verbs"][verb] = n
                    print(f"  vramd verbs: {r['vramd_verbs']}", flush=True)
                if vramd and a.idle and rnd == 0:
                    r["idle"] = idle_valkey(tb, vramd, a.idle)
                results.append(r)
                delete_namespace_pods(tb, ns)
                if vramd:  # the next round starts from an empty ledger
                    tb.wait_for(lambda: not any(ledger_view(vramd).values()), timeout=120, interval=0.5,
                                message="vramd to free the round's pods")
                    if not a.keep_vramd:
                        vramd.stop()
        if kept:
            kept.stop()
        if echo:
            echo.terminate()
            echo.wait(10)
    by = {k: [r["pods_per_s"] for r in results if r["label"] == k] for k in labels}
    med = {k: statistics.median(v) for k, v in by.items()}
    for base in ("echo", "bind-echo"):
        if base in by:  # each run's ratio against the round just before it, then the median
            per_run = [w / b for w, b in zip(by["with"], by[base])]
            print(f"vramd / {base}, per run: {', '.join(f'{x:.2f}' for x in per_run)}; "
                  f"median {statistics.median(per_run):.2f}")
    if a.keep_vramd:
        print(f"median pods/s with one vramd for every round: {med['with']:.1f}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"rounds": results, "median": med, "keep_vramd": True, "vramd_args": a.vramd_args}, f,
                          indent=1)
        return 0
    ratio = med["with"] / med["without"]
    if echo:
        print(f"median pods/s with the do-nothing echo extender: {med['echo']:.1f} "
              f"({med['echo'] / med['without']:.2f} x without); vramd / echo {med['with'] / med['echo']:.2f}")
    if "bind-echo" in med:
        print(f"median pods/s with the echo that binds: {med['bind-echo']:.1f}; "
              f"vramd / bind-echo {med['with'] / med['bind-echo']:.2f}")
    print(f"median pods/s: with vramd {med['with']:.1f}, without {med['without']:.1f}; ratio {ratio:.2f} "
          f"(target >= 0.7); scheduler qps {a.scheduler_qps}; vramd http_threads "
          f"{a.vramd_http_threads or 'default'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": results, "median": med, "ratio": ratio, "scheduler_qps": a.scheduler_qps,
                       "vramd_http_threads": a.vramd_http_threads or "default", "vramd_args": a.vramd_args,
                       "nodes": a.nodes, "pods": a.pods}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
