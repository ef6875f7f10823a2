#!/usr/bin/env python3
"""Schema check of a KubeSchedulerConfiguration for the API versions the
testbed's kube-scheduler (1.20.2) cannot load: v1beta2, v1beta3 and v1 (and
v1beta1 too, though helm_test.sh also runs the real 1.20.2 on those).

  check_scheduler_config.py [--expect-api API] CONFIG.yaml ...
  check_scheduler_config.py --self-test

kube-scheduler decodes its config file strictly: an unknown or misplaced field
is an error ("strict decoding error: unknown field"), and then validates it
(pkg/scheduler/apis/config/validation). This checker knows, per API version,
the fields each object accepts and the validation rules an extender entry
must pass, from the Kubernetes sources:

  staging/src/k8s.io/kube-scheduler/config/{v1beta2,v1beta3,v1}/types.go
  (KubeSchedulerConfiguration, KubeSchedulerProfile, Plugins, PluginSet,
  Plugin, PluginConfig, Extender, ExtenderTLSConfig, ExtenderManagedResource),
  k8s.io/component-base/config/v1alpha1 (LeaderElectionConfiguration,
  ClientConnectionConfiguration, DebuggingConfiguration, inlined), and
  pkg/scheduler/apis/config/validation/validation.go (ValidateKubeScheduler
  Configuration, validateExtenders).

Version facts used:
  - v1beta1: 1.19-1.22. v1beta2: 1.22-1.27. v1beta3: 1.23-1.28. v1: 1.25+.
  - healthzBindAddress/metricsBindAddress exist up to v1beta2, not in v1beta3/v1.
  - plugins.multiPoint exists from v1beta3; plugins.preEnqueue only in v1 (1.26+);
    profiles[].percentageOfNodesToScore only in v1 (1.25+); delayCacheUntilActive
    only in v1 (1.26+). Fields the chart never renders are accepted where any
    release of that API version has them.
  - Extender: weight > 0 when prioritizeVerb is set; at most one extender with
    bindVerb; managedResources names unique and valid resource names;
    httpTimeout a Go duration; percentageOfNodesToScore 0..100.

Exits 1 and prints every problem when a configuration fails.
"""
import re
import sys

import yaml

GROUP = "kubescheduler.config.k8s.io/"
APIS = ("v1beta1", "v1beta2", "v1beta3", "v1")

LEADER = {"leaderElect": bool, "leaseDuration": "duration", "renewDeadline": "duration", "retryPeriod": "duration",
          "resourceLock": str, "resourceName": str, "resourceNamespace": str}
CLIENT = {"kubeconfig": str, "acceptContentTypes": str, "contentType": str, "qps": (int, float), "burst": int}
TLS = {"insecure": bool, "serverName": str, "certFile": str, "keyFile": str, "caFile": str,
       "certData": str, "keyData": str, "caData": str}
MANAGED = {"name": str, "ignoredByScheduler": bool}
EXTENDER = {"urlPrefix": str, "filterVerb": str, "preemptVerb": str, "prioritizeVerb": str, "weight": int,
            "bindVerb": str, "enableHTTPS": bool, "tlsConfig": TLS, "httpTimeout": "duration",
            "nodeCacheCapable": bool, "managedResources": [MANAGED], "ignorable": bool}
PLUGIN = {"name": str, "weight": int}
PLUGIN_SET = {"enabled": [PLUGIN], "disabled": [PLUGIN]}
POINTS = ["queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "permit",
          "preBind", "bind", "postBind"]
PLUGIN_CONFIG = {"name": str, "args": dict}


def schema(api):
    """The accepted fields of a KubeSchedulerConfiguration of `api` (v1beta1...v1)."""
    points = list(POINTS)
    if api in ("v1beta3", "v1"):
        points.append("multiPoint")
    if api == "v1":
        points.append("preEnqueue")
    profile = {"schedulerName": str, "plugins": {p: PLUGIN_SET for p in points}, "pluginConfig": [PLUGIN_CONFIG]}
    if api == "v1":
        profile["percentageOfNodesToScore"] = int
    top = {"apiVersion": str, "kind": str, "parallelism": int, "leaderElection": LEADER,
           "clientConnection": CLIENT, "enableProfiling": bool, "enableContentionProfiling": bool,
           "percentageOfNodesToScore": int, "podInitialBackoffSeconds": int, "podMaxBackoffSeconds": int,
           "profiles": [profile], "extenders": [EXTENDER]}
    if api in ("v1beta1", "v1beta2"):
        top["healthzBindAddress"] = str
        top["metricsBindAddress"] = str
    if api == "v1":
        top["delayCacheUntilActive"] = bool
    return top


DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
# A qualified resource name: optional DNS-subdomain prefix, "/", a name of alphanumerics, '-', '_', '.'.
RESOURCE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                      r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def typecheck(value, spec, path, errors):
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            errors.append(f"{path}: must be an object, is {type(value).__name__}")
            return
        for k, v in value.items():
            if k not in spec:
                errors.append(f"{path}.{k}: unknown field (kube-scheduler's strict decoding refuses it)")
            else:
                typecheck(v, spec[k], f"{path}.{k}", errors)
    elif isinstance(spec, list):
        if not isinstance(value, list):
            errors.append(f"{path}: must be a list, is {type(value).__name__}")
            return
        for i, item in enumerate(value):
            typecheck(item, spec[0], f"{path}[{i}]", errors)
    elif spec == "duration":
        if not (isinstance(value, str) and DURATION.match(value)):
            errors.append(f"{path}: {value!r} is not a duration (e.g. 5s)")
    elif spec is int:
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(f"{path}: must be an integer, is {value!r}")
    elif spec is bool:
        if not isinstance(value, bool):
            errors.append(f"{path}: must be true or false, is {value!r}")
    elif spec is dict:
        if not isinstance(value, dict):
            errors.append(f"{path}: must be an object")
    elif not isinstance(value, spec):
        errors.append(f"{path}: has the wrong type ({value!r})")


def check(cfg, expect_api=None):
    """The list of problems of one KubeSchedulerConfiguration (empty: valid)."""
    errors = []
    if not isinstance(cfg, dict):
        return ["the document is not an object"]
    api_version = cfg.get("apiVersion", "")
    api = api_version[len(GROUP):] if api_version.startswith(GROUP) else None
    if api not in APIS:
        return [f"apiVersion {api_version!r} is not one of {', '.join(GROUP + a for a in APIS)}"]
    if expect_api and api_version != expect_api:
        errors.append(f"apiVersion is {api_version}, expected {expect_api}")
    if cfg.get("kind") != "KubeSchedulerConfiguration":
        errors.append(f"kind must be KubeSchedulerConfiguration, is {cfg.get('kind')!r}")
    typecheck(cfg, schema(api), api, errors)

    p = cfg.get("percentageOfNodesToScore")
    if isinstance(p, int) and not 0 <= p <= 100:
        errors.append(f"percentageOfNodesToScore {p} is not within 0..100")
    names = [pr.get("schedulerName", "default-scheduler") for pr in cfg.get("profiles") or [] if isinstance(pr, dict)]
    if len(names) != len(set(names)):
        errors.append(f"profiles: duplicate schedulerName in {names}")

    binders = 0
    for i, e in enumerate(cfg.get("extenders") or []):
        if not isinstance(e, dict):
            continue
        where = f"extenders[{i}]"
        if not e.get("urlPrefix"):
            errors.append(f"{where}.urlPrefix is required")
        elif not re.match(r"^https?://[^/]+", e["urlPrefix"]):
            errors.append(f"{where}.urlPrefix {e['urlPrefix']!r} is not an http(s) URL")
        if e.get("prioritizeVerb") and not (isinstance(e.get("weight"), int) and e["weight"] > 0):
            errors.append(f"{where}.weight must be positive when prioritizeVerb is set")
        if e.get("bindVerb"):
            binders += 1
        tls = e.get("tlsConfig") or {}
        if isinstance(tls, dict) and bool(tls.get("certFile") or tls.get("certData")) != bool(tls.get("keyFile") or tls.get("keyData")):
            errors.append(f"{where}.tlsConfig: a client certificate needs its key and the other way round")
        seen = set()
        for j, r in enumerate(e.get("managedResources") or []):
            n = r.get("name", "") if isinstance(r, dict) else ""
            if not RESOURCE.match(n):
                errors.append(f"{where}.managedResources[{j}].name {n!r} is not a valid resource name")
            if n in seen:
                errors.append(f"{where}.managedResources[{j}].name {n!r} is duplicated")
            seen.add(n)
    if binders > 1:
        errors.append(f"only one extender may implement bind, {binders} do")
    return errors


GOOD = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "leaderElection": {"leaderElect": True, "resourceLock": "leases", "resourceName": "s", "resourceNamespace": "n"},
    "percentageOfNodesToScore": 100, "profiles": [{"schedulerName": "s"}],
    "extenders": [{"urlPrefix": "https://v.n.svc:8443/scheduler", "filterVerb": "filter", "prioritizeVerb": "prioritize",
                   "bindVerb": "bind", "weight": 5, "nodeCacheCapable": True, "ignorable": False, "httpTimeout": "5s",
                   "enableHTTPS": True, "tlsConfig": {"caFile": "/c", "certFile": "/a", "keyFile": "/b", "serverName": "v"},
                   "managedResources": [{"name": "vramd.io/vram", "ignoredByScheduler": True}]}],
}


def self_test():
    """Each rule must catch its defect, and the good configuration must pass in every version."""
    import copy

    def variant(api, change):
        c = copy.deepcopy(GOOD)
        c["apiVersion"] = GROUP + api
        change(c)
        return c

    cases = [  # (name, api, change, substring of the expected error; None: must pass)
        ("good v1", "v1", lambda c: None, None),
        ("good v1beta3", "v1beta3", lambda c: None, None),
        ("good v1beta2", "v1beta2", lambda c: None, None),
        ("good v1beta1", "v1beta1", lambda c: None, None),
        ("v1beta2 keeps healthzBindAddress", "v1beta2", lambda c: c.update(healthzBindAddress="0.0.0.0:10251"), None),
        ("v1 has no healthzBindAddress", "v1", lambda c: c.update(healthzBindAddress="0.0.0.0:10251"), "healthzBindAddress: unknown field"),
        ("v1beta3 has no metricsBindAddress", "v1beta3", lambda c: c.update(metricsBindAddress="x"), "metricsBindAddress: unknown field"),
        ("v1beta2 has no multiPoint", "v1beta2", lambda c: c["profiles"][0].update(plugins={"multiPoint": {}}), "multiPoint: unknown field"),
        ("v1beta3 has multiPoint", "v1beta3", lambda c: c["profiles"][0].update(plugins={"multiPoint": {"enabled": [{"name": "x"}]}}), None),
        ("profile percentage only in v1", "v1beta3", lambda c: c["profiles"][0].update(percentageOfNodesToScore=50), "percentageOfNodesToScore: unknown field"),
        ("unknown extender field", "v1", lambda c: c["extenders"][0].update(tlsconfig={}), "tlsconfig: unknown field"),
        ("unknown tlsConfig field", "v1beta2", lambda c: c["extenders"][0]["tlsConfig"].update(clientCert="/x"), "clientCert: unknown field"),
        ("weight zero with prioritize", "v1", lambda c: c["extenders"][0].update(weight=0), "weight must be positive"),
        ("weight as a string", "v1beta3", lambda c: c["extenders"][0].update(weight="5"), "must be an integer"),
        ("two binders", "v1", lambda c: c["extenders"].append(dict(c["extenders"][0])), "only one extender may implement bind"),
        ("bad timeout", "v1", lambda c: c["extenders"][0].update(httpTimeout="5"), "is not a duration"),
        ("bad resource name", "v1", lambda c: c["extenders"][0]["managedResources"][0].update(name="vramd.io/"), "not a valid resource name"),
        ("cert without key", "v1", lambda c: c["extenders"][0]["tlsConfig"].pop("keyFile"), "needs its key"),
        ("percentage above 100", "v1beta2", lambda c: c.update(percentageOfNodesToScore=101), "within 0..100"),
        ("unknown API", "v1alpha1", lambda c: None, "is not one of"),
        ("wrong kind", "v1", lambda c: c.update(kind="Policy"), "kind must be"),
        ("flag-style field", "v1", lambda c: c.update(leaderElect=True), "leaderElect: unknown field"),
    ]
    failed = 0
    for name, api, change, want in cases:
        errors = check(variant(api, change))
        ok = (not errors) if want is None else any(want in e for e in errors)
        if not ok:
            failed += 1
            print(f"check_scheduler_config: self-test FAILED: {name}: got {errors}, wanted {want or 'no error'}")
    print(f"check_scheduler_config: self-test: {len(cases) - failed}/{len(cases)} cases as expected")
    return 1 if failed else 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    expect = None
    if len(argv) >= 2 and argv[0] == "--expect-api":
        expect, argv = argv[1], argv[2:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    bad = 0
    for path in argv:
        with open(path, encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
        errors = check(cfg, expect)
        for e in errors:
            print(f"check_scheduler_config: {path}: {e}")
        if errors:
            bad += 1
        else:
            print(f"check_scheduler_config: {path}: valid {cfg['apiVersion']} KubeSchedulerConfiguration")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
