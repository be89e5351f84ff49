#!/usr/bin/env bash
# Build gpu/, the folder to carry to the GPU machine (no package registry there): the
# wheels the project needs beyond what that machine's image has, and the Multi30k corpus.
#
#   bash scripts/gpu/gpu_wheels.sh                         # Python 3.12 set into gpu/wheels
#   bash scripts/gpu/gpu_wheels.sh --python-version 3.11   # rehearsal set, gpu/wheels-py311
#
# then, with the device tool: run(command="bash scripts/gpu/gpu_check.sh", carry=["gpu"]).
#
# The set is the project's requirements minus the packages on the image
# (scripts/gpu/gpu_image_packages.txt), closed over their own requirements; the script
# checks that closure on the downloaded wheels and fails if a requirement is neither on
# the image nor carried, or if a carried wheel is not needed. torch is never carried.
# The project itself is not a wheel: its Hydra configs live beside the package
# (CONFIG_DIR in seq2seq/config.py), so scripts/gpu/gpu_check.sh installs the checkout editable, offline.
# A second run downloads nothing that is already there.
#
# Options (or environment variables):
#   --python-version V  (GPU_PYTHON_VERSION, default 3.12)   the target interpreter
#   --dest DIR          (GPU_WHEELS_DIR, default gpu/wheels, or gpu/wheels-pyXY for
#                        another Python)
#   --corpus DIR        (SEQ2SEQ_MULTI30K, default ../shared/data/multi30k) the
#                        {train,validation,test}.jsonl to copy into gpu/multi30k
set -euo pipefail
cd "$(dirname "$0")/../.."

# Carried from PyPI as wheels, pinned (the versions the project is tested with here).
WHEELS=(
    hydra-core==1.3.8
    omegaconf==2.3.1
    datasets==5.2.0
    dill==0.4.1
    multiprocess==0.70.19
    sacremoses==0.2.0
    entmax==1.3
    fastapi==0.165.0  # seq2seq-serve, with what it needs that the image lacks
    starlette==1.10.0
    uvicorn==0.55.0
    httptools==0.9.0  # uvicorn's fast HTTP parser (uvloop is on the image)
    pydantic==2.13.4
    pydantic-core==2.46.4
    annotated-types==0.7.0
    typing-inspection==0.4.2
    opentelemetry-api==1.45.3
    python-multipart==0.0.34  # LibreTranslate's form bodies
    pysbd==0.3.4  # LibreTranslate's texts cut into sentences
    swagger-ui-py==25.7.1  # /docs without a CDN
)
# Published as an sdist only: built into a (pure Python) wheel here.
SDISTS=(
    antlr4-python3-runtime==4.9.3  # hydra-core 1.3 and omegaconf 2.3 pin 4.9.*
)

py_version="${GPU_PYTHON_VERSION:-3.12}"
dest="${GPU_WHEELS_DIR:-}"
corpus="${SEQ2SEQ_MULTI30K:-../shared/data/multi30k}"
while (($#)); do
    case "$1" in
        --python-version) py_version="$2"; shift 2 ;;
        --dest) dest="$2"; shift 2 ;;
        --corpus) corpus="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "gpu_wheels: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ "$py_version" =~ ^3\.[0-9]+$ ]] || {
    echo "gpu_wheels: --python-version must look like 3.12, got '$py_version'" >&2
    exit 2
}
tag="${py_version/./}"
if [[ -z "$dest" ]]; then
    if [[ "$py_version" == 3.12 ]]; then dest=gpu/wheels; else dest="gpu/wheels-py$tag"; fi
fi
py="${PYTHON:-python}"
mkdir -p "$dest" gpu/multi30k
if [[ -f "$dest/python-version" && "$(cat "$dest/python-version")" != "$py_version" ]]; then
    echo "gpu_wheels: $dest holds wheels for Python $(cat "$dest/python-version"), not" \
        "$py_version: use another --dest or delete it" >&2
    exit 2
fi
echo "$py_version" >"$dest/python-version"

have() {  # have NAME==VERSION: a wheel of it is already in $dest
    local name="${1%%==*}" version="${1##*==}"
    compgen -G "$dest/${name//-/_}-$version-*.whl" >/dev/null
}
quiet() { grep -v "is ignored: it is neither a file nor a directory" || true; }

start=$SECONDS
todo=()
for req in "${WHEELS[@]}"; do have "$req" || todo+=("$req"); done
if ((${#todo[@]})); then
    echo "downloading ${todo[*]} (Python $py_version, manylinux x86-64)"
    "$py" -m pip download -q --no-deps --only-binary :all: \
        --python-version "$py_version" --implementation cp --abi "cp$tag" \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux_2_28_x86_64 \
        -d "$dest" "${todo[@]}" 2>&1 | quiet
fi
for req in "${SDISTS[@]}"; do
    have "$req" && continue
    echo "building a wheel of $req from its sdist"
    "$py" -m pip wheel -q --no-deps --no-binary :all: -w "$dest" "$req" 2>&1 | quiet
done
for req in "${WHEELS[@]}" "${SDISTS[@]}"; do
    have "$req" || { echo "gpu_wheels: no wheel of $req in $dest" >&2; exit 1; }
done
printf '%s\n' "${WHEELS[@]}" "${SDISTS[@]}" >"$dest/requirements.txt"

# The closure check, on the wheels' own metadata, with markers for the target Python.
"$py" - "$dest" "$py_version" <<'EOF'
import re
import sys
import tomllib
import zipfile
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # pip vendors it
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name

dest, py_version = Path(sys.argv[1]), sys.argv[2]
env = {"python_version": py_version, "python_full_version": py_version + ".0",
       "sys_platform": "linux", "platform_system": "Linux",
       "platform_machine": "x86_64", "implementation_name": "cpython",
       "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
image = {
    canonicalize_name(line.strip())
    for line in Path("scripts/gpu/gpu_image_packages.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
}
carried = {}  # name: (version, [requirements])
for wheel in sorted(dest.glob("*.whl")):
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    name = canonicalize_name(re.search(r"^Name: (.+)$", text, re.M).group(1).strip())
    version = re.search(r"^Version: (.+)$", text, re.M).group(1).strip()
    reqs = [Requirement(r) for r in re.findall(r"^Requires-Dist: (.+)$", text, re.M)]
    if name in carried:
        sys.exit(f"gpu_wheels: two wheels of {name} in {dest}: keep one")
    carried[name] = (version, reqs)
wanted = tomllib.loads(Path("pyproject.toml").read_text())["project"]["dependencies"]
errors, reached = [], set()
todo = [("pyproject.toml", Requirement(r)) for r in wanted]
while todo:
    who, req = todo.pop()
    if req.marker is not None and not req.marker.evaluate(env):
        continue
    name = canonicalize_name(req.name)
    if name in image:
        continue  # the image's own version; it is not ours to replace
    if name not in carried:
        errors.append(f"{who} needs {req}: neither on the image nor carried")
        continue
    version, reqs = carried[name]
    if not req.specifier.contains(version, prereleases=True):
        errors.append(f"{who} needs {req}, carried {name} {version}")
    if name not in reached:
        reached.add(name)
        todo += [(f"{name} {version}", r) for r in reqs]
errors += [f"{n} is carried but nothing needs it" for n in sorted(set(carried) - reached)]
errors += [f"{n} is on the image: do not carry it" for n in sorted(set(carried) & image)]
if errors:
    sys.exit("gpu_wheels: " + "\n  ".join(["the wheel set is wrong:", *errors]))
print(f"closure ok: {len(carried)} wheels for Python {py_version}, every other "
      "requirement is on the image: "
      + ", ".join(f"{n} {v}" for n, (v, _) in sorted(carried.items())))
EOF

for split in train validation test; do
    src="$corpus/$split.jsonl"
    [[ -f "$src" ]] || { echo "gpu_wheels: no corpus file $src (set --corpus)" >&2; exit 1; }
    cmp -s "$src" "gpu/multi30k/$split.jsonl" || install -m 644 "$src" "gpu/multi30k/$split.jsonl"
done

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
wheels_b=$(du -sb "$dest" | cut -f1)
corpus_b=$(du -sb gpu/multi30k | cut -f1)
gpu_b=$(du -sb gpu | cut -f1)
tree_b=$( (git ls-files -z; git ls-files -z --others --exclude-standard) \
    | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
total_b=$((gpu_b + tree_b))
echo "$dest: $(ls "$dest"/*.whl | wc -l) wheels, $(mib "$wheels_b"); gpu/multi30k:" \
    "$(mib "$corpus_b"); gpu/ in all: $(mib "$gpu_b")"
echo "travels with carry=[\"gpu\"]: $(mib "$total_b") of the 64 MiB limit" \
    "(checkout $(mib "$tree_b") + gpu/) [$((SECONDS - start)) s]"
if ((total_b > 48 * 1048576)); then
    echo "gpu_wheels: over 48 MiB would travel, too close to the 64 MiB limit" >&2
    exit 1
fi
