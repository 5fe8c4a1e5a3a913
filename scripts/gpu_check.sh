#!/usr/bin/env bash
# The course's checks on a CUDA machine, in one time-boxed go (what a maintainer with a GPU runs):
#
#   scripts/gpu_check.sh OUT_DIR [DEADLINE_S]
#
# 1. tests/test_cuda.py (seqlab against torch.nn and cuDNN on the GPU, the CUDA-graphed scan);
# 2. the benchmarks on the GPU: bench_rnn (seqlab's scan, eager and CUDA-graphed, against cuDNN),
#    bench_attention and bench_transformer (explicit and fused paths against torch), bench_cost
#    (notebook 17's curves as training steps, then the lengths where the explicit n x n matrices run out
#    of memory and the fused kernel does not);
# 3. every notebook executed with SEQLAB_DEVICE=cuda (copies in OUT_DIR/notebooks, the committed ones
#    untouched), longest first, side by side, in the time left before DEADLINE_S (default 540 s).
# Each step's output is in OUT_DIR/*.txt. Uses $PYTHON (default python3) with seqlab from lib/.
set -u
out=${1:?usage: scripts/gpu_check.sh OUT_DIR [DEADLINE_S]}
deadline=${2:-540}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
py=${PYTHON:-python3}
cd "$(dirname "$0")/.." || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/lib${PYTHONPATH:+:$PYTHONPATH}" MPLBACKEND=Agg

step() {   # step NAME SECONDS COMMAND...: run with a time limit, log to OUT_DIR/NAME.txt, note the status
    local name=$1 limit=$2; shift 2
    echo "== $name (limit ${limit}s, at ${SECONDS}s): $*" | tee -a "$out/summary.txt"
    timeout "$limit" "$@" >"$out/$name.txt" 2>&1
    echo "   exit $? after $((SECONDS))s" | tee -a "$out/summary.txt"
    tail -n 30 "$out/$name.txt"
}

{ nvidia-smi -L; "$py" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(), 'cuda', torch.version.cuda)"; nproc; } 2>&1 | tee "$out/summary.txt"
step cuda-tests 200 "$py" -m pytest -q -p no:cacheprovider -o addopts=-ra tests/test_cuda.py
step bench-rnn 90 "$py" scripts/bench_rnn.py --device cuda
step bench-attention 60 "$py" scripts/bench_attention.py --device cuda
step bench-transformer 60 "$py" scripts/bench_transformer.py --device cuda
step bench-cost 90 "$py" scripts/bench_cost.py --device cuda
step bench-cost-oom 90 "$py" scripts/bench_cost.py --device cuda --layers attention "fused attention" \
     --repeats 1 --lengths 8192 16384 32768 65536 131072
left=$((deadline - SECONDS))
if [ "$left" -gt 30 ]; then
    # longest on the CPU first (README's table), so that the side-by-side runs end together
    nbs=(13 14 12 11 06 05 07 08 04 03 10 15 09 02 01 00)
    paths=(); for n in "${nbs[@]}"; do paths+=(notebooks/"$n"-*.ipynb); done
    export OMP_NUM_THREADS=3   # 5 kernels side by side on the machine's cores
    step notebooks "$left" "$py" scripts/execute_notebooks.py --device cuda \
        --out "$out/notebooks" --jobs 5 "${paths[@]}"
else
    echo "== notebooks skipped: ${left}s left" | tee -a "$out/summary.txt"
fi
