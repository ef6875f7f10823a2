#!/usr/bin/env python3
"""Valkey's own time per bind script: reserve and finish_bind, as vramd
composes them (src/store/lua: the prelude bump.lua, a helper, the body),
against a real redis-server started here on loopback, one node of 8 GPUs
holding --entries entries like vramd's (issue 36: Valkey's CPU per scheduled
pod).

Each round reserves one pod on the node (a new UID, the seal required, the
fit counting the agent's fresh usage), marks it bound (finish_bind), and
removes it again outside the timing (HDEL), so every call sees the same node.
The figure is the server's own: INFO commandstats' microseconds spent in
EVALSHA (each script in a phase of its own), on an otherwise idle server (one
client, one call at a time), so it is the scripts' time without the network;
on a busy machine it includes time the server waited for a core. Prints the
mean microseconds per call and the reply's size.

    python3 bench/valkey_scripts.py [--rounds 3000] [--entries 5]
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LUA = os.path.join(ROOT, "src", "store", "lua")
P = "bench"
NODE = "gpu-node-00000"
GI = 1 << 30


def lua(*names: str) -> str:
    d = os.environ.get("VRAMD_BENCH_LUA_DIR", LUA)  # a changed copy, to compare
    return "".join(open(os.path.join(d, n + ".lua")).read() for n in names)


class Resp:
    """A minimal RESP2 client (one connection, one command at a time)."""

    def __init__(self, port: int):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.f = self.s.makefile("rb")
        self.last_reply_bytes = 0

    def __call__(self, *args):
        parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        self.s.sendall(b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
        self.last_reply_bytes = 0
        return self._read()

    def _line(self) -> bytes:
        line = self.f.readline()
        self.last_reply_bytes += len(line)
        return line[:-2]

    def _read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            self.last_reply_bytes += n + 2
            return data[:-2].decode()
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def entry_json(i: int, gpu: int, state: str = "bound") -> str:
    # As EncodeEntry writes one (store/entry_codec.cc), created_ms last.
    return ('{"ns":"bench","name":"pod-%05d","gpus":[%d],"per_gpu":%d,"peak_per_gpu":0,'
            '"model":"","state":"%s","owner_kind":"ReplicaSet","owner_uid":"0f0e0d0c-%08d",'
            '"created_ms":%d}' % (i, gpu, 4 * GI, state, i, 1_700_000_000_000 + i))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3000)
    ap.add_argument("--entries", type=int, default=5, help="entries the node holds besides the pod reserved")
    a = ap.parse_args()
    server = shutil.which("valkey-server") or shutil.which("redis-server")
    if not server:
        print("valkey_scripts.py: no valkey-server or redis-server", file=sys.stderr)
        return 1
    port = free_port()
    d = tempfile.mkdtemp(prefix="vramd-valkey-bench.")
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", d], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                r = Resp(port)
                r("PING")
                break
            except OSError:
                time.sleep(0.05)
        else:
            print("valkey_scripts.py: the server did not start", file=sys.stderr)
            return 1
        k = lambda what: f"{P}:{{{NODE}}}:{what}"  # noqa: E731
        run_id = next(l.split(":", 1)[1] for l in r("INFO", "server").splitlines() if l.startswith("run_id:"))
        r("SET", f"{P}:sealed", f"1:bench run={run_id}")
        r("SADD", f"{P}:nodes", NODE)
        for g in range(8):
            r("HSET", k("cap"), g, 80 * GI)
        now_ms = int(time.time() * 1000)
        r("HSET", k("used"), "ts", now_ms + 3_600_000)  # fresh for the whole run
        for g in range(8):
            r("HSET", k("used"), g, 2 * GI)
        for i in range(a.entries):
            r("HSET", k("alloc"), f"uid-{i:05d}", entry_json(i, i % 8))
            r("HSET", f"{P}:pods", f"uid-{i:05d}", NODE)
        reserve = r("SCRIPT", "LOAD", lua("bump", "fit", "reserve"))
        finish = r("SCRIPT", "LOAD", lua("bump", "set_state_fn", "finish_bind"))
        rkeys = [f"{P}:nodes", k("cap"), k("alloc"), k("used"), k("models"), f"{P}:pods", f"{P}:epoch",
                 f"{P}:changes", f"{P}:inflight", f"{P}:sealed"]
        fkeys = [k("alloc"), f"{P}:epoch", f"{P}:changes", f"{P}:inflight"]
        def evalsha_us() -> tuple[int, int]:
            for line in r("INFO", "commandstats").splitlines():
                if line.startswith("cmdstat_evalsha:"):
                    f = dict(x.split("=") for x in line.split(":", 1)[1].split(","))
                    return int(f["calls"]), int(f["usec"])
            return 0, 0

        def head(i: int, g: int) -> str:
            return entry_json(10_000 + i, g, "reserved").rsplit('"created_ms":', 1)[0] + '"created_ms":'

        # Reserve: each pod reserved, then removed outside the script.
        us, sizes = {}, {}
        r("CONFIG", "RESETSTAT")
        for i in range(a.rounds):
            uid, g = f"new-{i:06d}", i % 8
            out = r("EVALSHA", reserve, len(rkeys), *rkeys, P, NODE, uid, head(i, g), 4 * GI, 1, 60_000, "",
                    30_000, 1, 0, 4 * GI, 0, "1", 0, g)
            if not out or out[0] != "reserved":
                print(f"valkey_scripts.py: reserve answered {out!r}", file=sys.stderr)
                return 1
            sizes["reserve"] = r.last_reply_bytes
            r("HDEL", k("alloc"), uid)
            r("HDEL", f"{P}:pods", uid)
        us["reserve"] = evalsha_us()
        # finish_bind: a reserved entry written directly, marked bound, removed.
        r("CONFIG", "RESETSTAT")
        for i in range(a.rounds):
            uid, g = f"new-{i:06d}", i % 8
            r("HSET", k("alloc"), uid, head(i, g) + "1700000000000}")
            out = r("EVALSHA", finish, len(fkeys), *fkeys, uid, "bound", NODE)
            if not isinstance(out, list) or out[0] != 1:
                print(f"valkey_scripts.py: finish_bind answered {out!r}", file=sys.stderr)
                return 1
            sizes["finish_bind"] = r.last_reply_bytes
            r("HDEL", k("alloc"), uid)
        us["finish_bind"] = evalsha_us()
        print(f"{server} {r('INFO', 'server').split('redis_version:')[1].split()[0]}; node of 8 GPUs with "
              f"{a.entries} entries; {a.rounds} rounds")
        total = 0.0
        for name in ("reserve", "finish_bind"):
            calls, usec = us[name]
            if calls != a.rounds:
                print(f"valkey_scripts.py: {calls} {name} calls counted, not {a.rounds}", file=sys.stderr)
                return 1
            total += usec / calls
            print(f"  {name:12s} {usec / calls:6.1f} us per call; reply {sizes[name]} bytes")
        print(f"  per pod (both): {total:.1f} us")
        return 0
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
