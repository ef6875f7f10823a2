#!/bin/bash
# What a session lent the GPU machine runs there (the device tool), after
# scripts/gpu-bundle.sh build-gpu here and with build-gpu carried: the host's
# facts (GPU, driver, cgroup controllers, the NVML entry points present) and
# the GPU check twice (default sizes, then a larger mix), into $OUT.
#   run: bash scripts/gpu-device-run.sh build-gpu     (carry: build-gpu)
B=$(cd "${1:-build-gpu}" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
{
  date -u; id; uname -r
  nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,memory.used,mig.mode.current --format=csv
  nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv
  echo "controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
  ls /sys/fs/cgroup | grep -i dmem || echo "no dmem.* files at the root"
  ldconfig -p | grep -i -e nvidia-ml -e libcuda
  L=$(ldconfig -p | awk '/libnvidia-ml.so.1 /{print $NF; exit}')
  echo "NVML: $L"
  python3 - "$L" <<'PY'
import ctypes, sys
l = ctypes.CDLL(sys.argv[1])
for s in ["nvmlDeviceSetMemoryLimits_v1", "nvmlDeviceGetMemoryLimits_v1", "nvmlDeviceGetRunningProcessDetailList",
          "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetMemoryInfo_v2", "nvmlSystemGetDriverVersion",
          "nvmlDeviceGetPciInfo_v3"]:
    print(f"  {s}: {'present' if hasattr(l, s) else 'absent'}")
PY
} > "$O/host.txt" 2>&1
L=$(ldconfig -p | awk '/libnvidia-ml.so.1 /{print $NF; exit}')
timeout 150 bash scripts/gpu-check.sh --agent "$B/vramd-agent" --nvml-library "$L" > "$O/gpu-check-1.txt" 2>&1
echo "exit $?" >> "$O/gpu-check-1.txt"
timeout 150 bash scripts/gpu-check.sh --agent "$B/vramd-agent" --nvml-library "$L" --sizes-mib 256,8192,1024,20480,640 > "$O/gpu-check-2.txt" 2>&1
echo "exit $?" >> "$O/gpu-check-2.txt"
cat "$O/host.txt"; echo ----; cat "$O/gpu-check-1.txt"; echo ----; tail -n 30 "$O/gpu-check-2.txt"
