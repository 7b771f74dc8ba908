#!/usr/bin/env bash
# The GPU check in one call (bench/gpu_check.py says what it measures): the trainer on CUDA with
# bf16 / fp16 autocast against fp32, NVML energy against the integrated power reading, two trials
# sharing one GPU, the multi-device path on NCCL, the agent's heartbeat. Writes gpu_check.json
# under --out (default: $OUT if set, else docs/results/); without CUDA it runs what a CPU can and
# the JSON says, for each part it skips, why.
#
#   bench/gpu_check.sh [--out DIR] [--quick] [--data FILE] [--parts NAME ...]
#
# PYTHON picks the interpreter (default: the repository's .venv, else python3); GPU_CHECK_TIMEOUT_S
# bounds the whole call (default 470 s: within 8 minutes with the start-up).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
if [ ! -x "$python" ]; then
  python=python3
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,power.limit,memory.total --format=csv >&2 || true
fi
exec timeout --kill-after=10 "${GPU_CHECK_TIMEOUT_S:-470}" "$python" bench/gpu_check.py "$@"
