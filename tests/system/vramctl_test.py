"""vramctl's read commands against the real vramd and redis-server: `nodes`
(table and -o json), `pods`, `explain -f` and the error paths (vramd not
reachable, an error answer). The lock commands are tested in
tests/integration/lock_cli_test.cc."""

import json
import os
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (BIN_DIR, GI, Workdir, bind_body, clean_env, filter_body, free_port,  # noqa: E402
                     homelab_config)

VRAMCTL = os.path.abspath(os.path.join(BIN_DIR, "vramctl"))


def vramctl(server, *args):
    out = subprocess.run([VRAMCTL, "--server", server, *args], capture_output=True, text=True, timeout=30,
                         env=clean_env())
    return out.returncode, out.stdout, out.stderr


class VramctlReads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w = Workdir().__enter__()
        redis = cls.w.redis()
        cls.v = cls.w.vramd(["--config", homelab_config(cls.w, redis.url)])
        status, _ = cls.v.json("POST", "/scheduler/filter", filter_body("u-ctl-1", "24Gi"))
        assert status == 200
        status, body = cls.v.json("POST", "/scheduler/bind", bind_body("u-ctl-1", "ness-linux3"))
        assert status == 200 and not body.get("Error"), body

    @classmethod
    def tearDownClass(cls):
        cls.w.__exit__(None, None, None)

    def test_nodes_table_lists_every_node_and_gpu_with_capacity_and_allocation(self):
        rc, out, err = vramctl(self.v.url, "nodes")
        self.assertEqual(rc, 0, err)
        rows = [line.split() for line in out.splitlines()]
        self.assertEqual(rows[0][:5], ["NODE", "GPU", "CAPACITY", "ALLOCATED", "USED"])
        linux3 = next(r for r in rows if r and r[0] == "ness-linux3")
        self.assertEqual(linux3[1:4], ["all", "96Gi", "24Gi"])
        self.assertTrue(any(r and r[0] == "ness-server2" and r[2] == "8Gi" for r in rows), out)
        self.assertIn("(* usage not reported or stale: U = A)", out)

    def test_nodes_json_is_the_servers_view(self):
        rc, out, err = vramctl(self.v.url, "nodes", "ness-linux3", "-o", "json")
        self.assertEqual(rc, 0, err)
        nodes = json.loads(out)
        self.assertEqual([n["name"] for n in nodes], ["ness-linux3"])
        self.assertEqual(nodes[0]["allocated_bytes"], 24 * GI)
        self.assertEqual(nodes[0]["capacity_bytes"], 96 * GI)

    def test_pods_lists_the_bound_reservation(self):
        rc, out, err = vramctl(self.v.url, "pods")
        self.assertEqual(rc, 0, err)
        row = next(line.split() for line in out.splitlines() if "default/p-u-ctl-1" in line)
        self.assertEqual(row[0], "ness-linux3")
        self.assertEqual(row[2:4], ["0", "24Gi"])

    def test_explain_a_manifest_says_where_it_fits_and_why_not_elsewhere(self):
        pod = filter_body("u-ctl-2", "40Gi")["Pod"]
        path = self.w.file("pod.json", pod)
        rc, out, err = vramctl(self.v.url, "explain", "-f", path)
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertIn("needs 40Gi", lines[0])
        self.assertIn("fits on 1 of 2 nodes now", lines[0])
        self.assertTrue(any(l.split()[:4] == ["ness-linux3", "fits", "on", "GPU"] for l in lines), out)
        server2 = next(l for l in lines if l.strip().startswith("ness-server2"))
        self.assertIn("never fits", server2)
        self.assertIn("8Gi", server2)

    def test_an_unknown_node_is_an_error_with_the_servers_message(self):
        rc, out, err = vramctl(self.v.url, "nodes", "no-such-node")
        self.assertEqual(rc, 1)
        self.assertIn("HTTP 404", err)

    def test_an_unreachable_server_fails_with_a_clear_message(self):
        url = f"http://127.0.0.1:{free_port()}"
        for args in (["nodes"], ["pods"], ["explain", "default/x"], ["lock", "list"]):
            rc, out, err = vramctl(url, *args)
            self.assertEqual(rc, 1, args)
            self.assertIn(f"cannot reach vramd at {url}", err, args)


if __name__ == "__main__":
    unittest.main()
