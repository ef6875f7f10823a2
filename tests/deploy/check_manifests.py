#!/usr/bin/env python3
"""Checks the manifests `helm template` rendered from deploy/helm/vramd.

Called by tests/deploy/helm_test.sh:

  check_manifests.py --out DIR [--vramd-bin PATH] PROFILE=RENDERED.yaml[,NOTES.txt] ...

Profiles (each a values file or --set list in helm_test.sh, with its --kube-version):
  default   the chart's defaults (Kubernetes 1.31.0): mTLS from ensure-secrets,
            API token, NetworkPolicy
  all-on    tests/deploy/values-all-on.yaml: every optional feature (cert-manager)
  external  tests/deploy/values-external.yaml: external Valkey, TLS Secret without
            client certificates, v1beta1 (1.21.14)
  testbed   1.20.2, plain HTTP, no leader election, DefaultPreemption off: what the
            e2e testbed's kube-scheduler 1.20 runs
  k8s-X.Y.Z the defaults rendered with --kube-version X.Y.Z (1.20.2, 1.22.0, 1.23.5,
            1.24.0, 1.25.0, 1.31.0): the config API, scheduler tag and NOTES
            wiring chosen from that version

Writes into DIR, for promtool, the kube-scheduler start check and the e2e tier:
  vramd-rules.yaml                        the PrometheusRule's groups (all-on)
  kube-scheduler-config.<profile>.yaml    each rendered KubeSchedulerConfiguration
  kube-scheduler-config.testbed.json      the same as JSON (no YAML parser needed)
  notes-extender.<profile>.yaml          NOTES.txt's snippet for an existing scheduler
  vramd-rbac.json                         ClusterRole + ClusterRoleBinding (default)
  vramd-config.<profile>.json             vramd's rendered config file

Every failed check is printed; the exit status is 1 when any failed.
"""
import json
import os
import re
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CHART = os.path.join(ROOT, "deploy", "helm", "vramd")
NAMESPACE = "vramd-system"
RELEASE = "vramd"

CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "Namespace", "PriorityClass",
                  "CustomResourceDefinition", "ClusterIssuer", "MutatingWebhookConfiguration",
                  "ValidatingWebhookConfiguration"}

# Exactly the API access vramd needs (DESIGN.md, src/kube): (group, resource, verb).
VRAMD_RBAC = {("", "pods", v) for v in ("get", "list", "watch")} | \
             {("", "pods/binding", "create")} | \
             {("", "pods/eviction", "create")} | \
             {("", "nodes", v) for v in ("get", "list", "watch", "patch")} | \
             {("", "events", "create")} | \
             {("vramd.io", "vramqueues", v) for v in ("get", "list", "watch")} | \
             {("vramd.io", "vramqueues/status", v) for v in ("patch", "update")} | \
             {("authentication.k8s.io", "tokenreviews", "create"),  # identities (issue 33)
              ("authorization.k8s.io", "subjectaccessreviews", "create")}

API = "kubescheduler.config.k8s.io/"
# ensure: the Secrets the Job `vramd ensure-secrets` must create (flag -> name).
ENSURE_ALL = {"tls-secret": f"{RELEASE}-tls", "token-secret": f"{RELEASE}-api-token", "valkey-secret": f"{RELEASE}-valkey"}
PROFILES = {
    "default": dict(replicas=2, anti="soft", tls=True, client_auth=True, bundled=True, delivery="file",
                    api=API + "v1", leader=True, preemption_off=False,
                    monitoring=False, pdb=True, api_token=True, netpol=True, ensure=ENSURE_ALL,
                    kube="1.31.0", scheduler_tag="v1.31.0", admission=f"{RELEASE}-tls"),
    "all-on": dict(replicas=3, anti="hard", tls=True, client_auth=True, bundled=True, delivery="file",
                   api=API + "v1", leader=True, preemption_off=True,
                   monitoring=True, pdb=True, api_token=True, netpol=True,
                   ensure={k: v for k, v in ENSURE_ALL.items() if k != "tls-secret"},
                   kube="1.31.0", scheduler_tag="v1.31.0", admission="certManager"),
    "external": dict(replicas=2, anti="", tls=True, client_auth=False, bundled=False, delivery="file",
                     api=API + "v1beta1", leader=True, preemption_off=True,
                     monitoring=False, pdb=False, api_token=True, netpol=True,
                     ensure={"token-secret": f"{RELEASE}-api-token"},
                     kube="1.21.14", scheduler_tag="v1.21.14", admission="vramd-serving-cert"),
    "testbed": dict(replicas=2, anti="soft", tls=False, client_auth=False, bundled=True, delivery="file",
                    api=API + "v1beta1", leader=False, preemption_off=True,
                    monitoring=False, pdb=True, api_token=True, netpol=True,
                    ensure={k: v for k, v in ENSURE_ALL.items() if k != "tls-secret"},
                    kube="1.20.2", scheduler_tag="v1.20.2", admission=None),
}
# The AMD preset of the agent (agent.preset=amd) over the defaults.
PROFILES["amd"] = dict(PROFILES["default"], services="default", agent="amd")
PROFILES["all-on"]["agent"] = "nvidia"
# Issue 34: enforce.mode on with the agent writing the host's cgroup v2 tree.
PROFILES["enforce"] = dict(PROFILES["default"], services="default", agent="enforce")
# The defaults per Kubernetes version: the config API each version's kube-scheduler
# reads best, the scheduler image at the cluster's version, DefaultPreemption off on
# 1.20-1.21 (kubernetes#101548). Services as in the default profile.
for _kube, _api in (("1.20.2", "v1beta1"), ("1.22.0", "v1beta2"), ("1.23.5", "v1beta3"), ("1.24.0", "v1beta3"),
                    ("1.25.0", "v1"), ("1.31.0", "v1")):
    PROFILES[f"k8s-{_kube}"] = dict(PROFILES["default"], api=API + _api, kube=_kube, scheduler_tag="v" + _kube,
                                    preemption_off=_kube.startswith(("1.20.", "1.21.")), services="default")


class Checker:
    def __init__(self):
        self.failures = 0
        self.passed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failures += 1
            print(f"check_manifests: FAIL: {what}")
        return ok


C = Checker()


def load_docs(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    docs = []
    for d in yaml.safe_load_all(text):
        if d is None:
            continue
        docs.append(d)
    return docs


def find(docs, kind, name=None, namespace=None):
    out = [d for d in docs if d.get("kind") == kind and (name is None or d["metadata"].get("name") == name)
           and (namespace is None or d["metadata"].get("namespace") == namespace)]
    return out


def one(docs, kind, name, profile):
    found = find(docs, kind, name)
    C.check(len(found) == 1, f"[{profile}] expected exactly one {kind} {name}, found {len(found)}")
    return found[0] if found else None


def strip_strings(expr):
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def metric_names(expr):
    return set(re.findall(r"(?<![a-zA-Z0-9_:])vramd_[a-zA-Z0-9_]+", strip_strings(expr)))


def known_config_keys(vramd_bin):
    """The config keys vramd knows, from `vramd --help-config` (None when no
    binary is named; a named binary that is missing is an error)."""
    if not vramd_bin:
        return None
    if not os.access(vramd_bin, os.X_OK):
        sys.exit(f"check_manifests: FAILED: --vramd-bin {vramd_bin} is not an executable (build it first)")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    out = subprocess.run([vramd_bin, "--help-config"], capture_output=True, text=True, env=env, check=True).stdout
    lines = out.splitlines()[1:]
    keys = {line.split()[0] for line in lines if line.strip()}
    envs = {line.split()[2] for line in lines if line.strip() and len(line.split()) > 2}
    return keys, envs


def flatten(obj, prefix=""):
    for k, v in obj.items():
        key = f"{prefix}.{k}" if prefix else k
        if key == "nodes":
            yield key, v
        elif isinstance(v, dict):
            yield from flatten(v, key)
        else:
            yield key, v


def pod_spec(workload):
    return workload["spec"]["template"]["spec"]


def check_security(profile, workload):
    name = f'{workload["kind"]} {workload["metadata"]["name"]}'
    spec = pod_spec(workload)
    psc = spec.get("securityContext", {})
    C.check(psc.get("runAsNonRoot") is True, f"[{profile}] {name}: pod securityContext.runAsNonRoot must be true")
    C.check(isinstance(psc.get("runAsUser"), int) and psc["runAsUser"] > 0,
            f"[{profile}] {name}: pod securityContext.runAsUser must be a non-zero uid")
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        sc = c.get("securityContext", {})
        cname = f'{name} container {c["name"]}'
        C.check(sc.get("readOnlyRootFilesystem") is True, f"[{profile}] {cname}: readOnlyRootFilesystem must be true")
        C.check(sc.get("allowPrivilegeEscalation") is False,
                f"[{profile}] {cname}: allowPrivilegeEscalation must be false")
        C.check(sc.get("capabilities", {}).get("drop") == ["ALL"], f"[{profile}] {cname}: must drop ALL capabilities")
        C.check(not sc.get("privileged", False), f"[{profile}] {cname}: must not be privileged")
        C.check(bool(c.get("resources", {}).get("requests")), f"[{profile}] {cname}: needs resource requests")


WORKLOADS = {"Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"}
# The chart's Services per profile, as the service-link system test knows them.
CHART_SERVICES = os.path.join(ROOT, "tests", "system", "chart_services.json")


def workload_pod_spec(d):
    """The pod spec of any workload kind (a CronJob's sits in its jobTemplate)."""
    if d["kind"] == "Pod":
        return d.get("spec", {})
    if d["kind"] == "CronJob":
        return d["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return pod_spec(d)


def check_service_links(profile, docs):
    """No pod gets the kubelet's service-link variables: those of the Services
    vramd and vramd-valkey (VRAMD_SERVICE_HOST, VRAMD_VALKEY_PORT, ...) share
    vramd's VRAMD_* prefix. And the Services are the ones the system test
    tests/system/service_links_test.py hands vramd as those variables."""
    workloads = [d for d in docs if d.get("kind") in WORKLOADS]
    C.check(bool(workloads), f"[{profile}] no workloads rendered")
    for d in workloads:
        C.check(workload_pod_spec(d).get("enableServiceLinks") is False,
                f'[{profile}] {d["kind"]} {d["metadata"]["name"]}: pod spec must set enableServiceLinks: false')
    rendered = sorted(
        (s["metadata"]["name"], s["spec"].get("clusterIP") == "None",
         tuple((p.get("name", ""), p["port"], p.get("protocol", "TCP")) for p in s["spec"]["ports"]))
        for s in find(docs, "Service"))
    with open(CHART_SERVICES, encoding="utf-8") as f:
        listed = json.load(f)["profiles"].get(PROFILES[profile].get("services", profile), [])
    listed = sorted((s["name"], s["headless"], tuple((p["name"], p["port"], p["protocol"]) for p in s["ports"]))
                    for s in listed)
    C.check(rendered == listed, f"[{profile}] the chart's Services {rendered} differ from "
                                f"tests/system/chart_services.json {listed} (update it: the service-link test uses it)")


def volume_sources(spec):
    return {v["name"]: v for v in spec.get("volumes", [])}


def mounted_path_source(spec, container, path):
    """The volume (and key) a file path inside `container` comes from, or None."""
    vols = volume_sources(spec)
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            rel = path[len(mp) + 1:] if path != mp else m.get("subPath", "")
            return vols.get(m["name"]), rel
    return None


def check_profile(profile, docs, exp, cfg_keys, out_dir, notes_path):
    # Every object: kind, name, namespace; no duplicates.
    seen = set()
    for d in docs:
        ok = isinstance(d, dict) and d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name")
        if not C.check(ok, f"[{profile}] a rendered document lacks apiVersion/kind/metadata.name: {str(d)[:120]}"):
            continue
        key = (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"])
        C.check(key not in seen, f"[{profile}] duplicate object {key}")
        seen.add(key)
        if d["kind"] not in CLUSTER_SCOPED:
            C.check(bool(d["metadata"].get("namespace")), f"[{profile}] {d['kind']} {d['metadata']['name']} has no namespace")

    check_service_links(profile, docs)

    dep = one(docs, "Deployment", RELEASE, profile)
    svc = one(docs, "Service", RELEASE, profile)
    cm = one(docs, "ConfigMap", RELEASE, profile)
    if not (dep and svc and cm):
        return
    spec = pod_spec(dep)
    C.check(dep["spec"]["replicas"] == exp["replicas"], f"[{profile}] vramd replicas {dep['spec']['replicas']} != {exp['replicas']}")
    anti = spec.get("affinity", {}).get("podAntiAffinity", {})
    if exp["anti"] == "soft":
        C.check(bool(anti.get("preferredDuringSchedulingIgnoredDuringExecution")), f"[{profile}] vramd needs preferred pod anti-affinity")
    elif exp["anti"] == "hard":
        C.check(bool(anti.get("requiredDuringSchedulingIgnoredDuringExecution")), f"[{profile}] vramd needs required pod anti-affinity")
    else:
        C.check(not anti, f"[{profile}] vramd should have no pod anti-affinity")
    check_security(profile, dep)
    c = spec["containers"][0]
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]

    # Probes: HTTP GETs on the API port, which never asks for a client certificate
    # (the kubelet has none), with or without mutual TLS on the extender port.
    api_ports = [p for p in c.get("ports", []) if p.get("name") == "api"]
    C.check(len(api_ports) == 1, f"[{profile}] vramd needs exactly one container port named api")
    scheme = "HTTPS" if exp["tls"] else "HTTP"
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c.get(probe, {}).get("httpGet", {})
        C.check(get.get("path") == path and get.get("port") == "api",
                f"[{profile}] {probe} must GET {path} on the api port, is {c.get(probe)}")
        C.check(get.get("scheme") == scheme, f"[{profile}] {probe} scheme must be {scheme}")

    # Secrets never on the command line; the password comes from a Secret.
    argv = " ".join(str(a) for a in (c.get("command", []) + c.get("args", [])))
    C.check(not re.search(r"pass(word)?|secret|token=", argv, re.I), f"[{profile}] vramd's command line mentions a secret: {argv}")
    env = {e["name"]: e for e in c.get("env", [])}
    for e in env.values():
        C.check("value" not in e or not re.search(r"pass|secret|token", e["name"], re.I),
                f"[{profile}] env {e['name']} carries a secret as a literal value")
    if cfg_keys:
        allowed_env = cfg_keys[1] | {"VRAMD_VALKEY_PASSWORD"}
        for name in env:
            if name.startswith("VRAMD_"):
                C.check(name in allowed_env, f"[{profile}] env {name} is not a variable vramd knows (it would refuse to start)")
    if exp["delivery"] == "env":
        pw = env.get("VRAMD_VALKEY_PASSWORD", {})
        C.check("secretKeyRef" in pw.get("valueFrom", {}), f"[{profile}] VRAMD_VALKEY_PASSWORD must come from a Secret")
    else:
        C.check("VRAMD_VALKEY_PASSWORD" not in env, f"[{profile}] file delivery must not also set VRAMD_VALKEY_PASSWORD")

    # The config file: valid keys, consistent with the pod.
    config = json.loads(cm["data"]["config.json"])
    with open(os.path.join(out_dir, f"vramd-config.{profile}.json"), "w") as f:
        json.dump(config, f, indent=2)
    if exp.get("agent") != "enforce":
        # Issue 34: enforcement is dry-run by default (the agents report what they would write).
        C.check(config.get("enforce") == {"mode": "dry-run", "node_modes": []},
                f"[{profile}] enforce is dry-run by default: {config.get('enforce')}")
    if cfg_keys:
        for key, _ in flatten(config):
            C.check(key in cfg_keys[0] or key == "nodes", f"[{profile}] config key {key} is unknown to vramd (--help-config)")
    C.check(config.get("kube", {}).get("enabled") is True, f"[{profile}] config must enable Kubernetes")
    # The designated-victim class: rendered as a PriorityClass that never
    # preempts, below the default class, and named in burst.victim_classes.
    classes = find(docs, "PriorityClass")
    for pc in classes:
        C.check(pc.get("preemptionPolicy") == "Never" and pc.get("value", 0) < 0 and not pc.get("globalDefault"),
                f"[{profile}] PriorityClass {pc['metadata']['name']} must be preemptionPolicy Never, below 0, not default")
        C.check(pc["metadata"]["name"] in config.get("burst", {}).get("victim_classes", ["vramd-disposable"]),
                f"[{profile}] PriorityClass {pc['metadata']['name']} is not in config.burst.victim_classes")
    port = svc["spec"]["ports"][0]
    cport = c["ports"][0]
    C.check(config["listen"].endswith(f":{cport['containerPort']}"), f"[{profile}] listen {config['listen']} != container port")
    C.check(port["targetPort"] == cport["name"], f"[{profile}] Service targetPort must name the container port")
    if api_ports:
        C.check(config.get("api_listen", "").endswith(f":{api_ports[0]['containerPort']}")
                and api_ports[0]["containerPort"] != cport["containerPort"],
                f"[{profile}] api_listen {config.get('api_listen')} must be the api container port, apart from listen")
        svc_api = [p for p in svc["spec"]["ports"] if p.get("name") == "api"]
        C.check(len(svc_api) == 1 and svc_api[0]["targetPort"] == "api" and svc_api[0]["port"] == api_ports[0]["containerPort"],
                f"[{profile}] the Service must serve the api port: {svc['spec']['ports']}")
    C.check(all(pod_labels.get(k) == v for k, v in svc["spec"]["selector"].items()), f"[{profile}] Service selector misses the vramd pods")
    args = c.get("args", [])
    C.check("--config" in args and args[args.index("--config") + 1] == "/etc/vramd/config.json", f"[{profile}] vramd must run with --config")
    src = mounted_path_source(spec, c, "/etc/vramd/config.json")
    C.check(src is not None and src[0].get("configMap", {}).get("name") == RELEASE, f"[{profile}] config.json must be mounted from the ConfigMap")
    vurl = config["valkey"]["url"]
    C.check("@" not in vurl, f"[{profile}] valkey.url must not carry credentials")
    if exp["delivery"] == "file":
        pf = config["valkey"].get("password_file")
        s = mounted_path_source(spec, c, pf) if pf else None
        C.check(s is not None and "secret" in s[0], f"[{profile}] valkey.password_file must be a mounted Secret")
    if exp["tls"]:
        for k in ("cert_file", "key_file"):
            s = mounted_path_source(spec, c, config.get("tls", {}).get(k, "-"))
            C.check(s is not None and "secret" in s[0], f"[{profile}] tls.{k} must be a mounted Secret")
        C.check(("client_ca_file" in config.get("tls", {})) == exp["client_auth"], f"[{profile}] tls.client_ca_file iff clientAuth")
    else:
        C.check("tls" not in config, f"[{profile}] no TLS keys without TLS")
    if exp["api_token"]:
        s = mounted_path_source(spec, c, config.get("api_token_file", "-"))
        C.check(s is not None and "secret" in s[0], f"[{profile}] api_token_file must be a mounted Secret")
    else:
        C.check("api_token_file" not in config, f"[{profile}] no api_token_file without apiToken")

    check_ensure_secrets(profile, docs, exp, spec, c)
    check_no_secret_rights(profile, docs, spec["serviceAccountName"])
    files = check_vramd_secret_files(profile, spec, c)
    if exp["tls"]:
        C.check(sorted(k for n, k, p in files if n == "tls") == ["ca.crt", "tls.crt", "tls.key"],
                f"[{profile}] vramd's TLS volume gives exactly ca.crt, tls.crt, tls.key: {files}")
    check_admission(profile, docs, exp, dep, svc, config)
    if exp["netpol"]:
        check_network_policies(profile, docs, exp, dep, cport["name"])
    else:
        C.check(not find(docs, "NetworkPolicy"), f"[{profile}] no NetworkPolicy expected")

    # PodDisruptionBudget.
    pdbs = find(docs, "PodDisruptionBudget")
    if exp["pdb"]:
        C.check(len(pdbs) == 1, f"[{profile}] expected a PodDisruptionBudget")
        for p in pdbs:
            sel = p["spec"]["selector"]["matchLabels"]
            C.check(all(pod_labels.get(k) == v for k, v in sel.items()), f"[{profile}] PDB selector misses the vramd pods")
    else:
        C.check(not pdbs, f"[{profile}] expected no PodDisruptionBudget")

    # RBAC: exactly the verbs vramd uses.
    role = one(docs, "ClusterRole", RELEASE, profile)
    binding = one(docs, "ClusterRoleBinding", RELEASE, profile)
    if role and binding:
        granted = set()
        for r in role["rules"]:
            C.check(not r.get("resourceNames") and not r.get("nonResourceURLs"), f"[{profile}] unexpected rule shape {r}")
            for g in r.get("apiGroups", []):
                for res in r.get("resources", []):
                    for v in r.get("verbs", []):
                        granted.add((g, res, v))
        C.check(granted == VRAMD_RBAC, f"[{profile}] ClusterRole grants {sorted(granted ^ VRAMD_RBAC)} beyond/short of what vramd uses")
        C.check("*" not in json.dumps(role["rules"]), f"[{profile}] ClusterRole must not use wildcards")
        subj = binding["subjects"][0]
        C.check(binding["roleRef"]["name"] == RELEASE and subj["kind"] == "ServiceAccount"
                and subj["name"] == spec["serviceAccountName"] and subj["namespace"] == NAMESPACE,
                f"[{profile}] ClusterRoleBinding must bind the ClusterRole to vramd's ServiceAccount")
        if profile == "default":
            with open(os.path.join(out_dir, "vramd-rbac.json"), "w") as f:
                json.dump([role, binding], f, indent=2)

    # Valkey.
    sts = find(docs, "StatefulSet")
    if exp["bundled"]:
        C.check(len(sts) == 1, f"[{profile}] expected the Valkey StatefulSet")
        for s in sts:
            check_security(profile, s)
            conf = one(docs, "ConfigMap", s["metadata"]["name"], profile)
            text = conf["data"]["valkey.conf"] if conf else ""
            C.check(re.search(r"^appendonly yes$", text, re.M) is not None, f"[{profile}] Valkey must run with appendonly yes")
            C.check(re.search(r"^maxmemory-policy noeviction$", text, re.M) is not None, f"[{profile}] Valkey must never evict")
            C.check("requirepass" not in text.replace("# requirepass", ""), f"[{profile}] the password must not be in the ConfigMap")
            C.check(bool(s["spec"].get("volumeClaimTemplates")), f"[{profile}] Valkey needs a PVC")
            vc = pod_spec(s)["containers"][0]
            C.check(re.match(r"^[^:]+:[^:]+$", vc["image"].split("/")[-1]) is not None, f"[{profile}] Valkey image needs a tag")
            venv = {e["name"]: e for e in vc.get("env", [])}
            # Issue 33 (item 5 and Low): the password as a file, never in the environment.
            C.check(not any(re.search(r"pass|secret|auth", n, re.I) for n in venv),
                    f"[{profile}] Valkey's password must not be in its environment: {sorted(venv)}")
            vspec = pod_spec(s)
            pw = mounted_path_source(vspec, vc, "/run/valkey-secret/password")
            C.check(pw is not None and pw[0] is not None and "secret" in pw[0]
                    and [it["path"] for it in pw[0]["secret"].get("items", [])] == ["password"],
                    f"[{profile}] Valkey reads its password from the mounted Secret /run/valkey-secret/password")
            script = " ".join(vc.get("args", []))
            C.check("user default off" in script and "user vramd reset on" in script and "/etc/valkey/vramd.acl" in script,
                    f"[{profile}] Valkey's start script must turn the default user off and define vramd's from vramd.acl")
            C.check(re.search(r"^timeout [1-9][0-9]*$", text, re.M) is not None, f"[{profile}] Valkey needs an idle timeout")
            C.check(re.search(r"^maxclients [1-9][0-9]*$", text, re.M) is not None, f"[{profile}] Valkey needs maxclients")
            acl = conf["data"].get("vramd.acl", "") if conf else ""
            rules = acl.split()
            C.check(rules[:4] == ["resetkeys", "~vramd:*", "resetchannels", "&vramd:*"] and "-@all" in rules,
                    f"[{profile}] vramd's ACL: only keys and channels vramd:*, from -@all: {acl[:120]}")
            # Exactly what tests/system/valkey_acl_test.py runs vramd under (chart_acl there).
            with open(os.path.join(ROOT, "deploy", "helm", "vramd", "files", "valkey-vramd.acl")) as f:
                want_acl = "resetkeys ~vramd:* resetchannels &vramd:* " + " ".join(
                    ln.strip() for ln in f if ln.strip() and not ln.strip().startswith("#"))
            C.check(acl == want_acl, f"[{profile}] vramd.acl differs from files/valkey-vramd.acl as the system test builds it")
            allowed = {r[1:] for r in rules if r.startswith("+")}
            for bad in ("@all", "@admin", "@dangerous", "config", "debug", "flushall", "flushdb", "keys", "acl",
                        "shutdown", "monitor", "module", "replicaof", "slaveof", "save", "bgsave", "script", "function"):
                C.check(bad not in allowed and not any(a.startswith(bad + "|") for a in allowed),
                        f"[{profile}] vramd's ACL must not allow {bad}")
            C.check(config["valkey"].get("username") == "vramd", f"[{profile}] vramd logs in as the ACL user vramd: {config['valkey']}")
            C.check(f'{s["metadata"]["name"]}.{NAMESPACE}.svc:6379' in vurl, f"[{profile}] vramd must use the bundled Valkey's Service")
    else:
        C.check(not sts, f"[{profile}] no Valkey StatefulSet with an external URL")
        C.check(not vurl.startswith(f"redis://{RELEASE}-valkey"), f"[{profile}] external URL expected")

    # Scheduler wiring (a).
    sched_cm = one(docs, "ConfigMap", f"{RELEASE}-scheduler", profile)
    sched = one(docs, "Deployment", f"{RELEASE}-scheduler", profile)
    if sched_cm and sched:
        text = sched_cm["data"]["config.yaml"]
        with open(os.path.join(out_dir, f"kube-scheduler-config.{profile}.yaml"), "w") as f:
            f.write(text)
        ksc = yaml.safe_load(text)
        if profile == "testbed":
            with open(os.path.join(out_dir, "kube-scheduler-config.testbed.json"), "w") as f:
                json.dump(ksc, f, indent=2)
        check_scheduler_config(profile, ksc, exp, f"http{'s' if exp['tls'] else ''}", cport["containerPort"])
        check_security(profile, sched)
        sspec = pod_spec(sched)
        sc = sspec["containers"][0]
        cfg_arg = [a for a in sc["command"] if a.startswith("--config=")]
        C.check(len(cfg_arg) == 1, f"[{profile}] kube-scheduler needs --config")
        if cfg_arg:
            s = mounted_path_source(sspec, sc, cfg_arg[0].split("=", 1)[1])
            C.check(s is not None and s[0].get("configMap", {}).get("name") == f"{RELEASE}-scheduler" and s[1] == "config.yaml",
                    f"[{profile}] --config must point at the mounted KubeSchedulerConfiguration")
        if exp["tls"]:
            tls = ksc["extenders"][0]["tlsConfig"]
            s = mounted_path_source(sspec, sc, tls["caFile"])
            C.check(s is not None and "secret" in s[0] and any(i["key"] == "ca.crt" and i["path"] == s[1]
                                                                 for i in s[0]["secret"].get("items", [])),
                    f"[{profile}] tlsConfig.caFile must be ca.crt of a mounted Secret")
            if exp["client_auth"]:
                for k, want in (("certFile", ("client.crt", "tls.crt")), ("keyFile", ("client.key", "tls.key"))):
                    s = mounted_path_source(sspec, sc, tls.get(k, "-"))
                    C.check(s is not None and "secret" in s[0] and any(i["key"] in want and i["path"] == s[1]
                                                                         for i in s[0]["secret"].get("items", [])),
                            f"[{profile}] tlsConfig.{k} must be {' or '.join(want)} of a mounted Secret (items:)")
            # The serving certificate's key never reaches the scheduler: only items: of the TLS Secret.
            for v in sspec.get("volumes", []):
                sec = v.get("secret")
                if sec and sec.get("secretName") == f"{RELEASE}-tls":
                    keys = [i["key"] for i in sec.get("items", [])]
                    C.check(bool(keys) and "tls.key" not in keys,
                            f"[{profile}] the scheduler must mount only items of {RELEASE}-tls, never tls.key: {keys}")
        C.check(sc["image"] == f"registry.k8s.io/kube-scheduler:{exp['scheduler_tag']}",
                f"[{profile}] scheduler image {sc['image']} != registry.k8s.io/kube-scheduler:{exp['scheduler_tag']}")
        C.check(sspec.get("enableServiceLinks") is False, f"[{profile}] the scheduler pod must not get service links")
        sa = sspec["serviceAccountName"]
        roles = {b["roleRef"]["name"] for b in find(docs, "ClusterRoleBinding")
                 if any(x["name"] == sa for x in b["subjects"])}
        C.check({"system:kube-scheduler", "system:volume-scheduler"} <= roles,
                f"[{profile}] the scheduler's ServiceAccount must be bound to system:kube-scheduler and system:volume-scheduler")
        if exp["leader"]:
            lease_roles = [r for r in find(docs, "Role") if any("leases" in rule.get("resources", []) for rule in r["rules"])]
            C.check(len(lease_roles) == 1, f"[{profile}] the scheduler needs a Role on its leader-election Lease")

    # Monitoring objects.
    rules = find(docs, "PrometheusRule")
    monitors = find(docs, "ServiceMonitor")
    dashboards = [d for d in find(docs, "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]
    if exp["monitoring"]:
        C.check(len(rules) == 1 and len(monitors) == 1 and len(dashboards) == 1,
                f"[{profile}] expected a PrometheusRule, a ServiceMonitor and a dashboard ConfigMap")
        for m in monitors:
            ep = m["spec"]["endpoints"][0]
            C.check(ep["port"] == "api" and ep["path"] == "/metrics", f"[{profile}] ServiceMonitor must scrape /metrics on the api port")
            C.check(all(svc["metadata"]["labels"].get(k) == v for k, v in m["spec"]["selector"]["matchLabels"].items()),
                    f"[{profile}] ServiceMonitor selector misses the vramd Service")
            if exp["tls"]:
                C.check(ep.get("scheme") == "https" and "ca" in ep.get("tlsConfig", {}), f"[{profile}] ServiceMonitor must verify TLS")
                C.check("cert" not in ep.get("tlsConfig", {}), f"[{profile}] the api port needs no client certificate")
        for d in dashboards:
            C.check(d["metadata"]["labels"].get("grafana_dashboard") == "1", f"[{profile}] dashboard ConfigMap needs grafana_dashboard: \"1\"")
            with open(os.path.join(CHART, "files", "vramd-dashboard.json"), encoding="utf-8") as f:
                C.check(json.loads(d["data"]["vramd-dashboard.json"]) == json.load(f), f"[{profile}] dashboard ConfigMap differs from files/vramd-dashboard.json")
        for r in rules:
            with open(os.path.join(out_dir, "vramd-rules.yaml"), "w") as f:
                yaml.safe_dump({"groups": r["spec"]["groups"]}, f, sort_keys=False, width=1000)
            check_alerts(profile, r)
    else:
        C.check(not rules and not monitors and not dashboards, f"[{profile}] monitoring objects are off by default")

    if exp["tls"] and profile == "all-on":
        certs = find(docs, "Certificate")
        C.check(len(certs) == 3, f"[{profile}] expected CA, serving and client Certificates from cert-manager")
        serving = [x for x in certs if x["spec"]["secretName"] == f"{RELEASE}-tls"]
        C.check(len(serving) == 1 and {f"{RELEASE}.{NAMESPACE}.svc", "localhost"} <= set(serving[0]["spec"]["dnsNames"]),
                f"[{profile}] the serving certificate must name {RELEASE}.{NAMESPACE}.svc and localhost")

    if notes_path:
        check_notes(profile, notes_path, exp, out_dir)
    check_agent(profile, docs, exp)
    check_queue_crd(profile, docs)


def queue_bounds():
    """kMaxQueueNamespaces and kMaxQueueWeight from include/vramd/ledger/queues.h."""
    with open(os.path.join(ROOT, "include", "vramd", "ledger", "queues.h"), encoding="utf-8") as f:
        text = f.read()
    out = {}
    for name in ("kMaxQueueNamespaces", "kMaxQueueWeight"):
        m = re.search(name + r"\s*=\s*(\d+)", text)
        out[name] = int(m.group(1)) if m else None
    m = re.search(r"kMaxQueueBytes\s*=\s*int64_t\{1\}\s*<<\s*(\d+)", text)
    out["kMaxQueueBytes"] = 1 << int(m.group(1)) if m else None
    return out


# The VramQueue CRD's printer columns (name, jsonPath, priority): what `kubectl get vq` shows.
QUEUE_COLUMNS = [
    ("Deserved", ".spec.deserved", 0), ("Limit", ".spec.limit", 0), ("Allocated", ".status.allocated", 0),
    ("Fair Share", ".status.fairShare", 0), ("Pending", ".status.pending", 0),
    ("Valid", '.status.conditions[?(@.type=="Valid")].status', 0), ("Age", ".metadata.creationTimestamp", 0),
    ("Parent", ".spec.parent", 1), ("Weight", ".spec.overQuotaWeight", 1),
    ("Reason", '.status.conditions[?(@.type=="Valid")].reason', 1),
]
# Quantities the deserved/limit pattern must accept and refuse (vramd's ParseBytes
# judges again: "0.5" or "1m" pass the pattern but are not whole bytes).
QUANTITIES_GOOD = ["0", "16Gi", "1500M", "1e9", "1.5Gi", "+1Ki", "137438953472", "1000e-3"]
QUANTITIES_BAD = ["", "-1Gi", "lots", "16 Gi", "16GB", "1Gi ", "0x10", "--1"]


def check_queue_crd(profile, docs):
    """The VramQueue CRD (deploy/helm/vramd/crds/vramqueues.yaml, rendered with
    --include-crds): names, scope, status subresource, printer columns and a
    schema that validates the spec with vramd's bounds."""
    crd = one(docs, "CustomResourceDefinition", "vramqueues.vramd.io", profile)
    if not crd:
        return
    spec = crd["spec"]
    names = spec["names"]
    C.check(crd["apiVersion"] == "apiextensions.k8s.io/v1", f"[{profile}] the CRD must be apiextensions.k8s.io/v1")
    C.check(spec["group"] == "vramd.io" and spec["scope"] == "Cluster", f"[{profile}] VramQueue: group vramd.io, cluster-scoped")
    C.check((names["kind"], names["plural"], names.get("shortNames")) == ("VramQueue", "vramqueues", ["vq"]),
            f"[{profile}] VramQueue names: kind VramQueue, plural vramqueues, shortNames [vq]; are {names}")
    versions = spec["versions"]
    if not C.check([v["name"] for v in versions] == ["v1alpha1"], f"[{profile}] the CRD serves exactly v1alpha1"):
        return
    v = versions[0]
    C.check(v.get("served") is True and v.get("storage") is True, f"[{profile}] v1alpha1 must be served and stored")
    C.check(v.get("subresources", {}).get("status") == {}, f"[{profile}] the CRD needs the status subresource")
    cols = [(c["name"], c["jsonPath"], c.get("priority", 0)) for c in v.get("additionalPrinterColumns", [])]
    C.check(cols == QUEUE_COLUMNS, f"[{profile}] VramQueue printer columns {cols} != {QUEUE_COLUMNS}")
    schema = v["schema"]["openAPIV3Schema"]
    C.check(schema.get("required") == ["spec"], f"[{profile}] a VramQueue requires spec")
    sp = schema["properties"]["spec"]
    props = sp["properties"]
    C.check(sp.get("required") == ["deserved"], f"[{profile}] spec requires deserved")
    C.check(set(props) == {"parent", "namespaces", "deserved", "limit", "overQuotaWeight"},
            f"[{profile}] spec fields {sorted(props)}")
    bounds = queue_bounds()
    ns = props["namespaces"]
    C.check(ns.get("type") == "array" and ns.get("maxItems") == bounds["kMaxQueueNamespaces"],
            f"[{profile}] spec.namespaces: an array of at most kMaxQueueNamespaces ({bounds['kMaxQueueNamespaces']}) items")
    label = re.compile(ns["items"]["pattern"])
    C.check(ns["items"].get("maxLength") == 63 and all(label.search(x) for x in ("ml", "a", "team-1"))
            and not any(label.search(x) for x in ("", "ML", "a.b", "-a", "a-", "a_b")),
            f"[{profile}] spec.namespaces items must be DNS labels")
    w = props["overQuotaWeight"]
    C.check((w.get("type"), w.get("minimum"), w.get("maximum"), w.get("default")) ==
            ("integer", 0, bounds["kMaxQueueWeight"], 1),
            f"[{profile}] spec.overQuotaWeight: integer 0..kMaxQueueWeight ({bounds['kMaxQueueWeight']}), default 1")
    parent = re.compile(props["parent"]["pattern"])
    C.check(all(parent.search(x) for x in ("", "research", "dept.a")) and not any(parent.search(x) for x in ("Research", "a/b", "a..b")),
            f"[{profile}] spec.parent must be a queue name (DNS subdomain) or empty")
    for field in ("deserved", "limit"):
        q = props[field]
        C.check(q.get("x-kubernetes-int-or-string") is True and q.get("anyOf") == [{"type": "integer"}, {"type": "string"}],
                f"[{profile}] spec.{field}: a quantity string or an integer")
        C.check(q.get("minimum") == 0 and q.get("maximum") == bounds["kMaxQueueBytes"],
                f"[{profile}] spec.{field}: integers 0..kMaxQueueBytes ({bounds['kMaxQueueBytes']})")
        pat = re.compile(q.get("pattern", "^$"))
        bad_good = [x for x in QUANTITIES_GOOD if not pat.search(x)] + [x for x in QUANTITIES_BAD if pat.search(x)]
        C.check(not bad_good, f"[{profile}] spec.{field}'s quantity pattern misjudges {bad_good}")
    status = schema["properties"].get("status", {})
    C.check({"allocated", "fairShare", "pending", "conditions"} <= set(status.get("properties", {})),
            f"[{profile}] the status schema must declare what vramd writes (allocated, fairShare, pending, conditions)")


def check_agent(profile, docs, exp):
    """vramd-agent's DaemonSet (docs/agent.md): off by default, on in all-on;
    non-root, read-only mounts, hostPID, GPU nodes and their taints, the node
    name from the downward API, the token as a mounted file."""
    agents = find(docs, "DaemonSet")
    preset = exp.get("agent")
    if preset is None:
        C.check(not agents, f"[{profile}] the agent DaemonSet is off by default")
        return
    C.check(len(agents) == 1, f"[{profile}] expected the agent DaemonSet")
    for ds in agents:
        spec = pod_spec(ds)
        name = f'DaemonSet {ds["metadata"]["name"]}'
        c = spec["containers"][0]
        args = c.get("args", [])
        env = {e["name"]: e for e in c.get("env", [])}
        if preset == "enforce":
            # Issue 34: writing the kubelet's (root's) cgroup files: uid 0, every
            # capability dropped, read-only root; the host's cgroup v2 mount read-write
            # at --cgroup-root, /sys still read-only.
            psc, sc = spec.get("securityContext", {}), c.get("securityContext", {})
            C.check(psc.get("runAsUser") == 0 and psc.get("runAsNonRoot") is False,
                    f"[{profile}] {name}: writeCgroups runs as uid 0: {psc}")
            C.check(sc.get("capabilities") == {"drop": ["ALL"]} and sc.get("readOnlyRootFilesystem") is True
                    and sc.get("allowPrivilegeEscalation") is False and not sc.get("privileged", False),
                    f"[{profile}] {name}: no capability, read-only, unprivileged: {sc}")
            root = args[args.index("--cgroup-root") + 1] if "--cgroup-root" in args else ""
            src = mounted_path_source(spec, c, root + "/x") if root else None
            C.check(root == "/host/cgroup" and src and (src[0] or {}).get("hostPath", {}).get("path") == "/sys/fs/cgroup",
                    f"[{profile}] {name}: --cgroup-root {root!r} is the host's /sys/fs/cgroup: {src}")
            cfg = json.loads(one(docs, "ConfigMap", RELEASE, profile)["data"]["config.json"])
            C.check(cfg.get("enforce") == {"mode": "on", "node_modes": ["pool=training:dry-run"]},
                    f"[{profile}] vramd's enforce config from the values: {cfg.get('enforce')}")
        elif preset == "amd":
            # The DRM source reads other processes' fdinfo: uid 0 with
            # CAP_SYS_PTRACE and nothing else, still read-only and unescalated.
            psc, sc = spec.get("securityContext", {}), c.get("securityContext", {})
            C.check(psc.get("runAsUser") == 0 and psc.get("runAsNonRoot") is False,
                    f"[{profile}] {name}: the amd preset runs as uid 0: {psc}")
            C.check(sc.get("capabilities") == {"drop": ["ALL"], "add": ["SYS_PTRACE"]},
                    f"[{profile}] {name}: the amd preset adds CAP_SYS_PTRACE only: {sc.get('capabilities')}")
            C.check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
                    and not sc.get("privileged", False), f"[{profile}] {name}: still read-only and unprivileged")
            C.check(args[args.index("--source") + 1] == "drm" if "--source" in args else False,
                    f"[{profile}] {name}: the amd preset uses --source drm: {args}")
            C.check(not any(k.startswith("NVIDIA_") for k in env), f"[{profile}] {name}: no NVIDIA runtime env")
            C.check(spec.get("nodeSelector") == {"feature.node.kubernetes.io/amd-gpu": "true"},
                    f"[{profile}] {name}: the amd preset selects AMD GPU nodes: {spec.get('nodeSelector')}")
            C.check(any(t.get("key") == "amd.com/gpu" for t in spec.get("tolerations", [])),
                    f"[{profile}] {name}: must tolerate amd.com/gpu taints")
        else:
            check_security(profile, ds)
            # Issue 33 item 5: hostPID; a uid or group shared with another pod of the
            # chart would let the agent read its /proc/PID/environ and /proc/PID/root.
            psc = spec.get("securityContext", {})
            mine = {("uid", psc.get("runAsUser"))} | {("gid", psc.get(k)) for k in ("runAsGroup", "fsGroup") if k in psc} | \
                {("gid", g) for g in psc.get("supplementalGroups", [])}
            for w in find(docs, "Deployment") + find(docs, "StatefulSet"):
                opsc = pod_spec(w).get("securityContext", {})
                theirs = {("uid", opsc.get("runAsUser", 65532))} | \
                    {("gid", opsc.get(k)) for k in ("runAsGroup", "fsGroup") if k in opsc}
                C.check(not (mine & theirs), f"[{profile}] {name} shares {sorted(mine & theirs)} with {w['kind']} "
                        f"{w['metadata']['name']}: the agent needs a uid and groups of its own (hostPID)")
            C.check(spec.get("nodeSelector", {}).get("nvidia.com/gpu.present") == "true",
                    f"[{profile}] {name}: nodeSelector nvidia.com/gpu.present=true by default")
            C.check(any(t.get("key") == "nvidia.com/gpu" for t in spec.get("tolerations", [])),
                    f"[{profile}] {name}: must tolerate nvidia.com/gpu taints")
        C.check(spec.get("hostPID") is True, f"[{profile}] {name}: hostPID must be true (attribution)")
        C.check(spec.get("automountServiceAccountToken") is False, f"[{profile}] {name}: needs no API token")
        vols = volume_sources(spec)
        host_paths = {"/sys", "/sys/fs/cgroup"} if preset == "enforce" else {"/sys"}
        for v in vols.values():
            if "hostPath" in v:
                C.check(v["hostPath"]["path"] in host_paths, f"[{profile}] {name}: only {sorted(host_paths)} from the host, not {v['hostPath']['path']}")
        writable = [m for m in c.get("volumeMounts", []) if m.get("readOnly") is not True]
        C.check([m["mountPath"] for m in writable] == (["/host/cgroup"] if preset == "enforce" else []),
                f"[{profile}] {name}: every mount read-only (but the cgroup tree with writeCgroups): {writable}")
        C.check("nvidia.com/gpu" not in json.dumps(c.get("resources", {})), f"[{profile}] {name}: must take no GPU")
        C.check(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
                f"[{profile}] {name}: NODE_NAME from the downward API")
        C.check(c.get("command") == ["/usr/bin/vramd-agent"], f"[{profile}] {name}: runs /usr/bin/vramd-agent")
        server = args[args.index("--server") + 1] if "--server" in args else ""
        C.check(server.startswith("https://" if exp["tls"] else "http://"), f"[{profile}] {name}: --server {server!r}")
        # Issue 33 item 1: the agent's credential is its pod's own projected token for
        # vramd's audience, under a ServiceAccount of its own that vramd names as the reporter.
        C.check("--token-file" in args, f"[{profile}] {name}: the agent presents a token")
        if "--token-file" in args:
            src = mounted_path_source(spec, c, args[args.index("--token-file") + 1])
            projected = (src[0] or {}).get("projected", {}).get("sources", []) if src else []
            C.check(len(projected) == 1 and projected[0].get("serviceAccountToken", {}).get("audience") == "vramd",
                    f"[{profile}] {name}: the token file is a projected ServiceAccount token for audience vramd: {src}")
        sa = spec.get("serviceAccountName", "")
        C.check(sa == f"{RELEASE}-agent" and find(docs, "ServiceAccount", sa),
                f"[{profile}] {name}: runs as its own ServiceAccount {RELEASE}-agent, is {sa!r}")
        cfg = json.loads(one(docs, "ConfigMap", RELEASE, profile)["data"]["config.json"])
        C.check(cfg.get("auth", {}).get("agent_service_account") == f"{NAMESPACE}/{sa}" and cfg["auth"].get("identities") is True,
                f"[{profile}] {name}: vramd takes usage from {NAMESPACE}/{sa} only: {cfg.get('auth')}")
        for b in find(docs, "RoleBinding") + find(docs, "ClusterRoleBinding"):
            C.check(not any(s.get("name") == sa for s in b.get("subjects", [])),
                    f"[{profile}] {name}: the agent's ServiceAccount has no RBAC, bound by {b['metadata']['name']}")
        if exp["tls"]:
            C.check("--cacert" in args, f"[{profile}] {name}: must verify vramd with --cacert")


def selects(selector, labels):
    """Whether a matchLabels selector selects pods with `labels` (and is not empty)."""
    ml = (selector or {}).get("matchLabels", {})
    return bool(ml) and set(selector) <= {"matchLabels"} and all(labels.get(k) == v for k, v in ml.items())


def check_ensure_secrets(profile, docs, exp, spec, vramd):
    """GitOps-safe secrets: the chart renders no Secret (nothing generated at render
    time, no `lookup`); the Job `vramd ensure-secrets` (a pre-install/pre-upgrade
    hook) creates exactly the missing ones under a ServiceAccount of its own, with
    `create` and `get` on exactly those names; vramd's pods have no init container
    and wait for the Secrets (no volume is optional). Issue 33 item 6: vramd's own
    ServiceAccount has no right on Secrets (check_no_secret_rights)."""
    C.check(not find(docs, "Secret"), f"[{profile}] the chart must render no Secret (ensure-secrets creates them)")
    want = exp["ensure"]
    C.check(not spec.get("initContainers"), f"[{profile}] vramd has no init container (ensure-secrets is a Job)")
    jobs = [j for j in find(docs, "Job") if j["metadata"]["name"] == f"{RELEASE}-ensure-secrets"]
    sa_name = f"{RELEASE}-ensure-secrets"
    if not want:
        C.check(not jobs, f"[{profile}] no ensure-secrets Job when every Secret is given")
    elif C.check(len(jobs) == 1, f"[{profile}] expected the Job {RELEASE}-ensure-secrets"):
        job = jobs[0]
        ann = job["metadata"].get("annotations", {})
        C.check(ann.get("helm.sh/hook") == "pre-install,pre-upgrade",
                f"[{profile}] the ensure-secrets Job must be a pre-install,pre-upgrade hook: {ann}")
        jspec = pod_spec(job)
        check_security(profile, job)
        C.check(jspec.get("serviceAccountName") == sa_name and sa_name != spec["serviceAccountName"],
                f"[{profile}] the ensure-secrets Job runs as its own ServiceAccount {sa_name}, not vramd's: "
                f"{jspec.get('serviceAccountName')}")
        C.check(len(find(docs, "ServiceAccount", sa_name)) == 1, f"[{profile}] the chart creates the ServiceAccount {sa_name}")
        init = jspec["containers"][0]
        C.check(init["image"] == vramd["image"], f"[{profile}] ensure-secrets must run vramd's image")
        args = init.get("args", [])
        C.check(args[:1] == ["ensure-secrets"] and "command" not in init, f"[{profile}] ensure-secrets args: {args}")
        flags = dict(zip(args[1::2], args[2::2]))
        C.check(len(args) % 2 == 1 and flags.get("--namespace") == NAMESPACE, f"[{profile}] ensure-secrets --namespace {NAMESPACE}: {args}")
        got = {k[2:]: v for k, v in flags.items() if k.endswith("-secret")}
        C.check(got == want, f"[{profile}] ensure-secrets creates {got}, expected {want}")
        if "tls-secret" in want:
            names = flags.get("--dns-names", "").split(",")
            C.check({f"{RELEASE}.{NAMESPACE}.svc", "localhost"} <= set(names),
                    f"[{profile}] --dns-names must name the Service and localhost: {names}")
        else:
            C.check("--dns-names" not in flags, f"[{profile}] --dns-names only with --tls-secret")
    # Secret volumes: never optional (the pods wait until the Job made them).
    for w in find(docs, "Deployment") + find(docs, "StatefulSet") + find(docs, "DaemonSet"):
        for v in pod_spec(w).get("volumes", []):
            sec = v.get("secret")
            if sec:
                C.check(not sec.get("optional"),
                        f"[{profile}] {w['metadata']['name']} volume {v['name']} (Secret {sec['secretName']}) must not be optional")
    roles = [r for r in find(docs, "Role") if r["metadata"]["name"] == f"{RELEASE}-ensure-secrets"]
    if not want:
        C.check(not roles, f"[{profile}] no ensure-secrets Role without ensure-secrets")
        return
    if not C.check(len(roles) == 1, f"[{profile}] expected the Role {RELEASE}-ensure-secrets"):
        return
    granted = set()
    for r in roles[0]["rules"]:
        for res in r.get("resources", []):
            for verb in r.get("verbs", []):
                granted.add((tuple(r.get("apiGroups", [])), res, verb, tuple(sorted(r.get("resourceNames", [])))))
    # One POST per Secret; on a 409 one GET of that Secret, to check its labels and keys.
    expected = {(("",), "secrets", "create", ()), (("",), "secrets", "get", tuple(sorted(want.values())))}
    C.check(granted == expected, f"[{profile}] ensure-secrets Role grants {sorted(granted)}, expected exactly {sorted(expected)}")
    bindings = [b for b in find(docs, "RoleBinding") if b["roleRef"]["name"] == f"{RELEASE}-ensure-secrets"]
    C.check(len(bindings) == 1 and bindings[0]["roleRef"]["kind"] == "Role"
            and bindings[0]["subjects"] == [{"kind": "ServiceAccount", "name": sa_name, "namespace": NAMESPACE}],
            f"[{profile}] the ensure-secrets Role must be bound to the ServiceAccount {sa_name} only")
    for d in roles + bindings + find(docs, "ServiceAccount", sa_name):
        C.check(d["metadata"].get("annotations", {}).get("helm.sh/hook") == "pre-install,pre-upgrade",
                f"[{profile}] {d['kind']} {sa_name} must be a hook like its Job (it exists before the Job runs)")


def ns_selected(selector, labels):
    """Whether a LabelSelector (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist) selects `labels`."""
    if not all(labels.get(k) == v for k, v in (selector or {}).get("matchLabels", {}).items()):
        return False
    for e in (selector or {}).get("matchExpressions", []):
        k, op, vals = e["key"], e["operator"], e.get("values", [])
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and k in labels and labels[k] in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def hook_rbac(docs, kind, name):
    """(apiGroup, resource, verb, resourceNames) granted by the Role/ClusterRole `name`."""
    granted = set()
    for r in find(docs, kind, name):
        for rule in r["rules"]:
            for g in rule.get("apiGroups", []):
                for res in rule.get("resources", []):
                    for v in rule.get("verbs", []):
                        granted.add((g, res, v, tuple(sorted(rule.get("resourceNames", [])))))
    return granted


def check_admission(profile, docs, exp, dep, svc, config):
    """Issue 34 part A, wired by the chart: vramd's config, its own listener and
    Service port, the two webhook configurations (scoped to labelled namespaces,
    never kube-system nor the release's, paths, failurePolicy, timeout, the
    Service port), no caBundle rendered, and where the CA comes from: cert-manager's
    injector, or the post-install hook with RBAC limited by resourceNames."""
    mut = find(docs, "MutatingWebhookConfiguration")
    val = find(docs, "ValidatingWebhookConfiguration")
    job_name = f"{RELEASE}-webhook-ca"
    if not exp["admission"]:
        C.check(not mut and not val and "admission" not in config and not find(docs, "Job", job_name),
                f"[{profile}] admission off: no webhook configuration, no admission config, no CA Job")
        return
    if not C.check(len(mut) == 1 and len(val) == 1 and mut[0]["metadata"]["name"] == RELEASE
                   and val[0]["metadata"]["name"] == RELEASE,
                   f"[{profile}] expected one Mutating and one ValidatingWebhookConfiguration named {RELEASE}"):
        return
    adm = config.get("admission", {})
    c = pod_spec(dep)["containers"][0]
    cports = [p for p in c.get("ports", []) if p.get("name") == "admission"]
    sports = [p for p in svc["spec"]["ports"] if p.get("name") == "admission"]
    port = cports[0]["containerPort"] if cports else None
    C.check(len(cports) == 1 and adm.get("listen", "").endswith(f":{port}")
            and port not in [p["containerPort"] for p in c["ports"] if p.get("name") != "admission"],
            f"[{profile}] admission.listen {adm.get('listen')} must be the container port `admission`, apart from the others")
    C.check(len(sports) == 1 and sports[0]["port"] == port and sports[0]["targetPort"] == "admission",
            f"[{profile}] the Service must serve the admission port {port} to targetPort admission: {svc['spec']['ports']}")
    sa = pod_spec(dep)["serviceAccountName"]
    sched = one(docs, "Deployment", f"{RELEASE}-scheduler", profile) if find(docs, "Deployment", f"{RELEASE}-scheduler") else None
    want_sched = "vramd-scheduler" if sched else ""
    C.check(adm.get("enabled") is True and adm.get("vramd_users") == f"system:serviceaccount:{NAMESPACE}:{sa}"
            and adm.get("scheduler_name", "") == want_sched,
            f"[{profile}] config admission: enabled, vramd_users = vramd's ServiceAccount, scheduler_name "
            f"{want_sched!r} (the chart's scheduler, empty for wiring b): {adm}")

    paths = {"mutate.vramd.io": "/admission/mutate", "validate.vramd.io": "/admission/validate",
             "validate-direct-bind.vramd.io": "/admission/validate-direct-bind", "queues.vramd.io": "/admission/validate"}
    hooks = {h["name"]: (cfg["kind"], h) for cfg in (mut[0], val[0]) for h in cfg.get("webhooks", [])}
    C.check(set(hooks) == set(paths), f"[{profile}] webhooks {sorted(hooks)} != {sorted(paths)}")
    team = {"kubernetes.io/metadata.name": "team-a", "vramd.io/admission": "enabled"}
    opted = dict(team, **{"vramd.io/direct-bind": "allowed"})
    never = [{"kubernetes.io/metadata.name": n, "vramd.io/admission": "enabled", "vramd.io/direct-bind": d}
             for n in ("kube-system", NAMESPACE) for d in ("allowed", "no")]
    for name, (kind, h) in hooks.items():
        where = f"[{profile}] {kind} webhook {name}"
        cc = h.get("clientConfig", {})
        C.check("caBundle" not in cc and "url" not in cc,
                f"{where}: no caBundle rendered (the hook or cert-manager writes it; an upgrade keeps it) and no url")
        C.check(cc.get("service") == {"namespace": NAMESPACE, "name": svc["metadata"]["name"], "path": paths.get(name),
                                      "port": port},
                f"{where}: clientConfig.service must be {svc['metadata']['name']}.{NAMESPACE}:{port}{paths.get(name)}: {cc}")
        C.check(h.get("sideEffects") == "None" and "v1" in h.get("admissionReviewVersions", []),
                f"{where}: sideEffects None, admissionReviewVersions with v1")
        C.check(h.get("timeoutSeconds") == 5, f"{where}: timeoutSeconds 5 (documented), is {h.get('timeoutSeconds')}")
        rules = h.get("rules", [])
        if name == "queues.vramd.io":
            C.check(h.get("failurePolicy") == "Ignore", f"{where}: failurePolicy Ignore (the leader checks queues again)")
            C.check(rules == [{"apiGroups": ["vramd.io"], "apiVersions": ["v1alpha1"], "operations": ["CREATE", "UPDATE"],
                               "resources": ["vramqueues"], "scope": "Cluster"}], f"{where}: rules {rules}")
            continue
        C.check(h.get("failurePolicy") == "Fail", f"{where}: failurePolicy Fail (labelled namespaces only)")
        ops = ["CREATE"] if name == "mutate.vramd.io" else ["CREATE", "UPDATE"]
        C.check(rules == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ops, "resources": ["pods"],
                           "scope": "Namespaced"}], f"{where}: rules must be pods {ops}: {rules}")
        sel = h.get("namespaceSelector")
        C.check(bool(sel) and sel.get("matchLabels", {}).get("vramd.io/admission") == "enabled",
                f"{where}: a namespaceSelector requiring vramd.io/admission=enabled: {sel}")
        C.check({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NAMESPACE]}
                in sel.get("matchExpressions", []), f"{where}: kube-system and {NAMESPACE} excluded by name: {sel}")
        for labels in never + [{"kubernetes.io/metadata.name": "team-b"}]:
            C.check(not ns_selected(sel, labels), f"{where} selects namespace {labels}")
        if name == "validate-direct-bind.vramd.io":
            C.check(ns_selected(sel, opted) and not ns_selected(sel, team), f"{where}: only opted-out labelled namespaces")
        elif name == "validate.vramd.io":
            C.check(ns_selected(sel, team) and not ns_selected(sel, opted),
                    f"{where}: labelled namespaces but the opted-out (validate-direct-bind's)")
        else:
            C.check(ns_selected(sel, team) and ns_selected(sel, opted), f"{where}: every labelled namespace")

    ca = exp["admission"]
    jobs = find(docs, "Job", job_name)
    if ca == "certManager":
        for cfg in (mut[0], val[0]):
            C.check(cfg["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from") == f"{NAMESPACE}/{RELEASE}-tls",
                    f"[{profile}] {cfg['kind']}: cert-manager.io/inject-ca-from {NAMESPACE}/{RELEASE}-tls")
        C.check(len(find(docs, "Certificate", f"{RELEASE}-tls")) == 1, f"[{profile}] the injector's Certificate {RELEASE}-tls")
        C.check(not jobs, f"[{profile}] no CA Job with cert-manager")
        return
    for cfg in (mut[0], val[0]):
        C.check("cert-manager.io/inject-ca-from" not in cfg["metadata"].get("annotations", {}),
                f"[{profile}] {cfg['kind']}: no cert-manager annotation without cert-manager")
    if not C.check(len(jobs) == 1, f"[{profile}] expected the Job {job_name}"):
        return
    job = jobs[0]
    C.check(job["metadata"].get("annotations", {}).get("helm.sh/hook") == "post-install,post-upgrade",
            f"[{profile}] {job_name} must be a post-install,post-upgrade hook (the configurations exist then)")
    check_security(profile, job)
    js = pod_spec(job)
    jc = js["containers"][0]
    C.check(jc["image"] == c["image"] and "command" not in jc and jc.get("args") == [
        "ensure-secrets", "--namespace", NAMESPACE, "--ca-bundle-secret", ca, "--mutating-webhook", RELEASE,
        "--validating-webhook", RELEASE], f"[{profile}] {job_name} args: {jc.get('args')}")
    C.check(js.get("serviceAccountName") == job_name and job_name != sa,
            f"[{profile}] {job_name} runs as its own ServiceAccount {job_name}")
    C.check(hook_rbac(docs, "Role", job_name) == {("", "secrets", "get", (ca,))},
            f"[{profile}] {job_name} Role: exactly get on secret {ca}: {hook_rbac(docs, 'Role', job_name)}")
    want = {("admissionregistration.k8s.io", r, v, (RELEASE,)) for r in
            ("mutatingwebhookconfigurations", "validatingwebhookconfigurations") for v in ("get", "patch")}
    C.check(hook_rbac(docs, "ClusterRole", job_name) == want,
            f"[{profile}] {job_name} ClusterRole: exactly get, patch on the two configurations by resourceNames: "
            f"{hook_rbac(docs, 'ClusterRole', job_name)}")
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        b = find(docs, kind, job_name)
        C.check(len(b) == 1 and b[0]["roleRef"]["name"] == job_name
                and b[0]["subjects"] == [{"kind": "ServiceAccount", "name": job_name, "namespace": NAMESPACE}],
                f"[{profile}] {kind} {job_name} binds its role to its ServiceAccount only")
    for kind in ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"):
        for d in find(docs, kind, job_name):
            C.check(d["metadata"].get("annotations", {}).get("helm.sh/hook") == "post-install,post-upgrade"
                    and "hook-succeeded" in d["metadata"]["annotations"].get("helm.sh/hook-delete-policy", ""),
                    f"[{profile}] {kind} {job_name} must be a hook deleted once it succeeded")


def check_no_secret_rights(profile, docs, sa):
    """Issue 33 item 6: no Role or ClusterRole bound to vramd's ServiceAccount
    grants anything on Secrets (a compromised vramd cannot create, read or plant one)."""
    roles = {(d["kind"], d["metadata"]["name"]): d for d in find(docs, "Role") + find(docs, "ClusterRole")}
    bound = 0
    for b in find(docs, "RoleBinding") + find(docs, "ClusterRoleBinding"):
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa and s.get("namespace") == NAMESPACE
                   for s in b.get("subjects", [])):
            continue
        bound += 1
        role = roles.get((b["roleRef"]["kind"], b["roleRef"]["name"]))
        if not C.check(role is not None, f"[{profile}] {b['kind']} {b['metadata']['name']} binds a role the chart does not render"):
            continue
        for r in role.get("rules", []):
            res = r.get("resources", [])
            C.check(not {"mutatingwebhookconfigurations", "validatingwebhookconfigurations"} & set(res),
                    f"[{profile}] vramd's ServiceAccount {sa} gets {r.get('verbs')} on {res}: only the post-install "
                    f"hook's own ServiceAccount may patch the webhook configurations")
            C.check("secrets" not in res and "*" not in res,
                    f"[{profile}] vramd's ServiceAccount {sa} gets {r.get('verbs')} on {res} through "
                    f"{b['kind']} {b['metadata']['name']}: it must have no right on Secrets")
    C.check(bound >= 1, f"[{profile}] vramd's ServiceAccount should be bound to its ClusterRole")


def check_vramd_secret_files(profile, spec, container):
    """Issue 33 item 6: vramd mounts only the keys it reads. Every Secret volume of
    its container lists its items; the TLS Secret gives tls.crt, tls.key and ca.crt,
    never client.key or client.crt (the scheduler's client certificate)."""
    vols = volume_sources(spec)
    files = []
    for m in container.get("volumeMounts", []):
        sec = vols.get(m["name"], {}).get("secret")
        if not sec:
            continue
        items = sec.get("items")
        if not C.check(bool(items), f"[{profile}] vramd's Secret volume {m['name']} must list its items (only the keys vramd reads)"):
            continue
        files += [(m["name"], it["key"], it["path"]) for it in items]
    for name, key, path in files:
        C.check(key not in ("client.key", "client.crt") and not path.startswith("client."),
                f"[{profile}] vramd mounts {key} from volume {name}: the scheduler's client certificate is not vramd's")
    return files


def check_network_policies(profile, docs, exp, dep, extender_port):
    """vramd: the extender port only from the vramd-scheduler pods, the API port from
    the release namespace, monitoring and labelled namespaces, nothing else;
    Valkey: only from vramd's pods."""
    vramd_labels = dep["spec"]["template"]["metadata"]["labels"]
    sched = one(docs, "Deployment", f"{RELEASE}-scheduler", profile)
    sched_labels = sched["spec"]["template"]["metadata"]["labels"] if sched else {}
    np = one(docs, "NetworkPolicy", RELEASE, profile)
    if np:
        sp = np["spec"]
        C.check(selects(sp["podSelector"], vramd_labels), f"[{profile}] NetworkPolicy {RELEASE} must select vramd's pods")
        C.check(sp.get("policyTypes") == ["Ingress"], f"[{profile}] NetworkPolicy {RELEASE}: policyTypes [Ingress]")
        rules = {}
        for rule in sp.get("ingress", []):
            ports = rule.get("ports", [])
            C.check(len(ports) == 1, f"[{profile}] every ingress rule must name exactly one port (no allow-all): {rule}")
            for p in ports:
                rules[p["port"]] = rule.get("from")
        want_ports = {extender_port, "api"} | ({"admission"} if exp["admission"] else set())
        C.check(set(rules) == want_ports, f"[{profile}] ingress only to {sorted(want_ports)}: {sorted(rules)}")
        if exp["admission"]:
            # The webhook's own port: networkPolicy.webhookFrom, by default any source
            # (the API server's address depends on the cluster), and nothing but
            # /admission/* is served there (tests/system/api_listen_test.py).
            C.check(rules.get("admission") is None,
                    f"[{profile}] the admission port admits networkPolicy.webhookFrom (default: any source): {rules.get('admission')}")
        ext_from = rules.get(extender_port) or []
        C.check(len(ext_from) == 1 and set(ext_from[0]) == {"podSelector"} and selects(ext_from[0]["podSelector"], sched_labels)
                and not selects(ext_from[0]["podSelector"], vramd_labels),
                f"[{profile}] the extender port must admit only the vramd-scheduler pods: {ext_from}")
        # Issue 33 item 3: the release's namespace (vramd, agents, scheduler), monitoring,
        # and namespaces an admin labelled; never every pod of the cluster.
        C.check(rules.get("api") == [{"podSelector": {}},
                                     {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
                                     {"namespaceSelector": {"matchLabels": {"vramd.io/api-access": "true"}}}],
                f"[{profile}] the api port: the release namespace, monitoring and labelled namespaces, is {rules.get('api')}")
    vk = find(docs, "NetworkPolicy", f"{RELEASE}-valkey")
    if exp["bundled"]:
        sts = find(docs, "StatefulSet")
        if C.check(len(vk) == 1 and len(sts) == 1, f"[{profile}] expected the Valkey NetworkPolicy"):
            sp = vk[0]["spec"]
            C.check(selects(sp["podSelector"], sts[0]["spec"]["template"]["metadata"]["labels"]),
                    f"[{profile}] the Valkey NetworkPolicy must select Valkey's pods")
            ing = sp.get("ingress", [])
            C.check(len(ing) == 1 and ing[0].get("ports") == [{"port": "valkey", "protocol": "TCP"}]
                    and len(ing[0].get("from", [])) == 1 and set(ing[0]["from"][0]) == {"podSelector"}
                    and selects(ing[0]["from"][0]["podSelector"], vramd_labels)
                    and not selects(ing[0]["from"][0]["podSelector"], sched_labels),
                    f"[{profile}] Valkey must admit only vramd's pods on its port: {ing}")
    else:
        C.check(not vk, f"[{profile}] no Valkey NetworkPolicy without the bundled Valkey")


def check_scheduler_config(profile, ksc, exp, scheme, port):
    C.check(ksc.get("kind") == "KubeSchedulerConfiguration", f"[{profile}] scheduler config kind")
    C.check(ksc.get("apiVersion") == exp["api"], f"[{profile}] scheduler config apiVersion {ksc.get('apiVersion')} != {exp['api']}")
    C.check(ksc.get("percentageOfNodesToScore") == 100, f"[{profile}] percentageOfNodesToScore must be 100")
    C.check(ksc.get("leaderElection", {}).get("leaderElect") is exp["leader"], f"[{profile}] leaderElect must be {exp['leader']}")
    profiles = ksc.get("profiles", [])
    C.check(len(profiles) == 1 and profiles[0].get("schedulerName") == "vramd-scheduler", f"[{profile}] one profile named vramd-scheduler")
    disabled = [p["name"] for p in profiles[0].get("plugins", {}).get("postFilter", {}).get("disabled", [])] if profiles else []
    C.check(("DefaultPreemption" in disabled) == exp["preemption_off"], f"[{profile}] DefaultPreemption disabled iff asked")
    check_extender(profile, ksc.get("extenders", []), exp, scheme, port)


def check_extender(profile, extenders, exp, scheme, port, url=None):
    if not C.check(len(extenders) == 1, f"[{profile}] exactly one extender expected"):
        return
    e = extenders[0]
    want_url = url or f"{scheme}://{RELEASE}.{NAMESPACE}.svc:{port}/scheduler"
    C.check(e.get("urlPrefix") == want_url, f"[{profile}] urlPrefix {e.get('urlPrefix')} != {want_url}")
    for k, v in (("filterVerb", "filter"), ("prioritizeVerb", "prioritize"), ("bindVerb", "bind"),
                 ("nodeCacheCapable", True), ("ignorable", False)):
        C.check(e.get(k) == v, f"[{profile}] extender {k} must be {v!r}, is {e.get(k)!r}")
    C.check(isinstance(e.get("weight"), int) and e["weight"] > 0, f"[{profile}] extender weight must be > 0")
    C.check(re.match(r"^\d+(ms|s|m)$", str(e.get("httpTimeout", ""))) is not None, f"[{profile}] httpTimeout must be a duration")
    C.check(e.get("managedResources") == [{"name": "vramd.io/vram", "ignoredByScheduler": True}],
            f"[{profile}] managedResources must be vramd.io/vram with ignoredByScheduler")
    C.check(e.get("enableHTTPS") is exp["tls"], f"[{profile}] enableHTTPS must be {exp['tls']}")
    if exp["tls"]:
        tls = e.get("tlsConfig", {})
        C.check(bool(tls.get("caFile")) and not tls.get("insecure"), f"[{profile}] TLS must verify the server with a CA file")
        C.check(tls.get("serverName") == f"{RELEASE}.{NAMESPACE}.svc", f"[{profile}] tlsConfig.serverName")
        C.check(("certFile" in tls and "keyFile" in tls) == exp["client_auth"], f"[{profile}] client certificate iff clientAuth")


def config_api_for(kube):
    """The KubeSchedulerConfiguration API a kube-scheduler of version `kube` reads best."""
    minor = tuple(int(x) for x in kube.split(".")[:2])
    if minor < (1, 22):
        return API + "v1beta1"
    if minor < (1, 23):
        return API + "v1beta2"
    if minor < (1, 25):
        return API + "v1beta3"
    return API + "v1"


def check_notes(profile, path, exp, out_dir):
    """NOTES.txt: vramctl (not curl) with the TLS flags, and the existing-scheduler
    snippet in the config API of the cluster's version."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    C.check("curl " not in text, f"[{profile}] NOTES.txt must use vramctl, not curl")
    if exp["tls"]:
        C.check(re.search(r"vramctl --server https://localhost:8081 --cacert \S+ nodes", text) is not None,
                f"[{profile}] NOTES.txt must show vramctl --server https://localhost:8081 --cacert ... nodes")
    if exp["api_token"]:
        C.check("--token-file" in text, f"[{profile}] NOTES.txt must show vramctl --token-file")
    api = config_api_for(exp["kube"])
    m = re.search(r"^    apiVersion: (kubescheduler\.config\.k8s\.io/\S+)\n(?:    .*\n|\n(?=    ))*", text, re.M)
    if not C.check(m is not None, f"[{profile}] NOTES.txt lacks the extender snippet"):
        return
    C.check(m.group(1) == api, f"[{profile}] NOTES.txt snippet uses {m.group(1)}, expected {api} for {exp['kube']}")
    C.check(re.search(r"^  Kubernetes " + re.escape(exp["kube"]) + r" \(this cluster\)", text, re.M) is not None,
            f"[{profile}] NOTES.txt must name the cluster's version {exp['kube']}")
    block = "\n".join(line[4:] for line in m.group(0).splitlines())
    try:
        ksc = yaml.safe_load(block)
    except yaml.YAMLError as err:
        C.check(False, f"[{profile}] NOTES.txt snippet is not YAML: {err}")
        return
    with open(os.path.join(out_dir, f"notes-extender.{profile}.yaml"), "w") as f:
        f.write(block + "\n")
    C.check(ksc.get("kind") == "KubeSchedulerConfiguration", f"[{profile}] NOTES snippet kind")
    old = exp["kube"].startswith(("1.19.", "1.20.", "1.21."))
    disabled = [p["name"] for pr in ksc.get("profiles", []) for p in pr.get("plugins", {}).get("postFilter", {}).get("disabled", [])]
    C.check(("DefaultPreemption" in disabled) == old, f"[{profile}] NOTES snippet disables DefaultPreemption iff 1.19-1.21")
    scheme = "https" if exp["tls"] else "http"
    port = 8443 if exp["tls"] else 8080
    check_extender(f"{profile} NOTES", ksc.get("extenders", []), exp, scheme, port)


def check_alerts(profile, rule):
    with open(os.path.join(ROOT, "docs", "operations.md"), encoding="utf-8") as f:
        ops = f.read()
    anchors = {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", ops, re.M)}
    alerts = set()
    for g in rule["spec"]["groups"]:
        for r in g["rules"]:
            if "alert" not in r:
                continue
            a = r["alert"]
            alerts.add(a)
            url = r.get("annotations", {}).get("runbook_url", "")
            C.check(url.endswith("#" + a.lower()), f"[{profile}] {a}: runbook_url must end in #{a.lower()}, is {url}")
            C.check(a.lower() in anchors, f"[{profile}] {a}: docs/operations.md has no section '{a}'")
            C.check(r.get("labels", {}).get("severity") in ("critical", "warning", "info"), f"[{profile}] {a}: needs a severity")
            C.check(bool(r.get("annotations", {}).get("summary")) and bool(r.get("annotations", {}).get("description")),
                    f"[{profile}] {a}: needs summary and description")
    # The alerts the issue asks for.
    for a in ("VramdGpuSaturationHigh", "VramdGpuRiskHigh", "VramdGpuUsageAboveAllocation", "VramdClusterFreeVramLow",
              "VramdPodsPendingOnVram", "VramdPhantomVramHeld", "VramdExtenderErrors", "VramdExtenderLatencyHigh",
              "VramdValkeyUnreachable", "VramdGpuLockHeldTooLong"):
        C.check(a in alerts, f"[{profile}] the PrometheusRule lacks {a}")


def check_metrics_listed(docs_by_profile):
    used_file = os.path.join(HERE, "metrics-used.txt")
    with open(used_file, encoding="utf-8") as f:
        listed = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    named = {}
    for profile, docs in docs_by_profile.items():
        for r in find(docs, "PrometheusRule"):
            for g in r["spec"]["groups"]:
                for rule in g["rules"]:
                    for n in metric_names(rule["expr"]):
                        named.setdefault(n, f"PrometheusRule {rule.get('alert') or rule.get('record')}")
    with open(os.path.join(CHART, "files", "vramd-dashboard.json"), encoding="utf-8") as f:
        dash = json.load(f)

    def walk(o, where):
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("expr", "definition") and isinstance(v, str):
                    for n in metric_names(v):
                        named.setdefault(n, f"dashboard panel {where}")
                elif k == "query" and isinstance(v, str):
                    for n in metric_names(v):
                        named.setdefault(n, f"dashboard variable {where}")
                else:
                    walk(v, o.get("title", where) if isinstance(o.get("title"), str) else where)
        elif isinstance(o, list):
            for x in o:
                walk(x, where)

    walk(dash, "")
    for n, where in sorted(named.items()):
        C.check(n in listed, f"{where} uses {n}, which tests/deploy/metrics-used.txt does not list")
    for n in sorted(listed - set(named)):
        C.check(False, f"tests/deploy/metrics-used.txt lists {n}, which no rule or dashboard panel uses")
    print(f"check_manifests: {len(named)} vramd metric names used by rules and dashboard, all listed")


def main(argv):
    out_dir, vramd_bin, inputs = None, None, []
    i = 0
    while i < len(argv):
        if argv[i] == "--out":
            out_dir = argv[i + 1]
            i += 2
        elif argv[i] == "--vramd-bin":
            vramd_bin = argv[i + 1]
            i += 2
        else:
            inputs.append(argv[i])
            i += 1
    if not out_dir or not inputs:
        print(__doc__, file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    cfg_keys = known_config_keys(vramd_bin)
    if cfg_keys is None:
        print("check_manifests: note: no vramd binary; config keys are not checked against --help-config")
    docs_by_profile = {}
    for spec in inputs:
        profile, paths = spec.split("=", 1)
        rendered, _, notes = paths.partition(",")
        if profile not in PROFILES:
            print(f"check_manifests: unknown profile {profile}", file=sys.stderr)
            return 2
        try:
            docs = load_docs(rendered)
        except yaml.YAMLError as err:
            C.check(False, f"[{profile}] rendered manifests do not parse: {err}")
            continue
        docs_by_profile[profile] = docs
        before = C.failures
        check_profile(profile, docs, PROFILES[profile], cfg_keys, out_dir, notes or None)
        print(f"check_manifests: [{profile}] {len(docs)} objects, {'ok' if C.failures == before else 'FAILED'}")
    check_metrics_listed(docs_by_profile)
    print(f"check_manifests: {C.passed} checks passed, {C.failures} failed")
    return 1 if C.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
