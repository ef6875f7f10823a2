"""vramd-agent, the real binary: `--once` against the fake NVML
(tests/fakes/fake_nvml, loaded with dlopen as the real libnvidia-ml.so.1 is)
and a fake /proc tree, `--once --source drm` against a fake /sys, and the
daemon pushing to a small HTTP server (the report, the token, a refusal, a
node without any GPU library that stays up idle).

Every multi-process NVML test runs against each driver family of the fake
(FAMILIES: r470 plain entry points, r535 _v3 with 32-byte entries, r550 _v3
with 24-byte entries and nvmlDeviceGetRunningProcessDetailList), with three
or more processes on one GPU, in different pods."""

import ctypes
import http.server
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import BIN_DIR, GI, clean_env, wait_for  # noqa: E402

AGENT = os.path.abspath(os.path.join(BIN_DIR, "vramd-agent"))
FAKE_NVML = os.environ.get("VRAMD_FAKE_NVML") or os.path.abspath(
    os.path.join(BIN_DIR, "..", "lib", "fake-nvml", "libnvidia-ml.so.1"))
MI = 1 << 20
POD_A = "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab"
POD_B = "7d6c5b4a-1111-2222-3333-444455556666"
POD_C = "c0ffee00-5555-4666-8777-888899990000"
FAMILIES = ("r470", "r535", "r550")  # the fake NVML's driver families (tests/fakes/fake_nvml)
H100_TOTAL = 85520809984


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def kubelet_cgroup(uid):
    """cgroup v2, systemd driver, containerd: the pod cgroup the kubelet creates."""
    return ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid.replace("-", "_")
            + ".slice/cri-containerd-" + "5d1f0e3c" * 8 + ".scope\n")


def fake_node(root, driver=None):
    """A fake /proc with two pods' processes and a host process, and the
    fake NVML's config (of `driver`'s family; the fake's default when None):
    GPU 0 busy (three compute processes, one of them graphics too), GPU 1
    lost, GPU 2 in MIG mode."""
    proc = os.path.join(root, "proc")
    write(os.path.join(proc, "4242", "cgroup"),
          "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
          + POD_A.replace("-", "_") + ".slice/cri-containerd-5d1f0e3c.scope\n")
    write(os.path.join(proc, "4243", "cgroup"),
          "12:memory:/kubepods/besteffort/pod" + POD_B + "/0d9c8b7a\n1:name=systemd:/kubepods/besteffort/pod"
          + POD_B + "/0d9c8b7a\n")
    write(os.path.join(proc, "900", "cgroup"), "0::/system.slice/xorg.service\n")
    config = {"gpus": [
        {"uuid": "GPU-5e2d0000-0000-0000-0000-000000000000", "name": "NVIDIA H100 80GB HBM3",
         "total": 85520809984, "used": 12 * GI,
         "compute": [{"pid": 4242, "used": 8 * GI}, {"pid": 4243, "used": 2 * GI}, {"pid": 900, "used": 100 * MI}],
         "graphics": [{"pid": 900, "used": 100 * MI}, {"pid": 4242, "used": 1 * GI}]},
        {"uuid": "GPU-lost", "name": "NVIDIA H100 80GB HBM3", "total": 85520809984, "used": 0, "lost": True},
        {"uuid": "GPU-mig", "name": "NVIDIA A100-SXM4-80GB", "total": 85899345920, "used": GI, "mig": True},
    ]}
    if driver:
        config["driver"] = driver
    path = os.path.join(root, "nvml.json")
    write(path, json.dumps(config))
    return proc, path


def h100_node(root, driver, compute, extra_gpus=()):
    """The issue's H100 (driver 580, total and used as NVML read them) with
    `compute`, and a fake /proc: pid 1000 outside any pod (a user's shell),
    2001, 2002, 2003 in pods A, B and C (kubelet cgroups)."""
    proc = os.path.join(root, "proc")
    write(os.path.join(proc, "1000", "cgroup"), "0::/user.slice/user-1000.slice/session-3.scope\n")
    for pid, uid in ((2001, POD_A), (2002, POD_B), (2003, POD_C)):
        write(os.path.join(proc, str(pid), "cgroup"), kubelet_cgroup(uid))
    gpus = [{"uuid": "GPU-5e2d0000-0000-0000-0000-000000000000", "name": "NVIDIA H100 80GB HBM3",
             "total": H100_TOTAL, "used": 9682092032, "compute": compute}, *extra_gpus]
    path = os.path.join(root, "nvml.json")
    write(path, json.dumps({"driver": driver, "gpus": gpus}))
    return proc, path


class DirOpens:
    """Counts the opens of one directory (opendir included) through inotify:
    a way to see an agent's passes that report nothing."""
    IN_OPEN, IN_CLOSE_NOWRITE = 0x20, 0x10

    def __init__(self, path):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        # Closes watched too: an open and its close alternate, so the kernel
        # never merges two opens into one event before they are read.
        if self.libc.inotify_add_watch(self.fd, os.fsencode(path), self.IN_OPEN | self.IN_CLOSE_NOWRITE) < 0:
            os.close(self.fd)
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
        self.opens = 0

    def count(self):
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return self.opens
            at = 0
            while at < len(data):
                _, mask, _, size = struct.unpack_from("iIII", data, at)
                if mask & self.IN_OPEN and size == 0:  # the directory itself, not an entry in it
                    self.opens += 1
                at += 16 + size

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


def run_once(args, env):
    out = subprocess.run([AGENT, "--once", *args], capture_output=True, text=True, timeout=30,
                         env=clean_env(env))
    return out.returncode, out.stdout, out.stderr


class Once(unittest.TestCase):
    def test_nvml_report_attributes_processes_to_pods(self):
        for driver in (None, *FAMILIES):
            with self.subTest(driver=driver or "default"):
                self.check_nvml_report(driver)

    def check_nvml_report(self, driver):
        with tempfile.TemporaryDirectory() as d:
            proc, config = fake_node(d, driver)
            rc, out, err = run_once(["--nvml-library", FAKE_NVML, "--proc-root", proc, "--sys-root", d],
                                    {"FAKE_NVML_CONFIG": config})
            self.assertEqual(rc, 0, err)
            report = json.loads(out)
            self.assertEqual(report["version"], 2)
            self.assertEqual(report["source"], "nvml")
            self.assertTrue(report["agent"].startswith("vramd-agent/"))
            self.assertEqual([g["index"] for g in report["gpus"]], [0, 2])  # GPU 1 was lost
            g0 = report["gpus"][0]
            self.assertEqual(g0["uuid"], "GPU-5e2d0000-0000-0000-0000-000000000000")
            self.assertEqual(g0["name"], "NVIDIA H100 80GB HBM3")
            self.assertEqual(g0["total_bytes"], 85520809984)
            self.assertEqual(g0["used_bytes"], 12 * GI)
            self.assertEqual(g0["outside_pods_bytes"], 100 * MI)
            self.assertFalse(g0["mig"])
            self.assertEqual(g0["pods"], [{"uid": POD_A, "used_bytes": 8 * GI}, {"uid": POD_B, "used_bytes": 2 * GI}])
            g2 = report["gpus"][1]
            self.assertTrue(g2["mig"])
            self.assertEqual(g2["total_bytes"], 85899345920)
            self.assertIn("GPU 1 skipped", err)
            self.assertIn("MIG mode", err)

    def test_the_issues_h100_every_family(self):
        """The issue's H100 on driver 580: nvidia-smi listed 1030, 3590, 2566
        and 1542 MiB; the landed agent reported "pods": []."""
        compute = [{"pid": 1000, "used": 1030 * MI}, {"pid": 2001, "used": 3590 * MI},
                   {"pid": 2002, "used": 2566 * MI}, {"pid": 2003, "used": 1542 * MI}]
        for driver in FAMILIES:
            with self.subTest(driver=driver), tempfile.TemporaryDirectory() as d:
                proc, config = h100_node(d, driver, compute)
                # Issue 32: the processes' utilization samples (NVML's 32-byte
                # layout, written by the fake): pod A's and B's processes ran,
                # pod C's has a zero sample; the GPU is 37 % busy.
                with open(config) as f:
                    cfg = json.load(f)
                cfg["gpus"][0]["samples"] = [{"pid": p["pid"], "sm": 0 if i == 2 else 20 + i}
                                             for i, p in enumerate(compute[1:])]
                cfg["gpus"][0]["utilization"] = 37
                with open(config, "w") as f:
                    json.dump(cfg, f)
                rc, out, err = run_once(["--source", "nvml", "--nvml-library", FAKE_NVML, "--proc-root", proc],
                                        {"FAKE_NVML_CONFIG": config})
                self.assertEqual(rc, 0, err)
                self.assertEqual(json.loads(out)["gpus"], [{
                    "index": 0, "uuid": "GPU-5e2d0000-0000-0000-0000-000000000000",
                    "name": "NVIDIA H100 80GB HBM3", "total_bytes": H100_TOTAL, "used_bytes": 9682092032,
                    "outside_pods_bytes": 1030 * MI, "mig": False, "utilization_percent": 37,
                    "pods": [{"uid": POD_A, "used_bytes": 3590 * MI, "active": True},
                             {"uid": POD_B, "used_bytes": 2566 * MI, "active": True},
                             {"uid": POD_C, "used_bytes": 1542 * MI}]}], out)

    def test_bad_input_attributes_nothing_wrong(self):
        """The issue's named bad input, every family: a PID that no longer
        exists (5555), a process in two pods' cgroups (2004: pod A's kubelet
        cgroup, a pod-B-shaped one inside), a GPU whose driver answers more
        entries than asked, and one whose list call fails with a count of 0."""
        inner = "/kubepods-besteffort-pod" + POD_B.replace("-", "_") + ".slice/x.scope\n"
        compute = [{"pid": 1000, "used": 1 * GI}, {"pid": 2002, "used": 2 * GI},
                   {"pid": 2004, "used": 4 * GI}, {"pid": 5555, "used": 8 * GI}]
        others = [{"uuid": "GPU-beyond", "name": "NVIDIA H100 80GB HBM3", "total": H100_TOTAL, "used": 8 * GI,
                   "count_beyond_buffer": True, "compute": compute},
                  {"uuid": "GPU-zero", "name": "NVIDIA H100 80GB HBM3", "total": H100_TOTAL, "used": 8 * GI,
                   "errors": {"nvmlDeviceGetComputeRunningProcesses": 999}, "compute": compute}]
        for driver in FAMILIES:
            with self.subTest(driver=driver), tempfile.TemporaryDirectory() as d:
                proc, config = h100_node(d, driver, compute, others)
                write(os.path.join(proc, "2004", "cgroup"), kubelet_cgroup(POD_A).rstrip("\n") + inner)
                rc, out, err = run_once(["--source", "nvml", "--nvml-library", FAKE_NVML, "--proc-root", proc],
                                        {"FAKE_NVML_CONFIG": config})
                self.assertEqual(rc, 0, err)
                g0, beyond, zero = json.loads(out)["gpus"]
                self.assertEqual(g0["outside_pods_bytes"], 1 * GI, out)  # 5555 is gone: nobody's
                self.assertEqual(g0["pods"], [{"uid": POD_A, "used_bytes": 4 * GI},
                                              {"uid": POD_B, "used_bytes": 2 * GI}], out)
                for g in (beyond, zero):
                    self.assertEqual(g.get("pods", []), [], out)
                    self.assertEqual(g.get("outside_pods_bytes", 0), 0, out)
                    self.assertIn("processes_unavailable", g, out)
                self.assertIn("more entries than", err)

    def test_drm_report_from_sysfs_and_fdinfo(self):
        with tempfile.TemporaryDirectory() as d:
            dev = os.path.join(d, "sys", "devices", "pci0000:00", "0000:03:00.0")
            write(os.path.join(dev, "mem_info_vram_total"), "25753026560\n")
            write(os.path.join(dev, "mem_info_vram_used"), "3221225472\n")
            os.makedirs(os.path.join(d, "sys", "class", "drm", "card0"))
            os.symlink(dev, os.path.join(d, "sys", "class", "drm", "card0", "device"))
            proc = os.path.join(d, "proc")
            write(os.path.join(proc, "77", "cgroup"), "0::/kubepods/pod" + POD_A + "/c0\n")
            fdinfo = ("pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\n"
                      "drm-client-id:\t4\ndrm-memory-vram:\t2097152 KiB\n")
            for fd in ("5", "6"):  # one client, two fds
                write(os.path.join(proc, "77", "fdinfo", fd), fdinfo)
                os.makedirs(os.path.join(proc, "77", "fd"), exist_ok=True)
                os.symlink("/dev/dri/renderD128", os.path.join(proc, "77", "fd", fd))
            rc, out, err = run_once(["--source", "drm", "--proc-root", proc, "--sys-root", os.path.join(d, "sys")], {})
            self.assertEqual(rc, 0, err)
            report = json.loads(out)
            self.assertEqual(report["source"], "drm")
            self.assertEqual(report["gpus"], [{"index": 0, "total_bytes": 25753026560, "used_bytes": 3221225472,
                                               "outside_pods_bytes": 0, "mig": False,
                                               "pods": [{"uid": POD_A, "used_bytes": 2 * GI}]}])

    def test_drm_without_permission_says_per_process_figures_are_unavailable(self):
        """/proc/PID/fd of a process the agent may not inspect (another
        user's, without CAP_SYS_PTRACE): the report says per-process figures
        are unavailable and attributes nothing; the log says so, with the fix.
        As root the agent runs as nobody (setpriv) to meet the refusal."""
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            dev = os.path.join(d, "sys", "devices", "pci0000:00", "0000:03:00.0")
            write(os.path.join(dev, "mem_info_vram_total"), "25753026560\n")
            write(os.path.join(dev, "mem_info_vram_used"), "3221225472\n")
            os.makedirs(os.path.join(d, "sys", "class", "drm", "card0"))
            os.symlink(dev, os.path.join(d, "sys", "class", "drm", "card0", "device"))
            proc = os.path.join(d, "proc")
            fdinfo = ("pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\n"
                      "drm-client-id:\t4\ndrm-memory-vram:\t2097152 KiB\n")
            for pid, uid in (("77", POD_A), ("78", POD_B), ("79", POD_C)):
                write(os.path.join(proc, pid, "cgroup"), kubelet_cgroup(uid))
                write(os.path.join(proc, pid, "fdinfo", "5"), fdinfo.replace("\t4\n", "\t" + pid + "\n"))
                os.makedirs(os.path.join(proc, pid, "fd"))
                os.symlink("/dev/dri/renderD128", os.path.join(proc, pid, "fd", "5"))
            for root, dirs, files in os.walk(d):
                for n in dirs:
                    os.chmod(os.path.join(root, n), 0o755)
                for n in files:
                    if not os.path.islink(os.path.join(root, n)):
                        os.chmod(os.path.join(root, n), 0o644)
            args = ["--source", "drm", "--proc-root", proc, "--sys-root", os.path.join(d, "sys")]
            rc, out, err = run_once(args, {})
            self.assertEqual(rc, 0, err)
            pods = json.loads(out)["gpus"][0]["pods"]
            self.assertEqual(len(pods), 3, out)  # readable: all three attributed
            os.chmod(os.path.join(proc, "78", "fd"), 0o700)  # pid 78's fds: its owner's (and root's) only
            cmd = [AGENT, "--once", *args]
            if os.geteuid() == 0:
                cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
            ran = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=clean_env({}))
            self.assertEqual(ran.returncode, 0, ran.stderr)
            g = json.loads(ran.stdout)["gpus"][0]
            self.assertNotIn("pods", g, ran.stdout)
            self.assertNotIn("outside_pods_bytes", g, ran.stdout)
            self.assertEqual(g["used_bytes"], 3221225472)
            self.assertIn("cannot read /proc/PID/fdinfo of 1 process(es) (permission denied, e.g. pid 78)",
                          g["processes_unavailable"])
            self.assertIn("CAP_SYS_PTRACE", g["processes_unavailable"])
            self.assertEqual(ran.stderr.count("per-process figures unavailable"), 1, ran.stderr)

    def test_once_without_any_source_says_why(self):
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run_once(["--nvml-library", os.path.join(d, "libnvidia-ml.so.1"), "--sys-root", d], {})
            self.assertEqual(rc, 1)
            self.assertEqual(out, "")
            self.assertIn("cannot load the NVML library", err)
            self.assertIn("no DRM card with VRAM figures", err)


class Recorder(http.server.BaseHTTPRequestHandler):
    """Records every PUT; answers with the server's `answers` for its path,
    else its `answer` (status, body)."""

    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.requests.append((self.path, self.headers.get("Authorization"), body))
        status, text = self.server.answers.get(self.path, self.server.answer)
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class Daemon(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
        self.server.requests = []
        self.server.answer = (200, '{"node":"gpu-1"}')
        self.server.answers = {}
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.proc = None
        self.log = None
        self.others = []  # more agents, stopped with the test

    def tearDown(self):
        for p in [self.proc, *self.others]:
            if p and p.poll() is None:
                p.kill()
                p.wait()
        if self.log:
            self.log.close()
        self.server.shutdown()
        self.server.server_close()
        self.tmp.cleanup()

    def start(self, args, env=None):
        self.log = open(os.path.join(self.tmp.name, "agent.log"), "w+")
        self.proc = subprocess.Popen([AGENT, "--server", self.url, "--node", "gpu-1", "--interval", "100ms", *args],
                                     stdout=subprocess.DEVNULL, stderr=self.log, env=clean_env(env))

    def logged(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=10)
        self.assertEqual(rc, 0, self.logged())
        self.assertLess(time.monotonic() - t0, 3, "SIGTERM must stop the agent at once")

    def test_pushes_the_report_with_the_token(self):
        proc, config = fake_node(self.tmp.name)
        token = os.path.join(self.tmp.name, "token")
        write(token, "t0ken\n")
        self.start(["--nvml-library", FAKE_NVML, "--proc-root", proc, "--token-file", token],
                   {"FAKE_NVML_CONFIG": config})
        wait_for(lambda: len(self.server.requests) >= 2, 20, message="two pushes")
        self.stop()
        path, auth, body = self.server.requests[0]
        self.assertEqual(path, "/v1/nodes/gpu-1/usage")
        self.assertEqual(auth, "Bearer t0ken")
        report = json.loads(body)
        self.assertEqual(report["gpus"][0]["pods"][0], {"uid": POD_A, "used_bytes": 8 * GI})

    def test_a_refused_report_is_logged_and_not_hammered(self):
        """A refusal waits a minute before the next report: the log says so,
        and while a second agent (same interval, accepted) pushes ten more
        reports, the refused one pushes none."""
        proc, config = fake_node(self.tmp.name)
        self.server.answers["/v1/nodes/gpu-1/usage"] = (400, '{"error":"unknown node gpu-1"}')
        self.start(["--nvml-library", FAKE_NVML, "--proc-root", proc], {"FAKE_NVML_CONFIG": config})
        self.others.append(subprocess.Popen(
            [AGENT, "--server", self.url, "--node", "gpu-2", "--interval", "100ms", "--nvml-library", FAKE_NVML,
             "--proc-root", proc], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=clean_env({"FAKE_NVML_CONFIG": config})))

        def pushes(node):
            return [i for i, (path, _, _) in enumerate(self.server.requests) if path == f"/v1/nodes/{node}/usage"]
        wait_for(lambda: pushes("gpu-1"), 20, message="a push")
        refused = 'vramd refused the report (HTTP 400): {"error":"unknown node gpu-1"}; next try in 60000 ms'
        wait_for(lambda: refused in self.logged(), 10, message="the refusal logged with its one-minute wait")
        first = pushes("gpu-1")[0]
        wait_for(lambda: len([i for i in pushes("gpu-2") if i > first]) >= 10, 20,
                 message="ten reports of the accepted agent after the refused one's first")
        self.assertEqual(len(pushes("gpu-1")), 1)
        self.stop()

    def test_a_list_failing_validation_is_logged_once_with_its_counts(self):
        """A GPU whose process list fails validation every pass (a pid twice
        in one list) is logged once with the raw counts, and each report
        carries the count of rejected lists; every family."""
        compute = [{"pid": 1000, "used": 1 * GI}, {"pid": 2001, "used": 2 * GI}, {"pid": 2001, "used": 3 * GI}]
        for driver in FAMILIES:
            with self.subTest(driver=driver):
                self.server.requests.clear()
                proc, config = h100_node(os.path.join(self.tmp.name, driver), driver, compute)
                self.start(["--nvml-library", FAKE_NVML, "--proc-root", proc], {"FAKE_NVML_CONFIG": config})
                wait_for(lambda: len(self.server.requests) >= 3, 20, message="three pushes")
                self.stop()
                log = self.logged()
                self.assertEqual(log.count("fails validation"), 1, log)
                self.assertRegex(log, r"3 entries .*1 repeated pid", log)
                reports = [json.loads(body)["gpus"][0] for _, _, body in self.server.requests]
                for g in reports:
                    self.assertEqual(g.get("pods", []), [])
                    self.assertIn("processes_unavailable", g)
                counts = [g["invalid_process_lists"] for g in reports]
                self.assertEqual(counts, sorted(counts))
                self.assertGreaterEqual(counts[-1], 3)
                self.log.close()
                self.log = None

    def test_without_nvml_it_stays_up_idle_and_logs_once(self):
        """No NVML library, no DRM card: the agent stays up and tries again
        every pass (each lists SYS_ROOT/class/drm, counted here through
        inotify), logging the problem once over ten more passes."""
        drm = os.path.join(self.tmp.name, "class", "drm")
        os.makedirs(drm)  # empty: no card
        with DirOpens(drm) as opens:
            self.start(["--nvml-library", os.path.join(self.tmp.name, "libnvidia-ml.so.1"),
                        "--sys-root", self.tmp.name])
            wait_for(lambda: "no GPU source on this node, idle" in self.logged(), 20, message="the idle line")
            seen = opens.count()
            wait_for(lambda: opens.count() >= seen + 10, 20, message="ten more passes")
        self.assertIsNone(self.proc.poll(), "the agent must keep running")
        self.assertEqual(self.server.requests, [])
        self.assertEqual(self.logged().count("no GPU source on this node"), 1, self.logged())
        self.stop()


if __name__ == "__main__":
    unittest.main()
