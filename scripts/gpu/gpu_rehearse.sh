#!/usr/bin/env bash
# Rehearse scripts/gpu/gpu_check.sh on this CPU machine, as far as it goes without a GPU:
#   1. a wheel folder for this machine's Python (gpu/wheels-pyXY, scripts/gpu/gpu_wheels.sh);
#   2. a venv that holds only packages the GPU image lists (scripts/gpu/gpu_image_packages.txt):
#      a CPU torch and the image's other packages the project touches, from the registry;
#      the script fails if anything else got in;
#   3. gpu_check.sh in that venv fails fast with its no-CUDA message;
#   4. gpu_check.sh --install-only installs the project offline from the wheel folder
#      (pip config and find-links of this machine switched off, a dead proxy set), then
#      `python -c "import seq2seq, hydra, datasets"`, `seq2seq-train --help` and the
#      check's `pytest -m gpu` collection run in the venv.
# A second run reuses the venv: it first uninstalls what step 4 installed, so step 2's
# check sees the image's packages alone again.
#
#   bash scripts/gpu/gpu_rehearse.sh         # venv in GPU_REHEARSAL_VENV (/tmp/gpu-rehearsal)
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${GPU_REHEARSAL_VENV:-/tmp/gpu-rehearsal}"
host="${PYTHON:-python}"
# The image's packages that the project or its carried wheels use (torch: the CPU build
# this machine's registry holds; huggingface-hub: the image's 1.33.0, since 2.x needs
# httpx2, which the image lacks; python-dateutil 2.x: 4.x needs tzdata, which it lacks).
IMAGE=(
    torch==2.13.0 sacrebleu sentencepiece tensorboard numpy pandas pyarrow tqdm matplotlib
    pyyaml fsspec huggingface-hub==1.33.0 aiohttp xxhash requests filelock packaging
    pytest pillow setuptools wheel "python-dateutil<3" joblib click regex
)
quiet() { grep -v "is ignored: it is neither a file nor a directory" || true; }
step() { echo; echo "== $*"; }
fail() { echo "gpu_rehearse: $*" >&2; exit 1; }
start=$SECONDS

ver=$("$host" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
wheels="gpu/wheels-py${ver/./}"
step "1. wheel folder for Python $ver: $wheels"
bash scripts/gpu/gpu_wheels.sh --python-version "$ver" --dest "$wheels"

step "2. venv $venv with the image's packages only"
[[ -x "$venv/bin/python" ]] || "$host" -m venv "$venv"
vpy="$venv/bin/python"
carried=()
while read -r req; do carried+=("${req%%==*}"); done <"$wheels/requirements.txt"
"$vpy" -m pip uninstall -y -q "${carried[@]}" seq2seq 2>&1 | grep -v "not installed" || true
t0=$SECONDS
"$vpy" -m pip install -q --upgrade pip 2>&1 | quiet
"$vpy" -m pip install -q "${IMAGE[@]}" 2>&1 | quiet
echo "base install: $((SECONDS - t0)) s"
# -I: no current folder on sys.path (an editable checkout's seq2seq.egg-info is not the venv's)
"$vpy" -I - scripts/gpu/gpu_image_packages.txt <<'EOF'
import re
import sys
from importlib.metadata import distributions
from pathlib import Path


def canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()


lines = Path(sys.argv[1]).read_text().splitlines()
image = {canon(x.strip()) for x in lines if x.strip() and not x.startswith("#")}
have = {canon(d.metadata["Name"]) for d in distributions()}
strays = sorted(have - image)
if strays:
    sys.exit(f"gpu_rehearse: the venv holds packages the GPU image lacks: {strays}")
print(f"{len(have)} packages, all on the image's list")
EOF

step "3. gpu_check.sh without CUDA fails fast"
t0=$SECONDS
set +e
msg=$(PYTHON="$vpy" OUT=/tmp/gpu-rehearsal-out bash scripts/gpu/gpu_check.sh 2>&1)
rc=$?
set -e
echo "$msg"
((rc != 0)) || fail "gpu_check.sh exited 0 without CUDA"
grep -q "no CUDA device" <<<"$msg" || fail "gpu_check.sh did not name the missing CUDA device"
echo "exit $rc after $((SECONDS - t0)) s"

step "4. offline install from $wheels into the venv"
offline=(env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_INDEX_URL
    PIP_CONFIG_FILE=/dev/null https_proxy=http://127.0.0.1:9 http_proxy=http://127.0.0.1:9)
t0=$SECONDS
"${offline[@]}" PYTHON="$vpy" SEQ2SEQ_GPU_WHEELS="$wheels" OUT=/tmp/gpu-rehearsal-out \
    bash scripts/gpu/gpu_check.sh --install-only
echo "install: $((SECONDS - t0)) s"
grep -A50 "^pip check" /tmp/gpu-rehearsal-out/install.txt | sed -n '1,/^torch after/p'
export PATH="$venv/bin:$PATH"
(cd /tmp && "$vpy" -c "import seq2seq, hydra, datasets; print('import seq2seq, hydra, datasets: ok;', seq2seq.__file__)")
seq2seq-train --help >/tmp/gpu-rehearsal-out/help.txt
echo "seq2seq-train --help: $(head -1 /tmp/gpu-rehearsal-out/help.txt)"
set +e
"$vpy" -m pytest -q -m gpu -p no:cacheprovider tests | tail -1
rc=${PIPESTATUS[0]}
set -e
((rc == 0 || rc == 5)) || fail "pytest -m gpu failed to collect in the venv (exit $rc)"
echo
echo "gpu_rehearse: ok in $((SECONDS - start)) s"
