"""The worked example in scripts/labs/attention_lab.py runs, checks itself and plots."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT


def test_attention_lab_passes_its_checks_and_writes_the_plot(tmp_path):
    out = tmp_path / "lab" / "weights.png"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "labs" / "attention_lab.py"),
            "--out",
            str(out),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "s = -1:" in proc.stdout and "s = +1:" in proc.stdout
    assert "same: True" in proc.stdout and "FAIL" not in proc.stdout
    assert proc.stdout.count("ok   ") == 3
    assert out.stat().st_size > 5_000 and list(tmp_path.iterdir()) == [out.parent]
