#!/usr/bin/env bash
# One prepared GPU check (≤ 5 minutes on one modern GPU): model bench on CUDA, the
# end-to-end training bench, the eager against the compiled step loop, and a 3-epoch
# Multi30k de→en training with seconds per epoch.
#   SEQ2SEQ_MULTI30K=/path/to/multi30k bash scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
corpus="${SEQ2SEQ_MULTI30K:-../shared/data/multi30k}"
out="${OUT:-/tmp/seq2seq-gpu-check}"
mkdir -p "$out"
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0), torch.__version__)"
export PYTHONUNBUFFERED=1
python scripts/bench_model.py --device cuda 2>&1 | tee "$out/bench_model.txt"
python scripts/bench_train.py --device cuda --steps 200 --warmup 20 --window 20 \
    --corpus "$corpus" 2>&1 | tee "$out/bench_train.txt"
# trainer.compile: eager against torch.compile'd step loop, same batches, one process
python scripts/bench_train.py --device cuda --compare-compile --batches 8 --rounds 3 \
    --corpus "$corpus" 2>&1 | tee "$out/bench_compile.txt"
start=$(date +%s)
seq2seq-train experiment=multi30k_de_en data.local_dir="$corpus" trainer.max_epochs=3 \
    trainer.progress=false trainer.device=cuda evaluate_test=true \
    data.cache_dir="$out/cache" hydra.run.dir="$out/train" 2>&1 | tee "$out/train.txt"
end=$(date +%s)
echo "3-epoch training wall time: $((end - start)) s (includes data preparation and test decoding)"
grep -E "step [0-9]+ \| valid" "$out/train.txt" || true
