#!/usr/bin/env python3
"""Standalone bind over HTTP (issue 6, item 3): filter + bind pairs against a
vramd started with --no-kube, from N concurrent clients for a fixed time.

Standalone vramd binds only pods a filter call has shown it (it keeps their
request), so each pair is: POST /scheduler/filter with a fresh pod UID and a
few candidate names, then POST /scheduler/bind of that pod to the first node
the filter kept. Every bind writes the ledger (reserve, then mark bound), so
the next filter call finds the epoch moved and reloads the whole snapshot:
the filter latency here is the cost of that reload at the ledger's size.

    python3 bench/bind_http.py --url http://127.0.0.1:PORT --body filter.json
        [--nodes N] [--clients 8] [--seconds 10] [--names 4]

--nodes: how many gpu-node-NNNNN nodes the ledger has (candidates are drawn
from them). Prints pairs/s and p50/p99 of filter and bind; standard library.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse
import uuid


def pct(values, p):
    if not values:
        return 0.0
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--body", required=True, help="a filter request (its Pod is reused)")
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--names", type=int, default=4)
    a = ap.parse_args()

    base = json.load(open(a.body))
    u = urllib.parse.urlsplit(a.url)
    lock = threading.Lock()
    filt, bind, errors = [], [], []
    stop_at = time.monotonic() + a.seconds

    def client(c: int):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        k = 0
        while time.monotonic() < stop_at:
            uid = str(uuid.uuid4())
            name = f"bench-{c}-{k}"
            first = (c * 7919 + k * 31) % a.nodes
            body = dict(base)
            body["Pod"] = json.loads(json.dumps(base["Pod"]))
            body["Pod"]["metadata"].update({"uid": uid, "name": name, "namespace": "bench"})
            body["NodeNames"] = [f"gpu-node-{(first + i) % a.nodes:05d}" for i in range(a.names)]
            t0 = time.monotonic()
            conn.request("POST", "/scheduler/filter", json.dumps(body), {"Content-Type": "application/json"})
            r = json.loads(conn.getresponse().read())
            t1 = time.monotonic()
            kept = r.get("NodeNames") or []
            if not kept:
                with lock:
                    errors.append("no node kept: " + json.dumps(r)[:200])
                k += 1
                continue
            conn.request("POST", "/scheduler/bind",
                         json.dumps({"PodName": name, "PodNamespace": "bench", "PodUID": uid, "Node": kept[0]}),
                         {"Content-Type": "application/json"})
            b = json.loads(conn.getresponse().read())
            t2 = time.monotonic()
            with lock:
                filt.append(t1 - t0)
                bind.append(t2 - t1)
                if b.get("Error"):
                    errors.append(b["Error"])
            k += 1
        conn.close()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(a.clients)]
    t = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.monotonic() - t
    ms = lambda x: x * 1000  # noqa: E731
    print(f"bind_http: {a.clients} clients, {elapsed:.1f} s, ledger of {a.nodes} nodes: "
          f"{len(bind)} filter+bind pairs ({len(bind) / elapsed:.0f}/s), {len(errors)} errors")
    for label, v in (("filter (after binds)", filt), ("bind", bind)):
        if v:
            print(f"  {label:22s} p50 {ms(pct(v, 50)):7.2f} ms  p99 {ms(pct(v, 99)):7.2f} ms  "
                  f"mean {ms(statistics.mean(v)):7.2f} ms")
    for e in errors[:3]:
        print("  error:", e)
    return 0 if not errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
