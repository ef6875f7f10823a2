#!/usr/bin/env bash
# The GPU check: the real vramd-agent against a real NVIDIA GPU, checked with
# nvidia-smi (scripts/lib/gpu_check.py says exactly what it checks). Builds
# nothing; needs python3, nvidia-smi, libcuda.so.1 and a built vramd-agent
# (build/bin/vramd-agent, or --agent PATH). Run as root to simulate pods
# (cgroup v2); otherwise every process counts as outside pods, and it says so.
#   scripts/gpu-check.sh                      4 processes: 512, 1024, 2048, 3072 MiB
#   scripts/gpu-check.sh --gpu 1 --sizes-mib 256,256,4096
# Prints a PASS/FAIL table; exit 0 all passed, 1 a check failed, 2 could not run.
# Not part of CI (no GPU there); docs/agent.md has the last run's output.
set -euo pipefail
exec python3 "$(dirname "$0")/lib/gpu_check.py" "$@"
