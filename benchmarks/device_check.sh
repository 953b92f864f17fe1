#!/usr/bin/env bash
# The checks that need a GPU machine with many cores (an H100 or H200 with 16 cores), prepared to
# run as two calls of under 10 minutes each from the repository's root:
#
#   bash benchmarks/device_check.sh cores   # rollouts vs minimax 4 and alphabeta 8 on 1..16
#                                           # threads, the GPU's supervised pass, the CUDA plumbing
#   bash benchmarks/device_check.sh run     # the default run on the GPU (target: <= 5 min)
#   bash benchmarks/device_check.sh strong  # --preset strong on the GPU (target: <= 20 min),
#                                           # bounded by $STRONG_MINUTES (default 9) a call: the
#                                           # same call again goes on from where it stopped
#
# Such a machine has torch, numba and numpy but not gymnasium, stable-baselines3 or sb3-contrib,
# and reaches no package index: their wheels and this project's (for its entry points) travel in
# .whl/, made here with
#
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux2014_x86_64 -d .whl gymnasium==1.2.0 farama-notifications \
#       stable-baselines3==2.9.2 sb3-contrib==2.9.2
#   pip wheel --no-deps -w .whl .
#
# (.whl/ ignored by git). The code that runs is the working tree's (first on PYTHONPATH); what it
# prints also goes to $OUT (default /tmp/device_check). The strong run's folder, runs/gpu-strong,
# is ignored by git, so it stays between calls on the same machine; its report and play weights
# are copied to $OUT (measure them here with benchmarks/bench_agent.py).
set -uo pipefail
part=${1:-}
if [[ "$part" != cores && "$part" != run && "$part" != strong ]]; then
    echo "usage: bash benchmarks/device_check.sh cores|run|strong [flags]" >&2
    exit 2
fi
shift
out=${OUT:-/tmp/device_check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/device_site .whl/*.whl || exit 1
    export PYTHONPATH="$PWD:/tmp/device_site"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 \
    | tee "$out/gpu.txt"
case "$part" in
    cores)
        for opponent in minimax:depth=4 alphabeta:max_depth=8; do
            timeout 150 python3 benchmarks/bench_rollout_scaling.py --opponent "$opponent" \
                --rounds 2 --seconds 1.5 "$@" 2>&1 | tee -a "$out/rollout_scaling.txt"
        done
        timeout 240 python3 benchmarks/gpu_check.py --skip-run 2>&1 | tee "$out/gpu_check.txt"
        ;;
    run)
        timeout 560 python3 benchmarks/gpu_check.py --run-only --max-minutes 8 "$@" 2>&1 \
            | tee "$out/default_run.txt"
        ;;
    strong)
        minutes=${STRONG_MINUTES:-9}
        resume=()
        [[ -f runs/gpu-strong/checkpoint.zip ]] && resume=(--resume)
        timeout $((60 * minutes + 45)) python3 -m connectx_gym.cli train --preset strong \
            --out runs/gpu-strong --max-minutes "$minutes" --no-progress-bar "${resume[@]}" "$@" \
            2>&1 | tee -a "$out/strong_run.txt"
        cp runs/gpu-strong/report.md runs/gpu-strong/final.npz "$out/" 2>/dev/null
        ;;
esac
