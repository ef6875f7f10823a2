"""The verdicts of the GPU check (scripts/gpu-check.sh, scripts/lib/gpu_check.py):
its pure part, `evaluate()` and `parse_smi_apps()`, on the issue's H100 scenario
as nvidia-smi and the agent would print it, the agent right and the agent as it
was (the 32-byte stride: `"pods":[]`). The check itself needs a GPU and is run
by hand (docs/agent.md); these cases show that its table can say FAIL.
"""

from __future__ import annotations

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "lib"))

import gpu_check  # noqa: E402
from gpu_check import MIB, Proc, evaluate, parse_smi_apps  # noqa: E402

UUID = "GPU-4a3b2c1d-0000-1111-2222-333344445555"
POD_A, POD_B = "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab", "7d6c5b4a-1111-2222-3333-444455556666"
# The issue's four processes: 1030 MiB outside pods, 3590 in pod A, 2566 and 1542 in pod B.
SMI = f"""{UUID}, 1001, 1030
{UUID}, 1002, 3590
{UUID}, 1003, 2566
{UUID}, 1004, 1542
GPU-other, 2001, 700
"""


def procs() -> list[Proc]:
    return [Proc("p1", 512 * MIB, None, 1001), Proc("p2", 3072 * MIB, POD_A, 1002),
            Proc("p3", 2048 * MIB, POD_B, 1003), Proc("p4", 1024 * MIB, POD_B, 1004)]


def report(pods: list[dict], outside: int, **extra: object) -> dict:
    return {"index": 0, "uuid": UUID, "total_bytes": 85520809984, "used_bytes": 9234 * MIB,
            "outside_pods_bytes": outside, "pods": pods, **extra}


def verdicts(rows: list[gpu_check.Row]) -> dict[str, bool]:
    return {r.check: r.ok for r in rows}


class GpuCheckVerdicts(unittest.TestCase):

    def setUp(self) -> None:
        self.smi = parse_smi_apps(SMI)[UUID]

    def test_parse_smi_apps_per_gpu_in_bytes(self):
        self.assertEqual(parse_smi_apps(SMI + "GPU-x, 3001, [N/A]\nnot, a, row, here\n"),
                         {UUID: {1001: 1030 * MIB, 1002: 3590 * MIB, 1003: 2566 * MIB, 1004: 1542 * MIB},
                          "GPU-other": {2001: 700 * MIB}, "GPU-x": {3001: 0}})

    def test_a_right_report_passes_every_row(self):
        gpu = report([{"uid": POD_A, "used_bytes": 3590 * MIB},
                      {"uid": POD_B, "used_bytes": (2566 + 1542) * MIB + 5 * MIB}], 1030 * MIB)
        rows = evaluate(procs(), self.smi, 9234 * MIB, gpu)
        self.assertEqual([r for r in rows if not r.ok], [], gpu_check.table(rows))
        self.assertEqual(len(rows), 4 + 1 + 2 + 2)  # processes, availability, pods, outside + used

    def test_the_32_byte_stride_report_of_the_issue_fails(self):
        # The landed agent on driver 580: only the first process, outside pods.
        gpu = report([], 1080033902)
        v = verdicts(evaluate(procs(), self.smi, 9234 * MIB, gpu))
        self.assertFalse(v[f"pod {POD_A[:8]}… (p2)"])
        self.assertFalse(v[f"pod {POD_B[:8]}… (p3+p4)"])
        self.assertTrue(v["outside pods (every other process on the GPU)"])  # 1030 MiB was right
        self.assertTrue(v["GPU used (nvidia-smi memory.used)"])

    def test_bytes_more_than_2_percent_off_fail(self):
        gpu = report([{"uid": POD_A, "used_bytes": int(3590 * MIB * 1.03)},
                      {"uid": POD_B, "used_bytes": 4108 * MIB}], 1030 * MIB)
        v = verdicts(evaluate(procs(), self.smi, 9234 * MIB, gpu))
        self.assertFalse(v[f"pod {POD_A[:8]}… (p2)"])
        self.assertTrue(v[f"pod {POD_B[:8]}… (p3+p4)"])

    def test_a_process_attributed_to_the_wrong_pod_fails_both(self):
        gpu = report([{"uid": POD_A, "used_bytes": (3590 + 1542) * MIB},
                      {"uid": POD_B, "used_bytes": 2566 * MIB}], 1030 * MIB)
        v = verdicts(evaluate(procs(), self.smi, 9234 * MIB, gpu))
        self.assertFalse(v[f"pod {POD_A[:8]}… (p2)"])
        self.assertFalse(v[f"pod {POD_B[:8]}… (p3+p4)"])

    def test_other_processes_count_as_outside(self):
        smi = {**self.smi, 5005: 200 * MIB}  # another user's process on the GPU
        gpu = report([{"uid": POD_A, "used_bytes": 3590 * MIB},
                      {"uid": POD_B, "used_bytes": 4108 * MIB}], 1030 * MIB)
        v = verdicts(evaluate(procs(), smi, 9434 * MIB, gpu))
        self.assertFalse(v["outside pods (every other process on the GPU)"])
        gpu["outside_pods_bytes"] = 1230 * MIB
        v = verdicts(evaluate(procs(), smi, 9434 * MIB, gpu))
        self.assertTrue(v["outside pods (every other process on the GPU)"])

    def test_unavailable_figures_missing_gpu_and_missing_process_fail(self):
        gpu = report([], 0, processes_unavailable="DRM fdinfo not readable")
        gpu.pop("outside_pods_bytes")
        v = verdicts(evaluate(procs(), self.smi, 9234 * MIB, gpu))
        self.assertFalse(v["per-process figures available"])
        self.assertFalse(v["outside pods (every other process on the GPU)"])
        rows = evaluate(procs(), self.smi, 9234 * MIB, None)
        self.assertEqual([r.check for r in rows if not r.ok], ["the agent reports the GPU"])
        smi = {pid: b for pid, b in self.smi.items() if pid != 1003}
        v = verdicts(evaluate(procs(), smi, 9234 * MIB, None))
        self.assertFalse(v["p3 (pid 1003) listed by nvidia-smi"])
        # Listed, but with less than it allocated.
        smi = {**self.smi, 1004: 1000 * MIB}
        v = verdicts(evaluate(procs(), smi, 9234 * MIB, None))
        self.assertFalse(v["p4 (pid 1004) listed by nvidia-smi"])


class EnforcementVerdicts(unittest.TestCase):
    """Issue 34: the enforcement rows on the lent H100 (kernel 6.18 without
    dmem, driver 580) and on hosts that can enforce."""
    H100 = "cpuset cpu io memory hugetlb pids"
    REASON = ("no dmem controller (cgroup v2 controllers: cpuset cpu io memory hugetlb pids), driver 580.159.04 "
              "older than R615 (NVML has no nvmlDeviceSetMemoryLimits_v1)")

    def gpu(self, backend, reason, states):
        return {"enforcement": {"backend": backend, "reason": reason,
                                "pods": [{"uid": u, "state": s, **({"reason": r} if r else {})} for u, s, r in states]}}

    def test_the_h100_machine_is_accounted_only_and_says_why(self):
        gpu = self.gpu("none", self.REASON, [(POD_A, "accounted", self.REASON), (POD_B, "accounted", self.REASON)])
        rows = gpu_check.evaluate_enforcement(self.H100, "", "580.159.04", gpu, [POD_A, POD_B])
        self.assertEqual([r for r in rows if not r.ok], [], gpu_check.table(rows))
        self.assertEqual(len(rows), 3)

    def test_claiming_enforcement_without_a_backend_fails(self):
        gpu = self.gpu("dmem", "", [(POD_A, "enforced", "")])
        v = verdicts(gpu_check.evaluate_enforcement(self.H100, "", "580.159.04", gpu, [POD_A]))
        self.assertFalse(v["enforcement backend"])
        self.assertFalse(v[f"pod {POD_A[:8]}… VRAM limit"])
        gpu = self.gpu("none", "no dmem controller", [(POD_A, "accounted", "no dmem controller")])
        v = verdicts(gpu_check.evaluate_enforcement(self.H100, "", "580.159.04", gpu, [POD_A]))
        self.assertFalse(v["enforcement backend"], "the reason must name the driver too")

    def test_hosts_that_can_enforce_expect_it(self):
        self.assertEqual(gpu_check.expected_backend(self.H100 + " dmem", "nvidia/0000:3b:00.0/vidmem 85520809984\n",
                                                    "580.159.04"), ("dmem", ""))
        self.assertEqual(gpu_check.expected_backend(self.H100, "", "615.20.01"), ("nvml", ""))
        self.assertEqual(gpu_check.expected_backend(self.H100 + " dmem", "drm/0000:03:00.0/vram0 1\n", "580.159.04"),
                         ("none", "dmem.capacity lists no region, driver 580.159.04 older than R615"))
        gpu = self.gpu("nvml", "", [(POD_A, "failed", "nvmlDeviceSetMemoryLimits_v1: Insufficient Permissions (4)")])
        v = verdicts(gpu_check.evaluate_enforcement(self.H100, "", "615.20.01", gpu, [POD_A]))
        self.assertTrue(v["enforcement backend"])
        self.assertFalse(v[f"pod {POD_A[:8]}… VRAM limit"])
        self.assertFalse(verdicts(gpu_check.evaluate_enforcement(self.H100, "", "615.20.01", None, [POD_A]))["enforcement backend"])


if __name__ == "__main__":
    unittest.main()
