#!/usr/bin/env python3
"""The GPU check (scripts/gpu-check.sh): vramd-agent against a real NVIDIA GPU.

Builds nothing. Starts N small processes that allocate known amounts through
libcuda.so.1 (ctypes dlopen, the driver API: cuInit, the device's primary
context, cuMemAlloc, a memset so the pages are real), moves some of them into
kubelet-shaped pod cgroups when the host allows it (cgroup v2, root: the
systemd driver's layout, /kubepods.slice/kubepods-burstable.slice/
kubepods-burstable-pod<uid_>.slice/cri-containerd-<64 hex>.scope), runs the
real `vramd-agent --once --source nvml`, and checks what the agent reports
against `nvidia-smi`:

  - every process is listed by nvidia-smi with at least the bytes it asked for;
  - every pod's bytes in the agent's report = the sum of its processes'
    nvidia-smi figures, within 2 %; no pod of this check missing;
  - the agent's outside-pods bytes = nvidia-smi's figures of every process on
    that GPU outside this check's pods (other users' included), within 2 %;
  - the GPU's used bytes = nvidia-smi's memory.used, within 2 %;
  - per-process figures available (no "processes_unavailable");
  - enforcement (issue 34): given each pod's limit as vramd would answer
    (mode on), the agent chooses what this host offers (the kernel's dmem
    cgroup when it lists the GPU, else NVML's limits on a driver R615+, else
    nothing) and reports each pod enforced, or accounted only saying why
    ("no dmem controller, driver 580.159.04 older than R615"): never enforced
    without a backend.

It prints the entry point the agent read the process lists through (its log),
a PASS/FAIL table, and exits 0 only when every row passes (1: a check failed;
2: the check could not run: no GPU, no libcuda, no agent). Processes and
cgroups it made are removed on exit, also on Ctrl-C.

Not part of CI (no GPU there): the fake-NVML tiers are the tests that must
always pass. `evaluate()` is pure and table-tested (tests/system/gpu_check_test.py).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field

MIB = 1 << 20
TOLERANCE = 0.02
CGROUP_ROOT = "/sys/fs/cgroup"


# --- the allocating child ------------------------------------------------------

def allocate(nbytes: int, device: int) -> int:
    """Runs in the child: allocate `nbytes` on `device` through the driver
    API, print READY, hold it until stdin closes."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        print(f"ERROR dlopen libcuda.so.1: {e}", flush=True)
        return 2
    c_int_p = ctypes.POINTER(ctypes.c_int)
    cuda.cuInit.argtypes = [ctypes.c_uint]
    cuda.cuDeviceGet.argtypes = [c_int_p, ctypes.c_int]
    cuda.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
    cuda.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
    cuda.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    cuda.cuMemsetD8_v2.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t]
    cuda.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]

    def check(r: int, what: str) -> None:
        if r != 0:
            name = ctypes.c_char_p()
            cuda.cuGetErrorName(r, ctypes.byref(name))
            print(f"ERROR {what}: CUresult {r} ({(name.value or b'?').decode()})", flush=True)
            sys.exit(3)

    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    check(cuda.cuInit(0), "cuInit")
    check(cuda.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev.value), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    check(cuda.cuMemAlloc_v2(ctypes.byref(ptr), nbytes), "cuMemAlloc")
    check(cuda.cuMemsetD8_v2(ptr.value, 0x5A, nbytes), "cuMemsetD8")
    check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
    print("READY", flush=True)
    sys.stdin.read()  # held until the parent closes the pipe (or dies)
    return 0


# --- the pure part: what the agent said against what nvidia-smi said ----------

@dataclass
class Proc:
    name: str
    asked: int                 # bytes cuMemAlloc'd
    pod: str | None = None     # pod UID, None: outside pods
    pid: int = 0


@dataclass
class Row:
    check: str
    expected: str
    agent: str
    ok: bool


def parse_smi_apps(text: str) -> dict[str, dict[int, int]]:
    """`nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory
    --format=csv,noheader,nounits`: per GPU UUID, pid -> bytes (MiB figures)."""
    out: dict[str, dict[int, int]] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        used = int(parts[2]) * MIB if parts[2].isdigit() else 0  # "[N/A]" counts 0
        per_pid = out.setdefault(parts[0], {})
        per_pid[int(parts[1])] = per_pid.get(int(parts[1]), 0) + used
    return out


def close(a: int, b: int) -> bool:
    return abs(a - b) <= TOLERANCE * max(a, b, 1)


def gib(n: int | None) -> str:
    return "-" if n is None else f"{n / (1 << 30):.3f} GiB"


def evaluate(procs: list[Proc], smi: dict[int, int], smi_used: int, gpu: dict | None) -> list[Row]:
    """The PASS/FAIL rows: `smi` is nvidia-smi's pid -> bytes on the GPU under
    test, `smi_used` its memory.used in bytes, `gpu` the agent's report of that
    GPU (None: the agent did not report it)."""
    rows = []
    for p in procs:
        got = smi.get(p.pid)
        rows.append(Row(f"{p.name} (pid {p.pid}) listed by nvidia-smi", f">= {gib(p.asked)}", gib(got),
                        got is not None and got >= p.asked))
    if gpu is None:
        rows.append(Row("the agent reports the GPU", "present", "absent", False))
        return rows
    rows.append(Row("per-process figures available", "yes",
                    f"no: {gpu['processes_unavailable']}" if "processes_unavailable" in gpu else "yes",
                    "processes_unavailable" not in gpu))
    reported = {p.get("uid"): p.get("used_bytes") for p in gpu.get("pods", [])}
    pods: dict[str, list[Proc]] = {}
    for p in procs:
        if p.pod:
            pods.setdefault(p.pod, []).append(p)
    for uid, members in sorted(pods.items()):
        want = sum(smi.get(p.pid, 0) for p in members)
        got = reported.get(uid)
        rows.append(Row(f"pod {uid[:8]}… ({'+'.join(p.name for p in members)})", gib(want), gib(got),
                        got is not None and close(got, want)))
    ours = {p.pid for p in procs if p.pod}
    want_outside = sum(b for pid, b in smi.items() if pid not in ours)
    got_outside = gpu.get("outside_pods_bytes")
    rows.append(Row("outside pods (every other process on the GPU)", gib(want_outside), gib(got_outside),
                    got_outside is not None and close(got_outside, want_outside)))
    got_used = gpu.get("used_bytes")
    rows.append(Row("GPU used (nvidia-smi memory.used)", gib(smi_used), gib(got_used),
                    got_used is not None and close(got_used, smi_used)))
    return rows


def expected_backend(controllers: str, regions: str, driver: str) -> tuple[str, str]:
    """What can enforce a pod's VRAM on this host (issue 34): "dmem" when the
    root cgroup's controllers have dmem and dmem.capacity lists a region of an
    NVIDIA GPU, else "nvml" on a driver R615 or later, else "none", with the
    phrases (comma-separated) the agent's reason must hold."""
    if "dmem" in controllers.split() and "nvidia/" in regions:
        return "dmem", ""
    try:
        major = int(driver.split(".")[0])
    except ValueError:
        major = 0
    if major >= 615:
        return "nvml", ""
    why = "no dmem controller" if "dmem" not in controllers.split() else "dmem.capacity lists no region"
    return "none", f"{why}, driver {driver} older than R615"


def evaluate_enforcement(controllers: str, regions: str, driver: str, gpu: dict | None,
                         pods: list[str]) -> list[Row]:
    """The enforcement rows: the agent, given limits for `pods` (mode on), must
    choose the backend this host offers and report each pod enforced by it,
    or, with none, accounted only saying why: never enforced without one."""
    want, words = expected_backend(controllers, regions, driver)
    e = (gpu or {}).get("enforcement") or {}
    got = e.get("backend", "-")
    reason = e.get("reason", "")
    rows = [Row("enforcement backend", want + (f" ({words})" if words else ""),
                got + (f" ({reason})" if reason else ""),
                got == want and all(w.strip() in reason for w in words.split(",") if w.strip()))]
    states = {p.get("uid"): p for p in e.get("pods", [])}
    for uid in pods:
        p = states.get(uid, {})
        state = p.get("state", "-")
        want_state = "accounted" if want == "none" else "enforced"
        rows.append(Row(f"pod {uid[:8]}… VRAM limit", want_state,
                        state + (f": {p['reason']}" if p.get("reason") else ""), state == want_state))
    return rows


def table(rows: list[Row]) -> str:
    heads = ("CHECK", "EXPECTED (nvidia-smi)", "AGENT", "RESULT")
    cells = [(r.check, r.expected, r.agent, "PASS" if r.ok else "FAIL") for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*heads)] + [fmt.format(*c) for c in cells])


# --- the impure part ---------------------------------------------------------------

@dataclass
class Cgroups:
    made: list[str] = field(default_factory=list)
    why_not: str = ""

    def usable(self) -> bool:
        if os.geteuid() != 0:
            self.why_not = "not root"
        elif not os.path.exists(os.path.join(CGROUP_ROOT, "cgroup.controllers")):
            self.why_not = f"{CGROUP_ROOT} is not cgroup v2"
        elif not os.access(CGROUP_ROOT, os.W_OK):
            self.why_not = f"{CGROUP_ROOT} is read-only here"
        return not self.why_not

    def pod_scope(self, pod_uid: str) -> str:
        """The kubelet's systemd-driver layout for a Burstable pod's container."""
        parts = ["kubepods.slice", "kubepods-burstable.slice",
                 f"kubepods-burstable-pod{pod_uid.replace('-', '_')}.slice",
                 f"cri-containerd-{uuid.uuid4().hex}{uuid.uuid4().hex}.scope"]
        path = CGROUP_ROOT
        for part in parts:
            path = os.path.join(path, part)
            if not os.path.isdir(path):
                os.mkdir(path)
                self.made.append(path)
        return path

    def move(self, pid: int, scope: str) -> None:
        with open(os.path.join(scope, "cgroup.procs"), "w") as f:
            f.write(str(pid))

    def remove(self) -> None:
        for path in reversed(self.made):
            try:
                os.rmdir(path)
            except OSError as e:
                print(f"gpu-check: could not remove {path}: {e}", file=sys.stderr)


def read_text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def main() -> int:
    ap = argparse.ArgumentParser(prog="scripts/gpu-check.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--agent", default=None, help="vramd-agent (default: build/bin/vramd-agent, else PATH)")
    ap.add_argument("--nvml-library", default="libnvidia-ml.so.1")
    ap.add_argument("--gpu", type=int, default=0, help="CUDA device ordinal / nvidia-smi index (default 0)")
    ap.add_argument("--sizes-mib", default="512,1024,2048,3072",
                    help="one process per size, MiB (default 512,1024,2048,3072)")
    ap.add_argument("--no-cgroups", action="store_true", help="leave every process outside pods")
    ap.add_argument("--alloc", type=int, help=argparse.SUPPRESS)  # child mode: bytes
    a = ap.parse_args()
    if a.alloc is not None:
        return allocate(a.alloc, a.gpu)

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    agent = a.agent or os.path.join(root, "build", "bin", "vramd-agent")
    if not os.access(agent, os.X_OK):
        agent = shutil.which("vramd-agent") or ""
    if not agent:
        print("gpu-check: no vramd-agent (build it: scripts/build.sh, or --agent PATH)")
        return 2
    if not shutil.which("nvidia-smi"):
        print("gpu-check: no nvidia-smi on PATH: this check needs an NVIDIA GPU and its driver")
        return 2
    q = run(["nvidia-smi", f"--id={a.gpu}", "--query-gpu=uuid,name,driver_version,memory.total",
             "--format=csv,noheader,nounits"])
    if q.returncode != 0 or not q.stdout.strip():
        print(f"gpu-check: nvidia-smi cannot query GPU {a.gpu}: {q.stdout}{q.stderr}")
        return 2
    gpu_uuid, gpu_name, driver, total_mib = [x.strip() for x in q.stdout.strip().split(",")]
    print(f"GPU {a.gpu}: {gpu_name}, {gpu_uuid}, driver {driver}, {total_mib} MiB; agent {agent}")

    sizes = [int(s) * MIB for s in a.sizes_mib.split(",") if s.strip()]
    procs = [Proc(f"p{i + 1}", b) for i, b in enumerate(sizes)]
    cg = Cgroups()
    pods_on = not a.no_cgroups and cg.usable()
    if pods_on:
        # p1 outside pods; p2 in pod A; the rest in pod B (two processes in one pod).
        pod_a, pod_b = str(uuid.uuid4()), str(uuid.uuid4())
        for i, p in enumerate(procs):
            p.pod = None if i == 0 else pod_a if i == 1 else pod_b
    else:
        print(f"gpu-check: pods not simulated ({'--no-cgroups' if a.no_cgroups else cg.why_not}): "
              "every process counts as outside pods")

    children: list[subprocess.Popen] = []

    def stop(*_: object) -> None:
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    try:
        for p in procs:
            child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--gpu", str(a.gpu),
                                      "--alloc", str(p.asked)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            children.append(child)
            p.pid = child.pid
            line = child.stdout.readline().strip() if child.stdout else ""
            if line != "READY":
                print(f"gpu-check: {p.name} could not allocate {gib(p.asked)}: {line or 'exited'}")
                return 2
            if p.pod:
                cg.move(child.pid, cg.pod_scope(p.pod))
            print(f"{p.name}: pid {p.pid}, {gib(p.asked)}, "
                  f"{'pod ' + p.pod if p.pod else 'outside pods'}")
        time.sleep(1)  # let the driver's accounting settle
        res = run([agent, "--once", "--source", "nvml", "--nvml-library", a.nvml_library,
                   "--node", "gpu-check", "--log-level", "debug"])
        apps = run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,used_memory",
                    "--format=csv,noheader,nounits"])
        used = run(["nvidia-smi", f"--id={a.gpu}", "--query-gpu=memory.used",
                    "--format=csv,noheader,nounits"])
        for line in res.stderr.splitlines():
            if "NVML" in line or "nvml" in line:
                print(f"agent: {line}")
        if res.returncode != 0:
            print(f"gpu-check: vramd-agent --once failed ({res.returncode}):\n{res.stderr}")
            return 2
        report = json.loads(res.stdout)
        print(f"agent report: {json.dumps(report)}")
        gpu = next((g for g in report.get("gpus", []) if g.get("uuid") == gpu_uuid), None)
        smi = parse_smi_apps(apps.stdout).get(gpu_uuid, {})
        rows = evaluate(procs, smi, int(used.stdout.strip()) * MIB, gpu)
        # Issue 34: enforcement on. The agent is given each pod's limit (its bytes,
        # soft = hard) as vramd's answer would carry it, and must say what this host
        # can enforce: the kernel's dmem cgroup, NVML's limits (R615+), or nothing.
        pod_uids = sorted({p.pod for p in procs if p.pod})
        limits = [{"uid": uid, "index": a.gpu, "soft": sum(p.asked for p in procs if p.pod == uid),
                   "hard": sum(p.asked for p in procs if p.pod == uid)} for uid in pod_uids]
        orders = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"gpu-check-orders-{os.getpid()}.json")
        with open(orders, "w") as f:
            json.dump({"enforce": {"mode": "on", "limits": limits}}, f)
        try:
            enf = run([agent, "--once", "--source", "nvml", "--nvml-library", a.nvml_library,
                       "--node", "gpu-check", "--enforce-orders", orders, "--cgroup-root", CGROUP_ROOT])
        finally:
            os.unlink(orders)
        controllers = read_text(os.path.join(CGROUP_ROOT, "cgroup.controllers")).strip()
        regions = read_text(os.path.join(CGROUP_ROOT, "dmem.capacity"))
        print(f"host: kernel {os.uname().release}, cgroup v2 controllers: {controllers or '(none)'}; "
              f"dmem regions: {regions.strip() or '(none)'}; driver {driver}")
        if enf.returncode != 0:
            print(f"gpu-check: vramd-agent --once --enforce-orders failed ({enf.returncode}):\n{enf.stderr}")
            return 2
        egpu = next((g for g in json.loads(enf.stdout).get("gpus", []) if g.get("uuid") == gpu_uuid), None)
        print(f"agent enforcement: {json.dumps((egpu or {}).get('enforcement'))}")
        rows += evaluate_enforcement(controllers, regions, driver, egpu, pod_uids)
        print()
        print(table(rows))
        failed = sum(not r.ok for r in rows)
        verdict = "PASS" if not failed else f"FAIL ({failed} of {len(rows)} checks)"
        print(f"\ngpu-check: {verdict}{'' if pods_on else ' (pods not simulated: ' + (cg.why_not or '--no-cgroups') + ')'}")
        return 0 if not failed else 1
    except KeyboardInterrupt:
        print("gpu-check: interrupted")
        return 1
    finally:
        for child in children:
            if child.stdin:
                child.stdin.close()
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        cg.remove()


if __name__ == "__main__":
    sys.exit(main())
