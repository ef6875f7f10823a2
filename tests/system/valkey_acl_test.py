"""Issue 33 (Low): the bundled Valkey's ACL user for vramd. A real
redis-server 7 with the users the chart's start script writes (templates/
valkey.yaml): `default` off, and `vramd` with exactly the rules of
deploy/helm/vramd/files/valkey-vramd.acl under the key and channel patterns
vramd:* (built here the way the template builds them; tests/deploy/
check_manifests.py checks the rendered ConfigMap holds this same string).
The real vramd logs in as `vramd` with its password from a file and does
what it does in a cluster: the leader lease, a filter and bind, a usage
report, a GPU lock acquired, heartbeated and released, the store's clock
and memory read (TIME, INFO), the change feed (SUBSCRIBE), with no NOPERM in
its log. Then the attack: with vramd's own credentials (what a compromised
vramd or a leaked password gives), CONFIG SET, FLUSHALL, FLUSHDB, DEBUG,
KEYS, ACL, SHUTDOWN, MONITOR, a key outside vramd:* and FLUSHALL from inside
a Lua script are each refused (NOPERM), and the key count, the keys' values
and maxmemory are unchanged (read as a test-only admin user)."""

import os
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Workdir, bind_body, filter_body, free_port, homelab_config, wait_for  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ACL_FILE = os.path.join(ROOT, "deploy", "helm", "vramd", "files", "valkey-vramd.acl")
PREFIX = "vramd"
PASSWORD = "0123456789abcdef" * 4
ADMIN_PASSWORD = "test-admin-only"
TOKEN = "acl-test-token"


def chart_acl(prefix=PREFIX):
    """vramd.acl as templates/valkey.yaml renders it (no extraRules)."""
    with open(ACL_FILE) as f:
        rules = [line.strip() for line in f if line.strip() and not line.strip().startswith("#")]
    return f"resetkeys ~{prefix}:* resetchannels &{prefix}:* " + " ".join(rules)


class AclRedis:
    def __init__(self, w):
        self.dir = os.path.join(w.path, "acl-redis")
        os.makedirs(self.dir)
        self.port = free_port()
        conf = os.path.join(self.dir, "redis.conf")
        with open(conf, "w") as f:
            f.write(f"bind 127.0.0.1\nport {self.port}\ndir {self.dir}\nsave \"\"\nappendonly no\n"
                    "maxmemory 384mb\nmaxmemory-policy noeviction\ntimeout 300\nmaxclients 256\n"
                    # DEBUG on, so that its refusal below is the ACL's, not this default's.
                    "enable-debug-command yes\n"
                    # The chart's start script, verbatim in shape:
                    "user default off resetpass -@all\n"
                    f"user vramd reset on \">{PASSWORD}\" {chart_acl()}\n"
                    # The test's own eyes, not the chart's:
                    f"user admin on >{ADMIN_PASSWORD} ~* &* +@all\n")
        self.proc = subprocess.Popen(["redis-server", conf], stdout=open(os.path.join(self.dir, "log"), "ab"),
                                     stderr=subprocess.STDOUT)
        w.procs.append(self)
        wait_for(lambda: self.cli("admin", ADMIN_PASSWORD, "PING") == "PONG", 10, message="redis-server with ACLs")

    def cli(self, user, password, *args):
        cmd = ["redis-cli", "-p", str(self.port), "--no-auth-warning"]
        if user:
            cmd += ["--user", user, "--pass", password]
        out = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=10)
        return (out.stdout + out.stderr).strip()

    def admin(self, *args):
        return self.cli("admin", ADMIN_PASSWORD, *args)

    def dump(self, key):
        """The serialized value of `key` (bytes: DUMP is binary)."""
        return subprocess.run(["redis-cli", "-p", str(self.port), "--no-auth-warning", "--user", "admin",
                               "--pass", ADMIN_PASSWORD, "DUMP", key], capture_output=True, timeout=10).stdout

    def as_vramd(self, *args):
        return self.cli("vramd", PASSWORD, *args)

    def state(self):
        """Every key with its type and a dump of its value, and the settings an attacker would change."""
        keys = sorted(self.admin("--scan").split())
        return {"dbsize": self.admin("DBSIZE"), "keys": {k: self.dump(k) for k in keys},
                "maxmemory": self.admin("CONFIG", "GET", "maxmemory"),
                "users": self.admin("ACL", "LIST")}

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class ValkeyAcl(unittest.TestCase):
    def test_vramd_works_under_the_chart_acl_and_nothing_else_is_allowed(self):
        with Workdir() as w:
            r = AclRedis(w)
            self.assertIn("NOAUTH", r.cli(None, None, "PING"), "the default user must be off")
            self.assertIn("WRONGPASS", r.cli("default", "", "PING"))
            self.assertEqual(r.admin("ACL", "LOG", "RESET"), "OK")  # those two were ours

            pw_file = w.file("valkey-password", PASSWORD + "\n")
            token_file = w.file("token", TOKEN + "\n")
            cfg = homelab_config(w, f"redis://127.0.0.1:{r.port}", watchdog={"mode": "enforce"})
            v = w.vramd(["--config", cfg, "--valkey-username", "vramd", "--valkey-password-file", pw_file,
                         "--api-token-file", token_file])
            auth = {"Authorization": "Bearer " + TOKEN}
            wait_for(lambda: v.request("GET", "/readyz")[0] == 200, 15, message="vramd ready (leader lease, store)")
            wait_for(lambda: v.json("GET", "/v1/nodes")[1].get("nodes"), 10, message="nodes synced")

            status, reply = v.json("POST", "/scheduler/filter", filter_body("acl-1", "4Gi"))
            self.assertEqual(status, 200, reply)
            self.assertIn("ness-linux3", reply.get("NodeNames") or [], reply)
            status, reply = v.json("POST", "/scheduler/bind", bind_body("acl-1", "ness-linux3"))
            self.assertEqual(status, 200, reply)
            self.assertFalse(reply.get("Error"), reply)
            status, reply = v.json("PUT", "/v1/nodes/ness-linux3/usage", {"gpus": {"0": "6Gi"}}, headers=auth)
            self.assertEqual(status, 200, reply)
            for op in ("acquire", "heartbeat", "release"):
                status, reply = v.json("POST", f"/v1/locks/ness-linux3/0/{op}", {"owner": "default/p-acl-1"},
                                       headers=auth)
                self.assertEqual(status, 200, (op, reply))
            self.assertTrue(v.json("POST", "/v1/locks/ness-linux3/0/acquire", {"owner": "default/p-acl-2"},
                                   headers=auth)[1].get("granted"))
            nodes = v.json("GET", "/v1/nodes")[1]["nodes"]
            linux3 = [n for n in nodes if n["name"] == "ness-linux3"][0]
            self.assertIn("acl-1", str(linux3), "the bound pod is in the ledger")
            # The store's memory and clock (INFO memory, TIME) and the change feed.
            metrics = wait_for(lambda: (lambda m: m if "vramd_store_maxmemory_bytes 402653184" in m else None)(
                v.request("GET", "/metrics")[1]), 15, message="INFO memory read")
            self.assertIn("vramd_store_used_memory_bytes", metrics)
            self.assertIn("PUBLISH", r.admin("INFO", "commandstats").upper())
            self.assertIn("cmdstat_subscribe", r.admin("INFO", "commandstats"))
            self.assertIn("cmdstat_time", r.admin("INFO", "commandstats"))
            time.sleep(1.5)  # a few more background passes (reconcile, leader loops) under the ACL
            self.assertNotIn("NOPERM", v.log(), "vramd sent a command its ACL user may not")
            self.assertEqual(r.admin("ACL", "LOG"), "", "no ACL denial while vramd ran")

            before = r.state()
            self.assertGreater(int(before["dbsize"]), 5, before["keys"].keys())
            self.assertTrue(all(k.startswith(PREFIX + ":") for k in before["keys"]), before["keys"].keys())
            attacks = [
                ("CONFIG", "SET", "maxmemory", "1"), ("CONFIG", "GET", "requirepass"), ("FLUSHALL",), ("FLUSHDB",),
                ("DEBUG", "SLEEP", "0"), ("DEBUG", "RELOAD"), ("KEYS", "*"), ("ACL", "SETUSER", "vramd", "+@all"),
                ("ACL", "LIST"), ("SHUTDOWN", "NOSAVE"), ("MONITOR",), ("SCRIPT", "FLUSH"), ("BGREWRITEAOF",),
                ("SET", "other:key", "x"), ("GET", "other:key"), ("DEL", "other:key"),
                ("SUBSCRIBE", "other:channel"), ("MIGRATE", "127.0.0.1", "1", "", "0", "100", "KEYS", "vramd:epoch"),
                ("EVAL", "return redis.call('FLUSHALL')", "0"),
                ("EVAL", "return redis.call('KEYS', '*')", "0"), ("EVAL", "return redis.call('FLUSHDB')", "0"),
                ("EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", "other:key"),
            ]
            for args in attacks:
                out = r.as_vramd(*args)
                self.assertRegex(out, r"NOPERM|No permissions|user executing the script can.t (run|access)", f"{args}: {out}")
            after = r.state()
            self.assertEqual(after, before, "an attack changed Valkey")
            # vramd still works after the attacks.
            status, reply = v.json("POST", "/scheduler/filter", filter_body("acl-3", "2Gi"))
            self.assertEqual(status, 200, reply)
            print(f"\nvalkey ACL: vramd worked ({before['dbsize']} keys, all {PREFIX}:*); "
                  f"{len(attacks)} attacks refused with NOPERM, key count and values unchanged")


if __name__ == "__main__":
    unittest.main(verbosity=2)
