#!/usr/bin/env bash
# The prepared GPU check, for a bare CUDA machine with no package registry (the device
# tool's H200): installs the project offline from gpu/ (built here by
# scripts/gpu/gpu_wheels.sh), then runs, within GPU_CHECK_BUDGET_S (540 s) in all, the
# install included, these parts in this order (a part's cap in brackets):
#   1. the CUDA tests (pytest -m gpu; 14 tests, 4 of them compile) [180 s];
#   2. the model bench on CUDA (every attention x style: train tok/s, greedy and beam-5
#      sent/s, peak GPU memory) [120 s];
#   3. one Multi30k de->en training of 3 epochs (seconds per epoch, validation BLEU)
#      [150 s];
#   4. the end-to-end training bench of the reference model (additive, input feeding)
#      and of the recipe's model (Luong general, no input feeding, tied embeddings):
#      bf16 at batch budgets of GPU_CHECK_BATCH_TOKENS (8192 32768), and the reference
#      model at fp32 with the first [40 s each];
#   5. trainer.compile: the eager against the step loop compiled in the default mode
#      and in reduce-overhead (CUDA graphs, trainer.compile_bucket) (reference model,
#      bf16; the recipe's decoder has no step loop to compile) [120 s], and the
#      en->de recipe's model (deep transition 2) eager against its compiled recurrent
#      steps [120 s];
#   6. WMT-shaped: GPU_CHECK_WMT_PAIRS (200000) synthetic pairs written
#      (scripts/synthetic_corpus.py) [40 s] and prepared at experiment=wmt14_en_de's
#      32k pieces [90 s], then its model trained at bf16 with batches of
#      GPU_CHECK_WMT_TOKENS (16384 65536) target tokens [60 s each]: tokens/s, peak
#      GPU memory.
# Each part runs under `timeout` (its own cap, and never past the budget); a part that
# would start with under 20 s left is skipped. A failed part does not stop the next;
# the exit status is non-zero if any part failed or was skipped.
# Two more parts run when named in GPU_CHECK_PARTS:
#   recipe: the full multi30k_de_en recipe on CUDA (its whole schedule, bounded by
#      trainer.max_minutes to what the budget leaves), then beam-5 scores on test2016;
#   decode: bench_decode.py on CUDA of the recipe's best.pt (or the 3-epoch run's), on
#      the validation split: greedy and beam 5 at 8k and 32k-token batches [90 s].
#   quality: the model-option ablation of docs/results.md on CUDA: the trainings of
#      GPU_CHECK_QUALITY_RUNS ("NAME OVERRIDE...", ';'-separated; default: the
#      recipe, and depth 1 with the vocabulary sizes and layer-norm variants below)
#      of GPU_CHECK_QUALITY_EXPERIMENT (multi30k_en_de), all at once, each its whole
#      schedule, started before the other parts and given what the budget leaves less
#      60 s; then, for each run that finished, beam-search validation BLEU of best.pt
#      and of the average of the last five checkpoints (the recipe's decoding).
#      Validation only: no test set. Give it its own call: beside six trainings, the
#      tests part overran its 180 s; alone on an H200 a layer-norm run of the en->de
#      model at depth 1 takes about 6 minutes (21k tok/s).
# GPU_CHECK_PARTS (default "tests model train bench compile wmt") picks the parts; they
# run in the order quality (started), tests, recipe, model, train, decode, bench,
# compile, wmt, quality (awaited), so one device call can run "tests recipe decode"
# and the next "bench compile wmt".
# Results: $OUT/summary.txt and one log per part (at most 8 files, what the device
# tool brings back).
#
#   device tool:  run(command="bash scripts/gpu/gpu_check.sh", carry=["gpu"], timeout_s=600)
#                 run(command='GPU_CHECK_PARTS="recipe decode" bash scripts/gpu/gpu_check.sh', ...)
#   anywhere:     bash scripts/gpu/gpu_check.sh --install-only   # offline install + imports
#
# Without a CUDA device it stops within seconds, before installing anything.
# Environment: PYTHON (python3), OUT (/tmp/seq2seq-gpu-check), SEQ2SEQ_GPU_WHEELS
# (gpu/wheels), SEQ2SEQ_MULTI30K (gpu/multi30k), GPU_CHECK_WORK (/tmp/seq2seq-gpu-work),
# GPU_CHECK_BUDGET_S, GPU_CHECK_BATCH_TOKENS, GPU_CHECK_WMT_PAIRS,
# GPU_CHECK_WMT_TOKENS, GPU_CHECK_PARTS, GPU_CHECK_QUALITY_RUNS,
# GPU_CHECK_QUALITY_EXPERIMENT.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
py="${PYTHON:-python3}"
wheels="${SEQ2SEQ_GPU_WHEELS:-gpu/wheels}"
corpus="${SEQ2SEQ_MULTI30K:-gpu/multi30k}"
out="${OUT:-/tmp/seq2seq-gpu-check}"
work="${GPU_CHECK_WORK:-/tmp/seq2seq-gpu-work}"
budget="${GPU_CHECK_BUDGET_S:-540}"
batch_tokens="${GPU_CHECK_BATCH_TOKENS:-8192 32768}"
wmt_pairs="${GPU_CHECK_WMT_PAIRS:-200000}"
wmt_tokens="${GPU_CHECK_WMT_TOKENS:-16384 65536}"
selected=" ${GPU_CHECK_PARTS:-tests model train bench compile wmt} "
quality_experiment="${GPU_CHECK_QUALITY_EXPERIMENT:-multi30k_en_de}"
# the rows of docs/history/results.md's en->de table: the recipe (deep transition 2), the rest at
# the depth they ran with
depth1="model.encoder.transition_depth=1 model.decoder.transition_depth=1"
depth2="model.encoder.transition_depth=2 model.decoder.transition_depth=2"
quality_runs="${GPU_CHECK_QUALITY_RUNS:-base;depth1 $depth1;\
vocab4k tokenizer.vocab_size=4000 $depth1;vocab6k tokenizer.vocab_size=6000 $depth1;\
layer_norm model.layer_norm=true $depth1;\
layer_norm_residual4 model.layer_norm=true model.residual=true model.encoder.layers=4 $depth1;\
layer_norm_transition2 model.layer_norm=true $depth2}"
carry_hint='run scripts/gpu/gpu_wheels.sh first and carry gpu/ (device tool: run(command="bash scripts/gpu/gpu_check.sh", carry=["gpu"]))'

die() { echo "gpu_check: $*" >&2; exit 2; }

install_only=0
case "${1:-}" in
    "") ;;
    --install-only) install_only=1 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
esac
command -v "$py" >/dev/null || die "no $py on PATH (set PYTHON)"

# 1. A CUDA device, before anything is installed.
if ((!install_only)); then
    probe=$(timeout 60 "$py" - 2>&1 <<'EOF'
import sys
try:
    import torch
except Exception as err:
    sys.exit(f"torch does not import ({err})")
if not torch.cuda.is_available():
    build = f"a CUDA {torch.version.cuda} build" if torch.version.cuda else "a CPU build"
    sys.exit(f"torch {torch.__version__} is {build} and torch.cuda.is_available() is False")
print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
EOF
    ) || die "no CUDA device: $(tail -n 1 <<<"$probe"); this check runs on a GPU machine only"
    gpu=$(tail -n 1 <<<"$probe")
    echo "gpu_check: $gpu"
fi

# 2. The carried folder.
[[ -f "$wheels/requirements.txt" ]] || die "no wheel folder $wheels: $carry_hint"
want=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
have=$(cat "$wheels/python-version" 2>/dev/null || echo unknown)
[[ "$want" == "$have" ]] || die "$wheels holds wheels for Python $have, $py is $want:" \
    "run scripts/gpu/gpu_wheels.sh --python-version $want and set SEQ2SEQ_GPU_WHEELS to its folder"
if ((!install_only)); then
    for split in train validation test; do
        [[ -f "$corpus/$split.jsonl" ]] || die "no Multi30k $corpus/$split.jsonl: $carry_hint"
    done
    corpus=$(cd "$corpus" && pwd)
fi

# 3. Offline install: the carried wheels and the checkout (editable: the Hydra configs
#    live beside the package), all --no-deps, so pip never touches the machine's torch.
mkdir -p "$out" "$work"
log="$out/install.txt"
torch_id() { "$py" -c 'import torch; print(torch.__version__, torch.__file__)'; }
torch_before=$(torch_id) || die "torch does not import in $py"
{
    echo "python: $("$py" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
    echo "torch before: $torch_before"
} >"$log"
pip=("$py" -m pip install --no-index --no-deps --no-cache-dir --disable-pip-version-check)
pip=(timeout 180 "${pip[@]}")
"${pip[@]}" --find-links "$wheels" -r "$wheels/requirements.txt" >>"$log" 2>&1 \
    || die "installing the wheels of $wheels failed (see $log): $(tail -n 1 "$log")"
"${pip[@]}" --no-build-isolation -e "$root" >>"$log" 2>&1 \
    || die "installing the checkout (pip install --no-deps -e .) failed (see $log): $(tail -n 1 "$log")"
echo "pip check (informative: --no-deps keeps the image's own versions):" >>"$log"
"$py" -m pip check >>"$log" 2>&1 || true
torch_after=$(torch_id)
echo "torch after: $torch_after" >>"$log"
[[ "$torch_after" == "$torch_before" ]] \
    || die "the install changed torch ($torch_before -> $torch_after)"
PATH="$("$py" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
export PATH
"$py" - "$root" >>"$log" 2>&1 <<'EOF' || die "imports fail after the install: $(tail -n 1 "$log")"
import sys
from pathlib import Path

import datasets, hydra, omegaconf, sacrebleu, sentencepiece, seq2seq, torch  # noqa

where = Path(seq2seq.__file__).resolve()
if Path(sys.argv[1]).resolve() not in where.parents:
    sys.exit(f"seq2seq imports from {where}, not from the checkout {sys.argv[1]}")
print("imports ok:", ", ".join(
    f"{m.__name__} {getattr(m, '__version__', '?')}"
    for m in (torch, hydra, omegaconf, datasets, sacrebleu, sentencepiece)))
EOF
seq2seq-train --help >/dev/null 2>>"$log" || die "seq2seq-train --help fails (see $log)"
echo "seq2seq-train --help: ok" >>"$log"
echo "gpu_check: installed offline ($(grep '^imports ok' "$log"))"
((install_only)) && exit 0

# 4. The parts.
export PYTHONUNBUFFERED=1
deadline=$budget  # bash's SECONDS count from the script's start: install included
parts="$work/parts.txt"
: >"$parts"
part() {  # part NAME CAP_S LOG CMD...: CMD under min(CAP_S, time left), log appended
    local name=$1 cap=$2 log=$3 left limit t0 rc
    shift 3
    left=$((deadline - SECONDS))
    if ((left < 20)); then
        echo "SKIP | $name | out of the $budget s budget" >>"$parts"
        return 0
    fi
    limit=$((cap < left ? cap : left))
    t0=$SECONDS
    echo "=== $name (limit $limit s): $*" | tee -a "$log"
    timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
    echo "=== $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$log"
    if ((rc == 0)); then
        echo "ok | $name | $((SECONDS - t0)) s" >>"$parts"
    elif ((rc == 124 || rc == 137)); then
        echo "FAIL | $name | timed out at $limit s" >>"$parts"
    elif [[ "$name" == "pytest -m gpu" ]] && ((rc == 5)); then
        echo "NONE | $name | no test carries the gpu mark" >>"$parts"
    else
        echo "FAIL | $name | exit $rc after $((SECONDS - t0)) s" >>"$parts"
    fi
}
wanted() { [[ "$selected" == *" $1 "* ]]; }  # wanted PART: GPU_CHECK_PARTS names it
cache="data.cache_dir=$work/cache"
logs=(hydra.job_logging.formatters.simple.datefmt=null trainer.progress=false)

# quality, started: every run at once, in the background (awaited at the end).
quality_dir="$work/quality"
if wanted quality; then
    rm -rf "$quality_dir"
    mkdir -p "$quality_dir"
    quality_limit=$((deadline - SECONDS - 70))
    IFS=';' read -ra specs <<<"$quality_runs"
    for spec in "${specs[@]}"; do
        read -ra words <<<"$spec"
        name=${words[0]}
        echo "${words[*]:1}" >"$quality_dir/$name.overrides"
        (
            OMP_NUM_THREADS=2 timeout -k 10 "$quality_limit" seq2seq-train \
                experiment="$quality_experiment" data.local_dir="$corpus" \
                trainer.device=cuda evaluate_test=false \
                data.cache_dir="$quality_dir/$name.cache" \
                hydra.run.dir="$quality_dir/$name" "${logs[@]}" "${words[@]:1}" \
                >"$quality_dir/$name.log" 2>&1
            echo "exit $?" >>"$quality_dir/$name.log"
        ) &
    done
    echo "gpu_check: quality runs started (${#specs[@]}, at most $quality_limit s)"
fi

wanted tests && part "pytest -m gpu" 180 "$out/pytest.txt" \
    "$py" -m pytest -q -m gpu -p no:cacheprovider --durations=20 tests

if wanted recipe; then
    # The full recipe, its training bounded to what the budget leaves after 60 s for
    # the final validation and the beam-5 test scores (and 90 s for the decode part
    # when it follows).
    reserve=$((60 + $(wanted decode && echo 90 || echo 0)))
    minutes=$(((deadline - SECONDS - reserve) / 60))
    rm -rf "$work/recipe"
    if ((minutes >= 1)); then
        part "recipe multi30k_de_en" $((deadline - SECONDS)) "$out/recipe.txt" \
            seq2seq-train experiment=multi30k_de_en data.local_dir="$corpus" \
            trainer.device=cuda trainer.max_minutes="$minutes" evaluate_test=true \
            "$cache" hydra.run.dir="$work/recipe" "${logs[@]}"
    else
        echo "SKIP | recipe multi30k_de_en | $((deadline - SECONDS)) s left" >>"$parts"
    fi
fi

wanted model && part "bench_model cuda" 120 "$out/bench_model.txt" \
    "$py" scripts/benchmarks/bench_model.py --device cuda

wanted train && rm -rf "$work/train" && part "train multi30k_de_en 3 epochs" 150 "$out/train.txt" \
    seq2seq-train experiment=multi30k_de_en data.local_dir="$corpus" \
    trainer.max_epochs=3 trainer.device=cuda evaluate_test=true \
    "$cache" hydra.run.dir="$work/train" "${logs[@]}"

if wanted decode; then
    best=$(ls "$work"/recipe/checkpoints/best.pt "$work"/train/checkpoints/best.pt \
        2>/dev/null | head -n 1)
    if [[ -n "$best" ]]; then
        part "bench_decode cuda" 90 "$out/decode.txt" \
            "$py" scripts/benchmarks/bench_decode.py "$best" --device cuda --beam 1,5 \
            --batch-tokens 8192,32768 --rounds 3 --cache-dir "$work/cache"
    else
        echo "SKIP | bench_decode cuda | no best.pt (run the recipe or train part first)" >>"$parts"
    fi
fi

bench=("$py" scripts/benchmarks/bench_train.py --device cuda --corpus "$corpus")
first_tokens=${batch_tokens%% *}
wanted bench && for precision in bf16 fp32; do
    for model in reference recipe; do
        if [[ $model == reference ]]; then
            opts=(--attention bahdanau) extra=()
        else
            opts=(--attention luong_general --no-input-feeding)
            extra=(model.tie_embeddings=true)
        fi
        for tokens in $batch_tokens; do
            # fp32: the reference model at the first budget only (the time goes to
            # the compile and WMT parts)
            [[ $precision == fp32 && ($model == recipe || $tokens != "$first_tokens") ]] \
                && continue
            part "bench_train $model $precision $tokens" 40 "$out/bench_train.txt" \
                "${bench[@]}" --steps 40 --warmup 10 --window 20 --batch-tokens "$tokens" \
                "${opts[@]}" "${extra[@]}" trainer.precision="$precision" "$cache"
        done
    done
done

wanted compile && part "bench_train compile reference bf16 8192" 120 "$out/bench_compile.txt" \
    "${bench[@]}" --compare-compile --compile-modes default,reduce-overhead \
    --batches 6 --rounds 2 --batch-tokens 8192 \
    --attention bahdanau trainer.precision=bf16 "$cache"
# the deep GRU's compiled recurrent steps (trainer.compile=auto's scope on a CPU; not
# measured on CUDA yet): the en->de recipe's model, deep transition 2 on both sides
wanted compile && part "bench_train compile deep transition bf16 8192" 120 \
    "$out/bench_compile_deep.txt" \
    "${bench[@]}" --experiment multi30k_en_de --compare-compile --compile-modes default \
    --batches 6 --rounds 2 --batch-tokens 8192 --attention luong_general \
    --no-input-feeding model.tie_embeddings=true model.encoder.transition_depth=2 \
    model.decoder.transition_depth=2 trainer.precision=bf16 "$cache"

# WMT-shaped: written here (16 cores: seconds), not carried; one cache for both budgets.
if wanted wmt; then
wmt="$work/wmt"
rm -rf "$wmt"
wmt_data=(experiment=wmt14_en_de data=local data.local_dir="$wmt/corpus"
    data.cache_dir="$wmt/cache")
part "wmt synthetic corpus $wmt_pairs pairs" 40 "$out/wmt.txt" \
    "$py" scripts/synthetic_corpus.py "$wmt/corpus" --pairs "$wmt_pairs" --heldout 1000
part "wmt prepare 32k pieces" 90 "$out/wmt.txt" \
    seq2seq-prepare "${wmt_data[@]}" hydra.run.dir="$wmt/prepare" \
    hydra.job_logging.formatters.simple.datefmt=null
for tokens in $wmt_tokens; do
    part "bench_train wmt14_en_de bf16 $tokens" 60 "$out/wmt.txt" \
        "$py" scripts/benchmarks/bench_train.py --device cuda --experiment wmt14_en_de \
        --corpus "$wmt/corpus" --no-validation --steps 20 --warmup 5 --window 10 \
        --batch-tokens "$tokens" data=local data.cache_dir="$wmt/cache" \
        trainer.precision=bf16
done
fi

# quality, awaited: each finished run's best.pt and average of the last five, scored
# with beam search on the validation split.
if wanted quality; then
    wait
    log="$out/quality.txt"
    : >"$log"
    for run_log in "$quality_dir"/*.log; do  # the trainings first: kept if cut short
        run="${run_log%.log}"
        echo "### $(basename "$run"): $quality_experiment $(cat "$run.overrides")" >>"$log"
        grep -E "\] - (model: |step [0-9]+ \| valid)|^exit " "$run_log" >>"$log"
    done
    for run_log in "$quality_dir"/*.log; do  # the scores, all runs at once
        run="${run_log%.log}"
        steps=("$run"/checkpoints/step*.pt)
        [[ -f "$run/checkpoints/best.pt" && -f "${steps[0]}" ]] || continue
        ((${#steps[@]} > 5)) && steps=("${steps[@]: -5}")
        (
            seq2seq-average "${steps[@]}" -o "$run/checkpoints/avg5.pt" >/dev/null 2>&1
            for pt in best avg5; do
                echo "valid beam $pt:" \
                    "$(timeout 50 seq2seq-evaluate checkpoint="$run/checkpoints/$pt.pt" \
                        split=validation hydra.run.dir="$run/eval_$pt" 2>&1 \
                        | grep -E '^BLEU' | head -n 1 | cut -d'|' -f1)"
            done >"$run.scores"
        ) &
    done
    wait
    for scores in "$quality_dir"/*.scores; do
        [[ -f "$scores" ]] && sed "s/^/$(basename "$scores" .scores) /" "$scores" >>"$log"
    done
    if grep -q "^exit 0" "$log"; then
        echo "ok | quality runs | $(grep -c '^exit 0' "$log") of $(grep -c '^### ' "$log") finished" >>"$parts"
    else
        echo "FAIL | quality runs | none finished" >>"$parts"
    fi
fi

# 5. The summary.
"$py" - "$out" "$parts" "$gpu" "$budget" "$SECONDS" >"$out/summary.txt" <<'EOF'
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

out, parts, gpu, budget, spent = Path(sys.argv[1]), Path(sys.argv[2]), *sys.argv[3:]


def read(name):
    path = out / name
    return path.read_text(errors="replace").splitlines() if path.exists() else []


print(f"seq2seq gpu_check, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")
print(f"device: {gpu}; {spent} s of the {budget} s budget (install included)")
print("\n## parts")
print(parts.read_text().rstrip() or "(none ran)")

print("\n## model bench (bench_model.py --device cuda; bf16 autocast)")
print("\n".join(x for x in read("bench_model.txt") if " | " in x or "-+-" in x) or "-")

def bench_rows(name):
    """(part label, table cells) of each bench_train.py result row in log ``name``."""
    label = None
    for line in read(name):
        if m := re.match(r"=== (bench_train \S+ \S+ \d+) \(", line):
            label = m.group(1)
        elif line.startswith("| cuda") and label:
            yield label, [c.strip() for c in line.strip("|").split("|")]


print("\n## training bench (bench_train.py: 40 timed steps after 10, windows of 20)")
for label, cells in bench_rows("bench_train.txt"):
    print(f"{label}: {cells[4]} tok/s (min-max {cells[5]}), validation "
          f"{cells[6]} s, BLEU {cells[7]}, peak GPU {cells[9]} MB")
for line in read("bench_compile.txt"):
    if "batch_tokens=" in line and "tok/s" in line:  # eager, then each mode
        print("compile:", line)

print("\n## WMT-shaped synthetic corpus (experiment=wmt14_en_de's model, bf16; "
      "20 timed steps after 5)")
keep = (r"\S+\.jsonl: [\d.]+ MB", r"vocabulary \(", r"(train|validation|test) +\d+ ",
        r"train batches at", r"prepared and cached in")
for line in read("wmt.txt"):
    if any(re.match(k, line) for k in keep):
        print(line)
for label, cells in bench_rows("wmt.txt"):
    print(f"{label}: {cells[4]} target tok/s (min-max {cells[5]}), "
          f"{cells[3]} parameters, peak GPU {cells[9]} MB")


def epochs(name):
    """Seconds and validation BLEU of each epoch of a seq2seq-train log."""
    stamp = r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]"
    previous = None
    for line in read(name):
        m = re.match(stamp, line)
        when = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f") if m else None
        if when and "] - model: " in line:
            previous = when
        elif when and (v := re.search(r"step (\d+) \| valid .*?BLEU ([\d.]+)", line)):
            took = f"{(when - previous).total_seconds():.1f} s" if previous else "?"
            print(f"epoch to step {v.group(1)}: {took} (training + greedy "
                  f"validation), valid BLEU {v.group(2)}")
            previous = when
        elif line.startswith(("test:", "stopped:")) or "training stopped" in line:
            print(line)


if read("train.txt"):
    print("\n## Multi30k de->en, 3 epochs (seq2seq-train experiment=multi30k_de_en)")
    epochs("train.txt")
if read("recipe.txt"):
    print("\n## Multi30k de->en, the full recipe (seq2seq-train "
          "experiment=multi30k_de_en; test = test2016)")
    epochs("recipe.txt")

if read("decode.txt"):
    print("\n## decoding on CUDA (bench_decode.py --device cuda, validation split)")
    print("\n".join(x for x in read("decode.txt")
                    if x.startswith(("| ", "/")) or " sentences), " in x))

if read("quality.txt"):
    print("\n## quality ablation (validation split; greedy BLEU per epoch, then beam)")
    for line in read("quality.txt"):
        if line.startswith(("### ", "exit ")) or " valid beam " in line:
            print(line)
        elif v := re.search(r"step (\d+) \| valid .*?BLEU ([\d.]+)", line):
            print(f"  step {v.group(1)}: greedy BLEU {v.group(2)}")
        elif "] - model: " in line:
            print("  " + line.split("] - ", 1)[1])

print("\n## pytest -m gpu")
tally = r"\d+ (passed|failed|errors?|skipped|deselected)|no tests ran"
print(next((x for x in reversed(read("pytest.txt")) if re.search(tally, x)), "-"))
EOF
summary=$?
cat "$out/summary.txt"
if ((summary != 0)) || ! grep -q . "$parts"; then
    echo "gpu_check: no summary could be written (exit $summary)" >&2
    exit 1
fi
if grep -qE "^(FAIL|SKIP) " "$parts"; then
    echo "gpu_check: some parts failed or were skipped (see $out/summary.txt)" >&2
    exit 1
fi
echo "gpu_check: all parts ran ($SECONDS s); results in $out"
