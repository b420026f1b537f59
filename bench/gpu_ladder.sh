#!/usr/bin/env bash
# The GPU run of issue 14 in one command, on a machine with a CUDA device, koe[gpu] and the benchmark
# package (bench/) installed (docs/deploy.md, "GPU capacity"):
#   1. what the machine is (nvidia-smi, torch's view of the device) -> OUT/bench-torch-machine.txt
#   2. the torch engine's weights: `koe install --engine torch` (official if reachable, else derived;
#      KOE_WEIGHTS=official|derived forces one)
#   3. the CUDA tests (tests/engine/test_torch_cuda.py): stages against the int8 graph, a batch member
#      equal to itself alone; a failure stops the run before any timing -> OUT/bench-torch-cuda-tests.txt
#   4. the capacity ladder, batching on and off, and the engine's throughput by batch size, also without
#      bucketed shapes; the buckets each ladder used, the warm-up's time, the CUDA graphs captured
#      (`koe bench --engine torch`) -> OUT/bench-torch-cuda.json, OUT/bench-torch-cuda.png
#
# Usage: bench/gpu_ladder.sh [OUT] [extra koe bench arguments, e.g. --quick or --max-sessions 64]
# OUT defaults to bench-results. KOE_BENCH_DEVICE (default cuda) picks the device; KOE_BENCH_LIMIT_S
# (default 1800) bounds the ladder, which stops at each mode's first failing level.
set -euo pipefail

out="${1:-bench-results}"
shift || true
device="${KOE_BENCH_DEVICE:-cuda}"
limit_s="${KOE_BENCH_LIMIT_S:-1800}"
python="${PYTHON:-python3}"
machine="$out/bench-torch-machine.txt"
mkdir -p "$out"

"$python" - "$device" >"$machine" <<'EOF'
import sys

import torch

device = sys.argv[1]
print(f"torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}")
if device.startswith("cuda"):
    if not torch.cuda.is_available():
        sys.exit(
            f"device {device!r} was requested but torch sees no CUDA device; "
            "KOE_BENCH_DEVICE=cpu runs on the CPU"
        )
    index = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(index)
    print(f"{device}: {props.name}, {props.total_memory / 2**30:.1f} GiB, {props.multi_processor_count} SMs")
EOF
if [[ "$device" == cuda* ]] && command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >>"$machine"
fi
cat "$machine"

"$python" -m koe.cli install --engine torch --weights "${KOE_WEIGHTS:-auto}"

if [[ "$device" == cuda* ]]; then
    "$python" -m pytest -q -p no:cacheprovider tests/engine/test_torch_cuda.py 2>&1 \
        | tee "$out/bench-torch-cuda-tests.txt"
fi

timeout "$limit_s" "$python" -m koe.cli bench --engine torch --device "$device" -o "$out" "$@"
ls -l "$out"
