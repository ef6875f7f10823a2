"""End to end (issue 16): tenants' VRAM queues on the real testbed.

Real kube-apiserver + kube-scheduler 1.20 + etcd, the chart's VramQueue CRD,
a real redis-server and vramd. There is no kubelet: a pod evicted through
the Eviction API keeps its object (deletionTimestamp set, the
phantom-capacity rule holds its VRAM) until the test, playing the kubelet,
deletes it with grace 0.

Two nodes with one 16Gi GPU each (32Gi). Queue team-a deserves 16Gi, team-b
8Gi, equal weights. Team B borrows the idle VRAM while team A is quiet (four
8Gi pods: all of it); team A then submits two 8Gi pods. Fair shares become
16Gi each, so vramd reclaims two of team B's pods (its youngest) and team A's
pods bind. Team B runs as a ReplicaSet: the test, playing its controller,
creates a replacement of each evicted pod right after vramd freed the
victim's VRAM (issue 32): the room is held for team A's pod, so the
replacements stay pending and are never evicted in turn (watched two minutes; with
eviction.hold_ms 0 both replacements bind and are evicted next). Throughout the run one sampler lists the API server's pods every
50 ms and checks that no GPU is over-committed where a kubelet would see it:
the VRAM pods bound to a node (terminating ones included, until they are
gone) never promise a GPU, by their vramd.io/gpus and vramd.io/vram-per-gpu
annotations, more than its capacity (the node's nvidia.com/gpu.memory
label); another checks vramd's own figures (the ledger never over-committed,
team B never below its fair share). Broken queue
objects (a cycle, a namespace another queue already serves, a child above
its parent) get a clear condition and change nothing else. Then (issue 32)
a third node and one more queue: two Deployment pods of a namespace no queue
names are never reclaim victims, however entitled the waiting pod is.
"""

import json
import os
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (BIN_DIR, GI, QUEUES_PATH, SharedTestbed, apply_queue_crd, create_queue, get_json,  # noqa: E402
                    kubectl, ledger_nodes, metric_value, queue_status, start_vramd)
from testbed import VRAM_RESOURCE, clean_env, parse_rfc3339  # noqa: E402

VRAMCTL = os.path.join(BIN_DIR, "vramctl")
MI = 1 << 20
RECLAIM_WATCH_S = 120  # how long the replacements must stay pending and reclaim idle
# How long team A may wait for its VRAM once it submits (queue pass every
# 500 ms, eviction, the kubelet's part played at once, kube-scheduler's retry).
RECLAIM_BOUND_S = 60


def gfd(pool):
    return {"nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "16384", "pool": pool}


def gpu_capacities(tb):
    """(node, GPU index) -> bytes, from the nodes' labels as gfd() writes them
    (nvidia.com/gpu.count GPUs of nvidia.com/gpu.memory MiB each)."""
    out = {}
    for n in tb.api.get("/api/v1/nodes")["items"]:
        labels = n["metadata"].get("labels") or {}
        if "nvidia.com/gpu.memory" in labels:
            for i in range(int(labels.get("nvidia.com/gpu.count", "1"))):
                out[(n["metadata"]["name"], i)] = int(labels["nvidia.com/gpu.memory"]) * MI
    return out


def bound_vram(pods, capacity):
    """What the API server's pods hold: (node, GPU index) -> bytes, summed
    over the VRAM pods bound there (spec.nodeName set) and not finished (a
    terminating pod's processes may still run: it counts until it is gone),
    from their vramd.io/gpus and vramd.io/vram-per-gpu annotations; and the
    problems seen (a bound VRAM pod without them, a GPU the node lacks)."""
    held, problems = {}, []
    for p in pods:
        node = p["spec"].get("nodeName")
        wants = any(VRAM_RESOURCE in (c.get("resources") or {}).get("limits", {}) for c in p["spec"]["containers"])
        if not node or not wants or p.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        name = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        ann = p["metadata"].get("annotations") or {}
        if "vramd.io/gpus" not in ann or "vramd.io/vram-per-gpu" not in ann:
            problems.append(f"{name} bound to {node} without vramd.io/gpus and vramd.io/vram-per-gpu: {ann}")
            continue
        for g in ann["vramd.io/gpus"].split(","):
            gpu = (node, int(g))
            if gpu not in capacity:
                problems.append(f"{name} bound to GPU {g} of {node}, which has no such GPU")
                continue
            held[gpu] = held.get(gpu, 0) + int(ann["vramd.io/vram-per-gpu"])
    return held, problems


class Tenants(SharedTestbed):
    @classmethod
    def prepare(cls, tb):
        apply_queue_crd(tb)
        for ns in ("team-a", "team-b", "team-c"):
            tb.create_namespace(ns)
        create_queue(tb, "team-a", "16Gi", namespaces=["team-a"])
        create_queue(tb, "team-b", "8Gi", namespaces=["team-b"])
        create_queue(tb, "team-c", "0", namespaces=["team-c"], limit="4Gi")
        for name in ("q-1", "q-2"):
            tb.create_node(name, labels=gfd("q"))
        # Reclaim in enforce with no minimum runtime (the defaults are dry-run
        # and 5 minutes: the pods here are seconds old).
        config = {"queues": {"interval_ms": 500, "reclaim_mode": "enforce", "reclaim_cooldown_ms": 3000,
                             "min_runtime_ms": 0},
                  "idle": {"mode": "off"}, "watchdog": {"mode": "off"}}
        cls.vramd = start_vramd(tb, config=config)
        tb.wait_for(lambda: {"q-1", "q-2"} <= set(ledger_nodes(cls.vramd)), 20, message="vramd to learn the nodes")
        tb.start_scheduler([cls.vramd.url + "/scheduler"])

    def queues(self):
        return {q["name"]: q for q in get_json(self.vramd.url + "/v1/queues")["queues"]}

    def status(self, name):
        return queue_status(self.tb, name)

    def create(self, ns, name, vram, pool="q", owner=None):
        """A pod of `ns` on pool `pool`; with `owner` (a ReplicaSet object) as
        its controller, as a Deployment's pods are (nothing here runs the
        controller: the reference is what vramd reads)."""
        meta = {}
        if owner is not None:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "controller": True,
                                        "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]
        pod = self.tb.pod_manifest(name, vram, namespace=ns, extra_spec={"nodeSelector": {"pool": pool}})
        pod["metadata"].update(meta)
        self.tb.api.post(f"/api/v1/namespaces/{ns}/pods", pod)

    def replicaset(self, ns, name):
        """A ReplicaSet object with no replicas (no controller-manager here)."""
        return self.tb.api.post(f"/apis/apps/v1/namespaces/{ns}/replicasets", {
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "main", "image": "none"}]}}}})

    def test_1_broken_queue_objects_get_a_condition_and_change_nothing_else(self):
        tb = self.tb
        # Each passes the CRD's schema; vramd's own checks refuse them.
        create_queue(tb, "loop-a", "1Gi", parent="loop-b")
        create_queue(tb, "loop-b", "1Gi", parent="loop-a")
        # The newer queue naming a namespace is the broken one; creationTimestamp
        # has whole seconds and a tie goes by name ("steals-team-a" first), so
        # it is created once the API server's clock is past team-a's second.
        team_a = parse_rfc3339(tb.api.get(f"{QUEUES_PATH}/team-a")["metadata"]["creationTimestamp"])
        tb.wait_for(lambda: tb.api.server_time() > team_a, 5, interval=0.05,
                    message="the API server's clock past team-a's creation second")
        create_queue(tb, "steals-team-a", "1Gi", namespaces=["team-a"])
        create_queue(tb, "dept", "2Gi")
        create_queue(tb, "greedy-child", "4Gi", namespaces=["greedy"], parent="dept")

        def condition(name):
            conds = self.status(name).get("conditions", [])
            return next((c for c in conds if c["type"] == "Valid"), None)
        for name, reason in (("loop-a", "Cycle"), ("loop-b", "Cycle"), ("steals-team-a", "NamespaceConflict"),
                             ("greedy-child", "ExceedsParent")):
            c = tb.wait_for(lambda n=name: condition(n), 30, message=f"{name}'s Valid condition")
            self.assertEqual(c["status"], "False", c)
            self.assertEqual(c["reason"], reason, c)
            self.assertTrue(c["message"], c)
            print(f"\n{name}: {c['reason']}: {c['message']}")
        for name in ("team-a", "team-b", "team-c", "dept"):
            c = tb.wait_for(lambda n=name: condition(n), 30, message=f"{name}'s Valid condition")
            self.assertEqual(c["status"], "True", (name, c))
        # team-a keeps its namespace: the newer queue naming it is the broken one.
        self.assertEqual(self.queues()["team-a"]["deserved_bytes"], 16 * GI)
        self.assertEqual(metric_value(self.vramd, "vramd_queue_valid", {"queue": "loop-a"}), 0)
        self.assertEqual(metric_value(self.vramd, "vramd_queue_valid", {"queue": "team-a"}), 1)

    def test_2_a_pod_above_its_queue_limit_is_refused_with_the_numbers(self):
        tb = self.tb
        self.create("team-c", "big", "8Gi")
        want = "queue team-c at its limit"
        tb.wait_for(lambda: any(want in m for m in tb.pod_events("big", namespace="team-c",
                                                               reason="FailedScheduling")), 30,
                    message="a FailedScheduling event naming team-c's limit")
        print("\nFailedScheduling event:", tb.pod_events("big", namespace="team-c", reason="FailedScheduling")[-1])
        self.assertIsNone(tb.pod_node("big", namespace="team-c"))
        tb.delete_pod("big", grace=0, namespace="team-c")

    def test_3_team_b_borrows_then_team_a_reclaims_its_fair_share(self):
        tb = self.tb
        rs = self.replicaset("team-b", "b")  # team B's pods have a controller: reclaim may take them
        for i in range(1, 5):
            if i > 1:
                # Creation times apart on both clocks: the API server's
                # creationTimestamp has whole seconds, so the next pod is
                # created once that clock has passed the previous pod's second.
                prev = parse_rfc3339(tb.get_pod(f"b-{i - 1}", namespace="team-b")["metadata"]["creationTimestamp"])
                tb.wait_for(lambda p=prev: tb.api.server_time() > p, 5, interval=0.05,
                            message=f"the API server's clock past b-{i - 1}'s creation second")
            self.create("team-b", f"b-{i}", "8Gi", owner=rs)
            tb.wait_pod_bound(f"b-{i}", namespace="team-b")  # one at a time: b-4 is the youngest
        created = [parse_rfc3339(tb.get_pod(f"b-{i}", namespace="team-b")["metadata"]["creationTimestamp"])
                   for i in range(1, 5)]
        self.assertEqual(created, sorted(set(created)), "team B's creationTimestamps, b-1 to b-4")
        reserved = {p["name"]: p["created_ms"] for n in ledger_nodes(self.vramd).values() for p in n["pods"]}
        times = [reserved[f"b-{i}"] for i in range(1, 5)]
        self.assertEqual(times, sorted(set(times)), f"the ledger's reservation times, b-1 to b-4: {reserved}")
        qs = self.queues()
        self.assertEqual(qs["team-b"]["allocated_bytes"], 32 * GI)
        # Team A is quiet: team B may hold all of it (its fair share follows demand).
        self.assertEqual(qs["team-b"]["fair_share_bytes"], 32 * GI)

        violations, samples, stop, last, below = [], [0], threading.Event(), {}, [0]
        api_violations, api_samples, most = [], [0], {}
        capacity = gpu_capacities(tb)
        self.assertEqual(set(capacity), {("q-1", 0), ("q-2", 0)})

        def sample_api_server():
            # The promise, as a kubelet acts on it: the pods bound to each node
            # (one consistent list), each holding its vramd.io/vram-per-gpu on
            # every GPU its vramd.io/gpus names, never above the GPU's capacity.
            while not stop.is_set():
                try:
                    pods = tb.api.get("/api/v1/pods")["items"]
                except Exception:  # noqa: BLE001 - a failed read is no sample
                    time.sleep(0.05)
                    continue
                api_samples[0] += 1
                held, problems = bound_vram(pods, capacity)
                api_violations.extend(problems)
                for gpu, used in held.items():
                    most[gpu] = max(most.get(gpu, 0), used)
                    if used > capacity[gpu]:
                        api_violations.append(f"GPU {gpu[1]} of {gpu[0]} promised {used} bytes by its bound pods, "
                                              f"capacity {capacity[gpu]}: {sorted(held.items())}")
                time.sleep(0.05)

        def sample():
            # vramd's own figures: the ledger's allocation and the queues' shares.
            while not stop.is_set():
                try:
                    nodes = ledger_nodes(self.vramd)
                    queues = self.queues()
                except Exception:  # noqa: BLE001 - a failed read is no sample
                    time.sleep(0.05)
                    continue
                samples[0] += 1
                for name, n in nodes.items():
                    for g in n["gpus"]:
                        if g["allocated_bytes"] > g["capacity_bytes"]:
                            violations.append(f"GPU {g['index']} of {name} over-committed: {g}")
                # A queue that lost VRAM (evictions) must still hold its fair
                # share; one below it only because it waits is entitled, not taken from.
                for name, q in queues.items():
                    before = last.get(name, q["allocated_bytes"])
                    if q["allocated_bytes"] < before and q["allocated_bytes"] < q["fair_share_bytes"]:
                        violations.append(f"{name} taken below its fair share: {before} -> {q}")
                    last[name] = q["allocated_bytes"]
                # Team B held below its fair share: a state, so it must show in
                # three samples in a row (0.15 s or more). The view is computed
                # from the replica's cached ledger and the refusal log, which
                # change a moment apart around a bind (a sample can count a
                # pending pod of team A in neither, and team A's demand then
                # looks smaller; seen once in 2,300 samples under load); the
                # evictions that could take team B below it are checked above
                # on every sample.
                b = queues["team-b"]
                below[0] = below[0] + 1 if b["allocated_bytes"] < b["fair_share_bytes"] else 0
                if below[0] == 3:
                    violations.append(f"team-b below its fair share for 3 samples: {b}")
                time.sleep(0.05)

        replacements = []

        def in_ledger(name):
            return any(p["name"] == name for n in ledger_nodes(self.vramd).values() for p in n["pods"])

        def play_kubelet():
            # The kubelet ends an evicted pod at once; its ReplicaSet (played
            # here too: no controller-manager) creates a replacement, here
            # at the worst moment: right after vramd freed the victim's VRAM,
            # when the new pod goes straight to kube-scheduler while team A's
            # pod waits parked. Issue 32: the room was made for team A: the
            # replacement must not take it (the hold), and reclaim must not
            # evict it next.
            while not stop.is_set():
                for p in tb.list_pods(namespace="team-b"):
                    if "deletionTimestamp" in p["metadata"]:
                        name = p["metadata"]["name"]
                        tb.delete_pod(name, grace=0, namespace="team-b")
                        if not name.endswith("-r"):
                            tb.wait_for(lambda n=name: not in_ledger(n), 20, interval=0.05,
                                        message=f"vramd to free {name}'s VRAM")
                            self.create("team-b", name + "-r", "8Gi", owner=rs)
                            replacements.append(name + "-r")
                time.sleep(0.1)

        threads = [threading.Thread(target=f, daemon=True) for f in (sample, sample_api_server, play_kubelet)]
        for t in threads:
            t.start()
        try:
            start = time.monotonic()
            self.create("team-a", "a-1", "8Gi")
            self.create("team-a", "a-2", "8Gi")
            for name in ("a-1", "a-2"):
                try:
                    tb.wait_pod_bound(name, timeout=RECLAIM_BOUND_S, namespace="team-a")
                except Exception:
                    print("ledger:", {n: [(p["name"], p["state"]) for p in node["pods"]]
                                      for n, node in ledger_nodes(self.vramd).items()})
                    print("pods:", [(p["metadata"]["namespace"], p["metadata"]["name"], p["spec"].get("nodeName"))
                                    for ns in ("team-a", "team-b") for p in tb.list_pods(namespace=ns)])
                    raise
            took = time.monotonic() - start
            # The replacements stay pending and nothing more is reclaimed:
            # watched for two minutes, as the issue asks (reclaim's cooldown
            # here is 3 s, its pass 0.5 s: 40 cooldowns).
            watch_until = time.monotonic() + RECLAIM_WATCH_S
            while time.monotonic() < watch_until:
                taken = {}
                for r in replacements:
                    pod = tb.get_pod(r, namespace="team-b")
                    if pod is None or pod["spec"].get("nodeName"):
                        taken[r] = pod["spec"]["nodeName"] if pod else "bound, then evicted and gone"
                self.assertEqual(taken, {}, "a replacement took the room made for team A")
                self.assertEqual(metric_value(self.vramd, "vramd_queue_reclaims_total",
                                              {"kind": "reclaim", "mode": "enforce"}), 2)
                time.sleep(0.5)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=5)
        print(f"\nteam A's two pods bound {took:.1f} s after submission; {samples[0]} samples of vramd's figures, "
              f"{len(violations)} violations; {api_samples[0]} samples of the API server's bound pods, "
              f"{len(api_violations)} violations, most promised per GPU {sorted(most.items())}")
        self.assertGreater(api_samples[0], 20)
        self.assertEqual(api_violations, [])
        # The samples saw the GPUs full (the check had something to check).
        self.assertEqual(most, capacity)
        self.assertGreater(samples[0], 20)
        self.assertEqual(violations, [])
        # Team B's two youngest pods went; the two oldest run on; their
        # replacements wait (never bound, never evicted).
        self.assertEqual(sorted(replacements), ["b-3-r", "b-4-r"])
        for r in replacements:
            self.assertNotIn("nodeName", tb.get_pod(r, namespace="team-b")["spec"], r)
            self.assertEqual(tb.pod_events(r, namespace="team-b", reason="VramdEvicted"), [], r)
            tb.delete_pod(r, grace=0, namespace="team-b")
        left = sorted(p["metadata"]["name"] for p in tb.list_pods(namespace="team-b")
                      if p["metadata"]["name"] not in replacements)
        placed = {n: sorted(p["name"] for p in node["pods"]) for n, node in ledger_nodes(self.vramd).items()}
        events = {n: tb.pod_events(n, namespace="team-b", reason="VramdEvicted") for n in ("b-1", "b-2", "b-3", "b-4")}
        self.assertEqual(left, ["b-1", "b-2"], (placed, events))
        # The figures settle once the pod watch shows a-2 bound (until then
        # its refusal still counts as team A's pending demand).
        want = {"team-a": (16 * GI, 16 * GI), "team-b": (16 * GI, 16 * GI)}
        tb.wait_for(lambda: {n: (q["allocated_bytes"], q["fair_share_bytes"]) for n, q in self.queues().items()
                             if n in want} == want, 10, message=f"/v1/queues to show {want}")
        evicted = [e for n in ("b-3", "b-4") for e in tb.pod_events(n, namespace="team-b", reason="VramdEvicted")]
        self.assertEqual(len(evicted), 2, evicted)
        print("VramdEvicted event:", evicted[-1])
        self.assertTrue(all("evicted (reclaim)" in m and "team-a" in m for m in evicted), evicted)
        made_room = [e for n in ("a-1", "a-2") for e in tb.pod_events(n, namespace="team-a",
                                                                      reason="VramdMadeRoom")]
        self.assertEqual(len(made_room), 2, made_room)
        self.assertEqual(metric_value(self.vramd, "vramd_queue_reclaims_total",
                                      {"kind": "reclaim", "mode": "enforce"}), 2)
        # The objects' status, as `kubectl get vq` shows it.
        tb.wait_for(lambda: (self.status("team-a").get("allocated"), self.status("team-a").get("fairShare"))
                    == ("16Gi", "16Gi"), 10, message="team-a's status: 16Gi allocated, fair share 16Gi")
        table = kubectl(tb, "get", "vq")
        print(table)
        row = next(line.split() for line in table.splitlines() if line.startswith("team-a "))
        # DESERVED, (no LIMIT: an empty cell), ALLOCATED, FAIR SHARE, PENDING, VALID
        self.assertEqual(row[1:6], ["16Gi", "16Gi", "16Gi", "0", "True"], table)
        out = subprocess.run([VRAMCTL, "--server", self.vramd.url, "queues"], capture_output=True, text=True,
                             timeout=10, env=clean_env())
        self.assertEqual(out.returncode, 0, out.stderr)
        print(out.stdout)
        row = next(line.split() for line in out.stdout.splitlines() if line.startswith("team-a "))
        self.assertIn("16Gi", row)
        as_json = json.loads(subprocess.run([VRAMCTL, "--server", self.vramd.url, "queues", "-o", "json"],
                                            capture_output=True, text=True, timeout=10, env=clean_env()).stdout)
        self.assertEqual({q["name"] for q in as_json["queues"]} >= {"team-a", "team-b", "team-c"}, True)


    def test_4_one_queue_never_makes_unqueued_pods_victims(self):
        """Issue 32: an admin creates one research queue. Namespace `web` is
        in no queue; its two priority-0 Deployment pods (owned by a
        ReplicaSet, preemptible by priority) hold the pool's GPU. The research
        pod is entitled (fair share 8Gi) and waits; reclaim passes run and
        plan nothing: the web pods are never victims (before: one was
        evicted, in the default enforce mode)."""
        tb = self.tb
        tb.create_node("u-1", labels=gfd("u"))  # 48Gi in all from here on
        tb.wait_for(lambda: "u-1" in ledger_nodes(self.vramd), 20, message="vramd to learn u-1")
        tb.create_namespace("web")
        tb.create_namespace("research")
        rs = self.replicaset("web", "web")
        for name in ("web-1", "web-2"):
            self.create("web", name, "8Gi", pool="u", owner=rs)
            tb.wait_pod_bound(name, namespace="web")
        create_queue(tb, "research", "16Gi", namespaces=["research"])
        tb.wait_for(lambda: "research" in self.queues(), 20, message="vramd to learn the research queue")
        reclaims_before = metric_value(self.vramd, "vramd_queue_reclaims_total",
                                       {"kind": "reclaim", "mode": "enforce"}) or 0
        self.create("research", "r-1", "8Gi", pool="u")
        # The leader sees it waiting (its queue's pending figure) and is entitled to 8Gi...
        tb.wait_for(lambda: metric_value(self.vramd, "vramd_queue_pending_bytes", {"queue": "research"}) == 8 * GI,
                    30, message="research's pod counted as waiting")
        self.assertGreaterEqual(self.queues()["research"]["fair_share_bytes"], 8 * GI, self.queues()["research"])
        # ...and runs reclaim passes over it that find no plan.
        passes = metric_value(self.vramd, "vramd_queue_reclaim_passes_total", {}) or 0
        tb.wait_for(lambda: (metric_value(self.vramd, "vramd_queue_reclaim_passes_total", {}) or 0) >= passes + 4,
                    30, message="four more reclaim passes")
        self.assertGreaterEqual(metric_value(self.vramd, "vramd_queue_pods_without_reclaim_plan", {}), 1)
        for name in ("web-1", "web-2"):
            pod = tb.get_pod(name, namespace="web")
            self.assertNotIn("deletionTimestamp", pod["metadata"], f"{name} was evicted")
            for reason in ("VramdEvicted", "VramdWouldEvict"):
                self.assertEqual(tb.pod_events(name, namespace="web", reason=reason), [], (name, reason))
        self.assertIsNone(tb.pod_node("r-1", namespace="research"))
        self.assertEqual(metric_value(self.vramd, "vramd_queue_reclaims_total",
                                      {"kind": "reclaim", "mode": "enforce"}) or 0, reclaims_before)
        tb.delete_pod("r-1", grace=0, namespace="research")

    def test_5_a_gang_goes_whole_or_not_at_all(self):
        """Issue 32: queue `train` holds a GPU with a three-pod gang (a Job's
        ranks, labelled batch.kubernetes.io/job-name) and one single pod of
        the same size, the single pod the oldest. An entitled pod of queue
        `infer` waits for one pod's room: reclaim evicts the single pod (it
        would take the youngest, a rank, if gangs were not kept whole) and
        never one rank of the gang."""
        tb = self.tb
        tb.create_node("g-1", labels=gfd("g"))
        tb.wait_for(lambda: "g-1" in ledger_nodes(self.vramd), 20, message="vramd to learn g-1")
        for ns in ("train", "infer"):
            tb.create_namespace(ns)
        create_queue(tb, "train", "0", namespaces=["train"])
        create_queue(tb, "infer", "8Gi", namespaces=["infer"])
        tb.wait_for(lambda: {"train", "infer"} <= set(self.queues()), 20, message="vramd to learn the queues")
        rs = self.replicaset("train", "single")
        self.create("train", "single", "4Gi", pool="g", owner=rs)
        tb.wait_pod_bound("single", namespace="train")
        job = {"apiVersion": "batch/v1", "kind": "Job", "controller": True, "name": "ddp",
               "uid": "00000000-0000-4000-8000-00000000dd00"}
        for rank in range(3):
            prev = parse_rfc3339(tb.get_pod("single" if rank == 0 else f"ddp-{rank - 1}",
                                            namespace="train")["metadata"]["creationTimestamp"])
            tb.wait_for(lambda p=prev: tb.api.server_time() > p, 5, interval=0.05,
                        message="the API server's clock past the previous pod's creation second")
            pod = tb.pod_manifest(f"ddp-{rank}", "4Gi", namespace="train", extra_spec={"nodeSelector": {"pool": "g"}},
                                  labels={"batch.kubernetes.io/job-name": "ddp"})
            pod["metadata"]["ownerReferences"] = [job]
            tb.api.post("/api/v1/namespaces/train/pods", pod)
            tb.wait_pod_bound(f"ddp-{rank}", namespace="train")
        self.create("infer", "serve", "4Gi", pool="g")
        tb.wait_for(lambda: any("deletionTimestamp" in p["metadata"] for p in tb.list_pods(namespace="train")), 30,
                    message="reclaim to evict one of train's pods for infer/serve")
        going = sorted(p["metadata"]["name"] for p in tb.list_pods(namespace="train")
                       if "deletionTimestamp" in p["metadata"])
        self.assertEqual(going, ["single"], "reclaim took a rank of the gang")
        tb.delete_pod("single", grace=0, namespace="train")
        tb.wait_pod_bound("serve", timeout=RECLAIM_BOUND_S, namespace="infer")
        for rank in range(3):
            pod = tb.get_pod(f"ddp-{rank}", namespace="train")
            self.assertNotIn("deletionTimestamp", pod["metadata"], f"ddp-{rank}")
            self.assertEqual(tb.pod_events(f"ddp-{rank}", namespace="train", reason="VramdEvicted"), [])


if __name__ == "__main__":
    import unittest
    unittest.main(verbosity=2)
