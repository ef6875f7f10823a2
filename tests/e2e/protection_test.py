"""End to end (issue 15): runtime protection on the real testbed.

Real kube-apiserver + kube-scheduler 1.20 + etcd, a real redis-server and
vramd. Usage is fed as vramd-agent feeds it: version-2 reports on
PUT /v1/nodes/{node}/usage with the pods' real UIDs, repeated every
AGENT_INTERVAL_S until the next one (the watchdog acts only on pressure seen
in watchdog.pressure_reports consecutive reports, 3 by default). There is no kubelet: a
pod evicted through the Eviction API keeps its object (deletionTimestamp set,
the phantom-capacity rule holds its VRAM) until the test, playing the
kubelet, deletes it with grace 0.

- DryRun: the burstable placement rule (a pod refused on a GPU whose
  overshoot no designated victim covers, placed on the one where a victim
  does), the watchdog in dry-run (an Event on the runaway tenant, nothing
  evicted), and bad input (a peak below the request, a negative idle TTL, a
  victim class list that names nothing).
- Failover: a new leader one second after the old one's watchdog eviction
  keeps its cooldown (the budget lives in Valkey).
- Enforce: the runaway tenant is evicted and its VRAM freed only when the
  pod is gone; an agent that falls silent after two reports of a runaway
  gets no action on its last report, seen again pass after pass; a PodDisruptionBudget blocks an eviction (retried, counted);
  an idle model is evicted so that a pending one binds.
"""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import GI, VRAMD, SharedTestbed, ledger_nodes, metric_value, start_vramd  # noqa: E402
from testbed import clean_env  # noqa: E402

MI = 1 << 20
TOKEN = "e2e-protection-token-0123456789abcdef"
AGENT_INTERVAL_S = 0.3  # how often the tests' stand-in agent repeats a node's last report


def gfd(mib, pool):
    return {"nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": str(mib), "pool": pool}


def on_pool(pool):
    return {"nodeSelector": {"pool": pool}}


class Protected(SharedTestbed):
    MODE = "dry-run"

    @classmethod
    def start(cls, tb, nodes, extra_config=None):
        for name, (mib, pool) in nodes.items():
            tb.create_node(name, labels=gfd(mib, pool))
        token = tb.write_file("api-token", TOKEN + "\n")
        config = {"watchdog": {"mode": cls.MODE, "floor": "1.5Gi", "interval_ms": 500, "cooldown_ms": 300000},
                  "idle": {"mode": cls.MODE, "policy": "on-demand"},
                  "usage_max_age_ms": 600000}
        config.update(extra_config or {})
        cls._agents, cls._reports = {}, {}
        cls._agent_lock, cls._agent_stop = threading.Lock(), threading.Event()
        cls.vramd = start_vramd(tb, config=config, extra_args=["--api-token-file", token])
        tb.wait_for(lambda: set(nodes) <= set(ledger_nodes(cls.vramd)), 20, message="vramd to learn the nodes")
        tb.start_scheduler([cls.vramd.url + "/scheduler"])

    @classmethod
    def tearDownClass(cls):
        cls._agent_stop.set()
        for t in cls._agents.values():
            t.join(5)
        super().tearDownClass()

    def push(self, node, body):
        req = urllib.request.Request(f"{self.vramd.url}/v1/nodes/{node}/usage", data=json.dumps(body).encode(),
                                     method="PUT", headers={"Authorization": f"Bearer {TOKEN}",
                                                            "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status

    def report(self, node, total, pods, active=()):
        """Pushes a version-2 usage report (`pods` maps pod name -> bytes used;
        the pods named in `active` ran work since the last report, as the
        agent's utilization signal says) now, and from then on every
        AGENT_INTERVAL_S as a node's agent does, until the next report() for
        the node replaces it: the watchdog acts only on pressure seen in
        consecutive reports (watchdog.pressure_reports)."""
        uids = [{"uid": self.tb.get_pod(name)["metadata"]["uid"], "used_bytes": used,
                 **({"active": True} if name in active else {})} for name, used in pods.items()]
        body = {"version": 2, "agent": "e2e", "source": "nvml",
                "gpus": [{"index": 0, "uuid": f"GPU-{node}", "total_bytes": total,
                          "used_bytes": sum(pods.values()), "outside_pods_bytes": 0, "pods": uids}]}
        cls = type(self)
        with cls._agent_lock:
            cls._reports[node] = body
            self.assertEqual(self.push(node, body), 200)
            if node not in cls._agents:
                t = threading.Thread(target=self._agent_loop, args=(node,), daemon=True)
                cls._agents[node] = t
                t.start()

    def _agent_loop(self, node):
        cls = type(self)
        while not cls._agent_stop.wait(AGENT_INTERVAL_S):
            with cls._agent_lock:
                try:
                    self.push(node, cls._reports[node])
                except OSError:
                    pass  # vramd restarting or gone at teardown: the next push tells

    def passes_later(self, n):
        """Waits for n more reconcile passes (each runs the watchdog and idle eviction)."""
        start = metric_value(self.vramd, "vramd_reconcile_passes_total", {"result": "ok"})
        self.tb.wait_for(lambda: metric_value(self.vramd, "vramd_reconcile_passes_total",
                                              {"result": "ok"}) >= start + n, 30,
                         message=f"{n} more reconcile (and watchdog) passes")

    def events(self, pod, reason):
        return self.tb.pod_events(pod, reason=reason)

    def entry(self, node, pod):
        return next((p for p in ledger_nodes(self.vramd)[node]["pods"] if p["name"] == pod), None)

    def bind_all(self, pool, pods):
        for name, vram, kwargs in pods:
            self.tb.create_pod(name, vram, extra_spec=on_pool(pool), **kwargs)
        for name, _, _ in pods:
            self.tb.wait_pod_bound(name, timeout=30)


class DryRun(Protected):
    @classmethod
    def prepare(cls, tb):
        cls.start(tb, {"t4": (16384, "t4"), "burst-a": (24576, "burst-a"), "burst-b": (24576, "burst-b")})

    def test_burstable_pod_is_refused_without_a_victim_and_placed_with_one(self):
        tb = self.tb
        tb.create_pod("steady-a", "4Gi", extra_spec=on_pool("burst-a"))
        tb.create_pod("disposable-b", "4Gi", annotations={"vramd.io/disposable": "true"},
                      extra_spec=on_pool("burst-b"))
        tb.wait_pod_bound("steady-a")
        tb.wait_pod_bound("disposable-b")
        # 8Gi reserved, may burst to 24Gi: peak demand 28Gi on a 24Gi GPU.
        # On burst-a the 4Gi overshoot has no designated victim; on burst-b the
        # disposable pod's 4Gi reservation covers it.
        tb.create_pod("inference", "8Gi", annotations={"vramd.io/vram-peak": "24Gi"},
                      extra_spec={"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                          "nodeSelectorTerms": [{"matchExpressions": [
                              {"key": "pool", "operator": "In", "values": ["burst-a", "burst-b"]}]}]}}}})
        self.assertEqual(tb.wait_pod_bound("inference"), "burst-b")
        gpu = ledger_nodes(self.vramd)["burst-b"]["gpus"][0]
        self.assertEqual(gpu["peak_bytes"], 28 * GI)
        self.assertEqual(gpu["victim_bytes"], 4 * GI)
        self.assertTrue(gpu["burst_safe"])
        # The same pod only allowed on burst-a: refused with the numbers.
        tb.create_pod("inference-a", "8Gi", annotations={"vramd.io/vram-peak": "24Gi"}, extra_spec=on_pool("burst-a"))
        want = "no GPU with 8Gi free stays within the peak rule now (peak 24Gi)"
        tb.wait_for(lambda: any(want in m for m in self.events("inference-a", "FailedScheduling")), 30,
                    message="a FailedScheduling event naming the uncovered peak")
        self.assertIsNone(tb.pod_node("inference-a"))
        print("\nFailedScheduling event:", self.events("inference-a", "FailedScheduling")[-1])

    def test_runaway_tenant_gets_the_dry_run_event_and_stays(self):
        tb = self.tb
        # The gpumem ADR's card: a 16Gi T4 shared by budgeted tenants.
        self.bind_all("t4", [("immich-ml", "3000Mi", {}), ("llama-swap", "5000Mi", {}), ("frigate", "2000Mi", {})])
        # immich-ml's arena grows to 9Gi: 0.75Gi physical free, floor 1.5Gi.
        self.report("t4", 16 * GI, {"immich-ml": 9 * GI, "llama-swap": 4454 * MI, "frigate": 1946 * MI})
        tb.wait_for(lambda: self.events("immich-ml", "VramdWouldEvict"), 30,
                    message="the watchdog's dry-run Event on immich-ml")
        msg = self.events("immich-ml", "VramdWouldEvict")[-1]
        print("\nVramdWouldEvict event:", msg)
        self.assertIn("would recycle: uses 9Gi, declared 2.9Gi", msg)
        self.assertIn("GPU 0 of t4 has", msg)
        self.assertIn("floor 1.5Gi", msg)
        self.assertEqual(metric_value(self.vramd, "vramd_watchdog_actions_total",
                                      {"mode": "dry-run", "reason": "pressure"}), 1)
        self.assertEqual(metric_value(self.vramd, "vramd_gpu_under_pressure", {"node": "t4", "gpu": "0"}), 1)
        # Nothing evicted: the pod has no deletionTimestamp, its entry is bound.
        self.assertNotIn("deletionTimestamp", tb.get_pod("immich-ml")["metadata"])
        self.assertEqual(self.entry("t4", "immich-ml")["state"], "bound")
        # Neither neighbour got an Event (one victim per GPU).
        self.assertEqual(self.events("llama-swap", "VramdWouldEvict"), [])
        # The cooldown holds: no second action nor Event within it. The
        # watchdog runs after a reconcile pass at most every interval_ms (500):
        # three more passes from now (a second apart while nothing changes)
        # are three more watchdog passes over the same pressure, each gated.
        passes = metric_value(self.vramd, "vramd_reconcile_passes_total", {"result": "ok"})
        tb.wait_for(lambda: metric_value(self.vramd, "vramd_reconcile_passes_total",
                                         {"result": "ok"}) >= passes + 3, 20,
                    message="three more reconcile (and watchdog) passes")
        self.assertEqual(metric_value(self.vramd, "vramd_gpu_under_pressure", {"node": "t4", "gpu": "0"}), 1)
        self.assertEqual(metric_value(self.vramd, "vramd_watchdog_actions_total",
                                      {"mode": "dry-run", "reason": "pressure"}), 1)
        self.assertEqual(len(self.events("immich-ml", "VramdWouldEvict")), 1)

    def test_bad_input_gets_a_clear_error(self):
        tb = self.tb
        tb.create_pod("peak-below", "8Gi", annotations={"vramd.io/vram-peak": "4Gi"}, extra_spec=on_pool("t4"))
        tb.create_pod("ttl-negative", "1Gi", annotations={"vramd.io/idle-ttl": "-5m"}, extra_spec=on_pool("t4"))
        for pod, want in (("peak-below", "vramd.io/vram-peak=4Gi is below the pod's VRAM request of 8Gi"),
                          ("ttl-negative", 'annotation vramd.io/idle-ttl="-5m"')):
            tb.wait_for(lambda p=pod, w=want: any(w in m for m in self.events(p, "FailedScheduling")), 30,
                        message=f"{pod}'s FailedScheduling event with '{want}'")
            self.assertIsNone(tb.pod_node(pod))
        # A victim class list that names nothing: vramd refuses to start.
        bad = tb.write_file("bad-classes.json", json.dumps({"burst": {"victim_classes": []}}))
        r = subprocess.run([VRAMD, "--config", bad, "--no-kube", "--listen", "127.0.0.1:0"], capture_output=True,
                           text=True, timeout=20, env=clean_env())
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("burst.victim_classes", r.stderr + r.stdout)


class Enforce(Protected):
    MODE = "enforce"

    @classmethod
    def prepare(cls, tb):
        cls.start(tb, {"wd": (16384, "wd"), "guarded": (16384, "guarded"), "idle": (16384, "idle"),
                       "silent": (16384, "silent"), "busy": (16384, "busy"), "sneaky": (16384, "sneaky")},
                  extra_config={"watchdog": {"mode": "enforce", "floor": "1.5Gi", "interval_ms": 500,
                                             "cooldown_ms": 300000, "max_actions_per_minute": 100}})

    def play_kubelet(self, pod, timeout=30):
        """Waits for the eviction's deletionTimestamp, then finishes the deletion."""
        self.tb.wait_for(lambda: "deletionTimestamp" in (self.tb.get_pod(pod) or {}).get("metadata", {}), timeout,
                         message=f"{pod} to be evicted")
        self.tb.delete_pod(pod, grace=0)

    def test_runaway_tenant_is_evicted_and_its_vram_freed_when_gone(self):
        tb = self.tb
        actions = {"mode": "enforce", "reason": "pressure"}
        before = metric_value(self.vramd, "vramd_watchdog_actions_total", actions)
        self.bind_all("wd", [("immich-ml", "3000Mi", {}), ("llama-swap", "5000Mi", {})])
        self.report("wd", 16 * GI, {"immich-ml": 11 * GI, "llama-swap": 4 * GI})
        tb.wait_for(lambda: "deletionTimestamp" in tb.get_pod("immich-ml")["metadata"], 30,
                    message="immich-ml evicted through the Eviction API")
        msg = tb.wait_for(lambda: self.events("immich-ml", "VramdEvicted"), 10)[-1]
        print("\nVramdEvicted event:", msg)
        self.assertIn("recycled: uses 11Gi, declared 2.9Gi", msg)
        self.assertIsNotNone(tb.get_pod("llama-swap"))
        self.assertNotIn("deletionTimestamp", tb.get_pod("llama-swap")["metadata"])
        # Phantom rule: the VRAM stays held while the pod object exists.
        tb.wait_for(lambda: (self.entry("wd", "immich-ml") or {}).get("state") == "terminating", 20,
                    message="immich-ml's entry marked terminating")
        self.assertEqual(ledger_nodes(self.vramd)["wd"]["gpus"][0]["allocated_bytes"], 8000 * MI)
        tb.delete_pod("immich-ml", grace=0)
        tb.wait_for(lambda: self.entry("wd", "immich-ml") is None, 20, message="immich-ml's VRAM freed once it is gone")
        # One action: the cooldown holds the GPU until the pod is gone.
        self.assertEqual(metric_value(self.vramd, "vramd_watchdog_actions_total", actions), before + 1)

    def test_an_agent_that_falls_silent_gets_no_action_on_its_last_report(self):
        """Issue 32: two reports of a runaway, then the agent stops. The
        watchdog sees the pressure on every pass but never acts on the last
        report seen again; the third report would have been enough."""
        tb = self.tb
        self.bind_all("silent", [("spiky", "2Gi", {})])
        body = {"version": 2, "agent": "e2e", "source": "nvml",
                "gpus": [{"index": 0, "uuid": "GPU-silent", "total_bytes": 16 * GI, "used_bytes": 15 * GI,
                          "outside_pods_bytes": 0,
                          "pods": [{"uid": tb.get_pod("spiky")["metadata"]["uid"], "used_bytes": 15 * GI}]}]}

        passes_later = self.passes_later
        actions = {"mode": "enforce", "reason": "pressure"}
        before = metric_value(self.vramd, "vramd_watchdog_actions_total", actions) or 0
        for _ in range(2):
            self.assertEqual(self.push("silent", body), 200)
            passes_later(2)
        self.assertEqual(metric_value(self.vramd, "vramd_gpu_under_pressure", {"node": "silent", "gpu": "0"}), 1)
        passes_later(5)  # the agent is silent: the same last report, pass after pass
        self.assertNotIn("deletionTimestamp", tb.get_pod("spiky")["metadata"])
        self.assertEqual(self.events("spiky", "VramdEvicted"), [])
        self.assertEqual(metric_value(self.vramd, "vramd_watchdog_actions_total", actions) or 0, before)
        # The agent speaks again, the pressure still there: a third report acts.
        self.assertEqual(self.push("silent", body), 200)
        self.play_kubelet("spiky")
        self.assertEqual(metric_value(self.vramd, "vramd_watchdog_actions_total", actions), before + 1)
        tb.wait_for(lambda: self.entry("silent", "spiky") is None, 20, message="spiky's VRAM freed")

    def test_a_tenant_that_names_a_system_class_is_not_protected(self):
        """Issue 33 (attack): any namespace may use system-node-critical, so
        a tenant names it for its runaway pod to make it unevictable. The
        watchdog honours the system classes only in kube-system: the pod is
        evicted as any runaway is."""
        tb = self.tb
        self.bind_all("sneaky", [("sneaky-ml", "2Gi", {"priority_class_name": "system-node-critical"})])
        pod = tb.get_pod("sneaky-ml")
        self.assertEqual(pod["spec"].get("priorityClassName"), "system-node-critical")
        self.assertGreaterEqual(pod["spec"].get("priority", 0), 2_000_000_000, "the API server resolved the class")
        self.report("sneaky", 16 * GI, {"sneaky-ml": 15 * GI})
        self.play_kubelet("sneaky-ml")
        self.assertIn("recycled: uses 15Gi, declared 2Gi", self.events("sneaky-ml", "VramdEvicted")[-1])
        tb.wait_for(lambda: self.entry("sneaky", "sneaky-ml") is None, 20, message="sneaky-ml's VRAM freed")

    def test_a_disruption_budget_blocks_the_eviction(self):
        tb = self.tb
        self.bind_all("guarded", [("guarded-ml", "2Gi", {"labels": {"app": "guarded"}})])
        # The API server evicts a Pending pod without asking its budget: the
        # pod runs and is Ready, as a kubelet would report it.
        tb.api.patch("/api/v1/namespaces/default/pods/guarded-ml/status", {"status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-24T17:00:00Z"}]}})
        # A policy/v1beta1 budget (1.20) with the status the disruption
        # controller would write (the testbed runs none): no disruption allowed.
        base = "/apis/policy/v1beta1/namespaces/default/poddisruptionbudgets"
        pdb = tb.api.post(base, {
            "apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})
        tb.api.patch(f"{base}/guarded/status", {"status": {
            "observedGeneration": pdb["metadata"].get("generation", 1), "disruptionsAllowed": 0,
            "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}})
        self.report("guarded", 16 * GI, {"guarded-ml": 15 * GI})

        def blocked():
            return (metric_value(self.vramd, "vramd_watchdog_eviction_failures_total",
                                 {"reason": "pressure", "why": "blocked"}) or 0) >= 2
        tb.wait_for(blocked, 30, message="the blocked eviction counted and retried")
        self.assertNotIn("deletionTimestamp", tb.get_pod("guarded-ml")["metadata"])
        self.assertEqual(self.entry("guarded", "guarded-ml")["state"], "bound")
        self.assertEqual(self.events("guarded-ml", "VramdEvicted"), [])
        # The budget lifted, the next pass evicts it.
        tb.api.delete(f"{base}/guarded")
        self.play_kubelet("guarded-ml")
        tb.wait_for(lambda: self.entry("guarded", "guarded-ml") is None, 20, message="guarded-ml's VRAM freed")

    def test_an_idle_model_is_evicted_so_a_pending_one_binds(self):
        tb = self.tb
        # A bare pod (no controller here) opts in to idle eviction; and idle
        # needs evidence: its usage is reported, unchanged (unreported usage
        # would keep it active forever).
        idle_actions = {"mode": "enforce", "reason": "idle"}
        before = metric_value(self.vramd, "vramd_watchdog_actions_total", idle_actions) or 0
        self.bind_all("idle", [("model-old", "12Gi", {"annotations": {"vramd.io/idle-ttl": "2s",
                                                                         "vramd.io/evictable": "true"}})])
        self.report("idle", 16 * GI, {"model-old": 10 * GI})
        tb.create_pod("model-new", "8Gi", extra_spec=on_pool("idle"))
        self.play_kubelet("model-old", timeout=60)
        self.report("idle", 16 * GI, {})  # the agent's next report: the model's memory is free
        self.assertEqual(tb.wait_pod_bound("model-new", timeout=60), "idle")
        evicted = self.events("model-old", "VramdEvicted")
        self.assertTrue(evicted, "an Event on the evicted idle pod")
        print("\nVramdEvicted event:", evicted[-1])
        self.assertIn("evicted idle pod: idle for", evicted[-1])
        self.assertIn("makes room for default/model-new on idle", evicted[-1])
        self.assertTrue(any("default/model-old" in m for m in self.events("model-new", "VramdMadeRoom")))
        self.assertEqual(metric_value(self.vramd, "vramd_watchdog_actions_total", idle_actions), before + 1)


    def test_a_model_that_runs_work_is_not_idle_however_flat_its_usage(self):
        """Issue 32: the agent's utilization signal is activity. The model's
        usage never changes, but each report says its processes ran work: a
        pod waiting for its room waits, the model is not evicted, for three
        times its TTL. Once the reports stop saying so, it is idle after its
        TTL and evicted for the waiting pod."""
        tb = self.tb
        self.bind_all("busy", [("model-busy", "12Gi", {"annotations": {"vramd.io/idle-ttl": "2s",
                                                                          "vramd.io/evictable": "true"}})])
        self.report("busy", 16 * GI, {"model-busy": 10 * GI}, active={"model-busy"})
        tb.create_pod("model-waits", "8Gi", extra_spec=on_pool("busy"))
        tb.wait_for(lambda: self.events("model-waits", "FailedScheduling"), 30,
                    message="model-waits refused for room")
        deadline = time.monotonic() + 6  # three TTLs
        while time.monotonic() < deadline:
            self.passes_later(1)
            self.assertNotIn("deletionTimestamp", tb.get_pod("model-busy")["metadata"])
        self.assertEqual(self.events("model-busy", "VramdEvicted"), [])
        self.assertFalse(tb.get_pod("model-waits")["spec"].get("nodeName"))
        self.assertTrue(self.entry("busy", "model-busy")["active_in_report"])
        self.report("busy", 16 * GI, {"model-busy": 10 * GI})  # the same figure, no work any more
        self.play_kubelet("model-busy", timeout=60)
        self.report("busy", 16 * GI, {})
        self.assertEqual(tb.wait_pod_bound("model-waits", timeout=60), "busy")
        self.assertIn("evicted idle pod: idle for", self.events("model-busy", "VramdEvicted")[-1])


class Failover(Protected):
    """Issue 32: the eviction budget lives in Valkey: the replica that takes
    over one second after the leader's watchdog eviction keeps its cooldown."""
    MODE = "enforce"

    @classmethod
    def prepare(cls, tb):
        config = {"watchdog": {"mode": "enforce", "floor": "1.5Gi", "interval_ms": 500, "cooldown_ms": 300000,
                               "max_actions_per_minute": 100},
                  "leader_lease_ms": 1000}
        cls.start(tb, {"fo": (16384, "fo")}, extra_config=config)
        cls.replicas = [cls.vramd, start_vramd(tb, config={**config, "idle": {"mode": "enforce"},
                                                            "usage_max_age_ms": 600000},
                                               extra_args=["--api-token-file", tb.path("cfg", "api-token")],
                                               name="vramd-b")]

    def leader(self):
        for v in self.replicas:
            try:
                if any(line.startswith("vramd_is_leader{") and line.endswith(" 1")
                       for line in __import__("common").metrics_text(v).splitlines()):
                    return v
            except OSError:
                pass
        return None

    def test_a_new_leader_keeps_the_cooldown_of_the_old_ones_eviction(self):
        tb = self.tb
        self.bind_all("fo", [("immich-ml", "3000Mi", {}), ("llama-swap", "5000Mi", {})])
        first = tb.wait_for(self.leader, 20, message="a leader among the two replicas")
        type(self).vramd = first
        # Both over their budgets, 1Gi short of the floor: immich-ml (most over) goes.
        self.report("fo", 16 * GI, {"immich-ml": 8 * GI, "llama-swap": 7680 * MI})
        tb.wait_for(lambda: "deletionTimestamp" in tb.get_pod("immich-ml")["metadata"], 30,
                    message="the leader evicts immich-ml")
        # The leader dies at once; the other replica takes over within a lease.
        other = next(v for v in self.replicas if v is not first)
        first.stop(sig=__import__("signal").SIGKILL)
        type(self).vramd = other
        tb.delete_pod("immich-ml", grace=0)  # the kubelet ends it
        # llama-swap alone now runs 15.5Gi on its 4.9Gi: pressure with a cause.
        self.report("fo", 16 * GI, {"llama-swap": 15872 * MI})
        tb.wait_for(lambda: self.leader() is other, 20, message="the other replica to lead")
        passes = metric_value(other, "vramd_reconcile_passes_total", {"result": "ok"}) or 0
        tb.wait_for(lambda: (metric_value(other, "vramd_reconcile_passes_total", {"result": "ok"}) or 0)
                    >= passes + 8, 40, message="eight passes of the new leader (its watchdog with them)")
        self.assertEqual(metric_value(other, "vramd_gpu_under_pressure", {"node": "fo", "gpu": "0"}), 1)
        self.assertNotIn("deletionTimestamp", tb.get_pod("llama-swap")["metadata"],
                         "the new leader evicted within the old leader's cooldown")
        self.assertEqual(metric_value(other, "vramd_watchdog_actions_total",
                                      {"mode": "enforce", "reason": "pressure"}), 0)


if __name__ == "__main__":
    import unittest
    unittest.main(verbosity=2)
