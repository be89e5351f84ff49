"""The GPU machine's scripts (scripts/gpu_*.sh), checked where there is no GPU.

No network, no install: the shell scripts parse, gpu_check.sh stops within seconds with
a clear message where CUDA or the carried wheel folder is missing, and gpu_wheels.sh
carries every requirement that the GPU image lacks (scripts/gpu/gpu_image_packages.txt).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ["gpu_wheels.sh", "gpu_check.sh", "gpu_rehearse.sh"]


def run_check(tmp_path: Path, *args: str, **env: str) -> tuple[int, str, float]:
    environ = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path / "out")}
    environ.update(env)
    start = time.monotonic()
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts/gpu/gpu_check.sh"), *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_parses(script):
    proc = subprocess.run(
        ["bash", "-n", str(ROOT / "scripts" / "gpu" / script)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_gpu_check_without_cuda_fails_fast(tmp_path):
    # CUDA_VISIBLE_DEVICES="" hides any GPU, so this holds on a GPU machine too.
    rc, output, seconds = run_check(tmp_path, CUDA_VISIBLE_DEVICES="")
    assert rc != 0
    assert seconds < 30, f"took {seconds:.1f} s"
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert lines[0].startswith("gpu_check: no CUDA device:"), output
    assert "torch.cuda.is_available() is False" in lines[0]
    assert not (tmp_path / "out").exists(), "it wrote before the CUDA check"


def test_gpu_check_names_the_missing_wheel_folder(tmp_path):
    missing = tmp_path / "no-wheels"
    rc, output, seconds = run_check(
        tmp_path, "--install-only", SEQ2SEQ_GPU_WHEELS=str(missing)
    )
    assert rc != 0
    assert seconds < 10
    assert f"no wheel folder {missing}" in output
    assert "run scripts/gpu/gpu_wheels.sh first and carry gpu/" in output


def test_gpu_check_refuses_wheels_of_another_python(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "requirements.txt").write_text("hydra-core==1.3.8\n")
    (wheels / "python-version").write_text("3.99\n")
    rc, output, _ = run_check(
        tmp_path, "--install-only", SEQ2SEQ_GPU_WHEELS=str(wheels)
    )
    assert rc != 0
    assert "holds wheels for Python 3.99" in output
    here = "{}.{}".format(*sys.version_info[:2])
    assert f"gpu_wheels.sh --python-version {here}" in output


def carried() -> dict[str, str]:
    """name: version of the WHEELS and SDISTS arrays of scripts/gpu/gpu_wheels.sh."""
    text = (ROOT / "scripts/gpu/gpu_wheels.sh").read_text()
    pins = {}
    for array in ("WHEELS", "SDISTS"):
        body = re.search(rf"^{array}=\((.*?)^\)", text, re.M | re.S)
        assert body, f"no {array}=( ... ) in gpu_wheels.sh"
        for line in body.group(1).splitlines():
            pin = line.split("#")[0].strip()
            if pin:
                name, _, pinned = pin.partition("==")
                assert pinned, f"{pin!r} is not pinned"
                pins[canonicalize_name(name)] = pinned
    return pins


def image() -> set[str]:
    lines = (ROOT / "scripts/gpu/gpu_image_packages.txt").read_text().splitlines()
    return {canonicalize_name(x) for x in lines if x.strip() and not x.startswith("#")}


def project_requirements() -> list[str]:
    try:
        import tomllib
    except ImportError:  # Python 3.10: the installed metadata
        return requires("seq2seq") or []
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "dependencies"
    ]


def test_wheel_list_covers_what_the_image_lacks():
    pins, on_image = carried(), image()
    for name in ("hydra-core", "omegaconf", "antlr4-python3-runtime", "datasets"):
        assert name in pins, f"gpu_wheels.sh does not carry {name}"
    assert "torch" in on_image and "torch" not in pins
    assert not set(pins) & on_image, "carries packages that the image has"
    # Walk the project's requirements through the installed metadata (this machine's
    # versions): everything reached that is not on the image must be carried.
    todo = [Requirement(r) for r in project_requirements()]
    needed, seen = set(), set()
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in on_image or name in seen:
            continue
        seen.add(name)
        needed.add(name)
        try:
            todo += [Requirement(r) for r in requires(name) or []]
        except PackageNotFoundError:
            pytest.fail(f"{name} (needed, not on the image) is not installed here")
    assert needed == set(pins), (
        f"missing from gpu_wheels.sh: {sorted(needed - set(pins))}; "
        f"carried but not needed: {sorted(set(pins) - needed)}"
    )
