"""Issue 11, defect 3: the kubelet's service-link variables must not stop vramd.

For every Service with a cluster IP in the pod's namespace the kubelet sets
<SVC>_SERVICE_HOST, <SVC>_SERVICE_PORT[_<PORTNAME>], <SVC>_PORT and
<SVC>_PORT_<N>_<PROTO>[_PROTO|_PORT|_ADDR] (pkg/kubelet/envvars). The chart's
Services of a release named vramd are vramd and vramd-valkey, so the pod saw
VRAMD_SERVICE_HOST, VRAMD_VALKEY_PORT, ... and vramd exited on the first one.
The chart now sets enableServiceLinks: false, and vramd tolerates the variables
anyway (any pod spec, any chart, older releases).

The Services are those of tests/system/chart_services.json, which
tests/deploy/check_manifests.py keeps equal to what the chart renders.
Real vramd (standalone) against a real redis-server.
"""

import json
import os
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import GI, Workdir, filter_body, homelab_config, wait_for  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def chart_profiles():
    """{profile: [service, ...]} from chart_services.json, profiles with the same Services once."""
    with open(os.path.join(HERE, "chart_services.json"), encoding="utf-8") as f:
        profiles = json.load(f)["profiles"]
    distinct = {}
    for name, services in profiles.items():
        if services not in distinct.values():
            distinct[name] = services
    return distinct


def env_name(s):
    return s.upper().replace("-", "_")


def kubelet_service_env(services):
    """The variables the kubelet injects for `services` (a port of FromServices in
    k8s.io/kubernetes pkg/kubelet/envvars/envvars.go), with made-up cluster IPs,
    plus the API server's own, which every pod gets."""
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
           "KUBERNETES_SERVICE_PORT_HTTPS": "443", "KUBERNETES_PORT": "tcp://10.96.0.1:443",
           "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
           "KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1"}
    for i, svc in enumerate(services):
        if svc["headless"]:
            continue  # the kubelet skips Services without a cluster IP
        ip = f"10.96.0.{10 + i}"
        prefix = env_name(svc["name"])
        ports = svc["ports"]
        env[f"{prefix}_SERVICE_HOST"] = ip
        env[f"{prefix}_SERVICE_PORT"] = str(ports[0]["port"])
        for p in ports:
            if p["name"]:
                env[f"{prefix}_SERVICE_PORT_{env_name(p['name'])}"] = str(p["port"])
        for j, p in enumerate(ports):
            proto = p["protocol"]
            link = f"{proto.lower()}://{ip}:{p['port']}"
            if j == 0:
                env[f"{prefix}_PORT"] = link
            pp = f"{prefix}_PORT_{p['port']}_{proto.upper()}"
            env[pp] = link
            env[f"{pp}_PROTO"] = proto.lower()
            env[f"{pp}_PORT"] = str(p["port"])
            env[f"{pp}_ADDR"] = ip
    return env


class KubeletServiceLinks(unittest.TestCase):
    def test_vramd_starts_and_serves_with_the_service_links_of_the_charts_services(self):
        for profile, services in chart_profiles().items():
            env = kubelet_service_env(services)
            env["VRAMD_BIN"] = "/x"  # a stray variable of somebody's script
            links = sorted(k for k in env if k.startswith("VRAMD_") and k != "VRAMD_BIN")
            with self.subTest(profile=profile), Workdir() as w:
                # Sanity: the variables of the report are there.
                self.assertIn("VRAMD_SERVICE_HOST", links)
                self.assertIn("VRAMD_PORT", links)
                if any(s["name"] == "vramd-valkey" for s in services):
                    self.assertIn("VRAMD_VALKEY_PORT_6379_TCP", links)
                redis = w.redis()
                v = w.vramd(["--config", homelab_config(w, redis.url)], env=env)
                self.assertEqual(v.request("GET", "/healthz")[0], 200)
                wait_for(lambda: v.json("GET", "/v1/nodes")[1].get("nodes"), 10, message="nodes")
                status, body = v.json("POST", "/scheduler/filter", filter_body("links-1", "1Gi"))
                self.assertEqual(status, 200)
                self.assertEqual(body["NodeNames"], ["ness-linux3", "ness-server2"], body)
                log = v.log()
                print(f"\n[{profile}] {len(links)} service-link variables: {' '.join(links)}")
                # The service links are quiet; the stray variable is a warning.
                for name in links:
                    self.assertNotIn(f"variable {name} ", log)
                self.assertIn("unknown environment variable VRAMD_BIN (ignored", log)
                self.assertEqual(v.stop(), 0, log)

    def test_a_misspelt_variable_is_a_warning_naming_the_key_and_is_not_applied(self):
        with Workdir() as w:
            redis = w.redis()
            v = w.vramd(["--config", homelab_config(w, redis.url)], env={"VRAMD_RESERVE_PERCNT": "5"})
            self.assertEqual(v.request("GET", "/healthz")[0], 200)
            wait_for(lambda: v.json("GET", "/v1/nodes")[1].get("nodes"), 10, message="nodes")
            log = v.log()
            self.assertIn("unknown environment variable VRAMD_RESERVE_PERCNT "
                          "(did you mean VRAMD_RESERVE_PERCENT?)", log)
            self.assertRegex(log, r"(?m)^\S+ warning unknown environment variable VRAMD_RESERVE_PERCNT")
            # Not applied: no reserve is taken off the 96Gi.
            self.assertEqual(v.json("GET", "/v1/nodes/ness-linux3")[1]["capacity_bytes"], 96 * GI)

    def test_a_misspelt_variable_with_a_value_invalid_for_the_key_stops_vramd(self):
        with Workdir() as w:
            redis = w.redis()
            v = w.vramd(["--config", homelab_config(w, redis.url)], env={"VRAMD_RESERVE_PERCNT": "150"},
                        wait=False)
            v.proc.wait(15)
            self.assertEqual(v.proc.returncode, 2, v.log())
            self.assertIn("unknown environment variable VRAMD_RESERVE_PERCNT (did you mean VRAMD_RESERVE_PERCENT?)",
                          v.log())
            self.assertIn("reserve.percent: invalid value \"150\"", v.log())


if __name__ == "__main__":
    unittest.main()
