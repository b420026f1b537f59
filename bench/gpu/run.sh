#!/usr/bin/env bash
# The GPU run from the kit (make gpu-kit; docs/deploy.md, "A borrowed GPU"), one command on a machine with
# no network that has Python, torch, onnx, onnxruntime, transformers and numpy:
#   1. both parts checked against their SHA256SUMS, before anything is installed
#   2. the kit's wheels installed into a scratch folder (no index, no dependencies resolved: the kit pins them)
#   3. what the machine is -> OUT/machine.txt
#   4. the CUDA tests, the weights derived from the int8 wheels on the way (skipped without CUDA)
#      -> OUT/cuda-tests.txt; a failure stops the run before any timing
#   5. the capacity ladder, batching on and off, and throughput by batch size (python -m koe_bench.gpukit run);
#      the engine alone also without bucketed shapes, first calls included; the buckets used, the warm-up's
#      time, the CUDA graphs captured and the engine's dtype -> OUT/bench-torch-<device>.json (and its PNG
#      where matplotlib is installed), OUT/run.log
#
# Usage: bench/gpu/run.sh OUT [--quick] [--max-sessions N] [--no-buckets]
# (--no-buckets: KOE_TORCH_BUCKETS=0, the engine pads nothing, warms nothing and captures no CUDA graph.)
# KOE_GPU_KIT (default gpu-kit) is the kit; KOE_BENCH_DEVICE (default cuda) the device; PYTHON the
# interpreter; KOE_BENCH_LIMIT_S (default 360) bounds the ladder, so the whole run stays within 8 minutes;
# KOE_TORCH_DTYPE (default float16 on CUDA, float32 elsewhere) the ladder engine's format (the CUDA tests
# check float32 and float16 both).
# The JSON is written after each step: a ladder cut short still leaves what it measured.
set -euo pipefail

out="${1:?usage: bench/gpu/run.sh OUT [--quick] [--max-sessions N] [--no-buckets]}"
shift
kit="${KOE_GPU_KIT:-gpu-kit}"
device="${KOE_BENCH_DEVICE:-cuda}"
python="${PYTHON:-python3}"
limit_s="${KOE_BENCH_LIMIT_S:-360}"
if [[ "$device" == cuda* ]]; then default_dtype=float16; else default_dtype=float32; fi
export KOE_TORCH_DTYPE="${KOE_TORCH_DTYPE:-$default_dtype}"
args=()
for arg in "$@"; do
    if [[ "$arg" == --no-buckets ]]; then export KOE_TORCH_BUCKETS=0; else args+=("$arg"); fi
done
work="$(mktemp -d)"
mkdir -p "$out"
started=$SECONDS

for part in "$kit/part1" "$kit/part2"; do
    (cd "$part" && sha256sum --quiet -c SHA256SUMS) || { echo "$part: a file is missing or corrupt" >&2; exit 1; }
done
echo "kit verified ($((SECONDS - started)) s); the ladder's engine in $KOE_TORCH_DTYPE, buckets ${KOE_TORCH_BUCKETS:-by device}"

"$python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --target "$work/site" \
    --find-links "$kit/part1/wheels" --find-links "$kit/part2/wheels" -r "$kit/part1/requirements.txt"
export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}" KOE_CACHE_DIR="$work/cache" KOE_GPU_KIT="$kit"
echo "kit installed ($((SECONDS - started)) s)"

{
    "$python" -c 'import platform, torch; print(platform.platform(), "python", platform.python_version()); print("torch", torch.__version__, "CUDA", torch.version.cuda, "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")'
    nproc
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    fi
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

env -u KOE_TORCH_DTYPE -u KOE_TORCH_BUCKETS "$python" -m pytest -q -p no:cacheprovider tests/engine/test_torch_cuda.py \
    >"$out/cuda-tests.txt" 2>&1 \
    || { tail -30 "$out/cuda-tests.txt"; echo "the CUDA tests failed: no timing" >&2; exit 1; }
tail -3 "$out/cuda-tests.txt"
echo "tests done ($((SECONDS - started)) s)"

timeout "$limit_s" "$python" -m koe_bench.gpukit run --kit "$kit" --out "$out" --device "$device" "${args[@]}" \
    >"$out/run.log" 2>&1 || { status=$?; tail -30 "$out/run.log"; exit "$status"; }
tail -5 "$out/run.log"
echo "done in $((SECONDS - started)) s"
ls -l "$out"
