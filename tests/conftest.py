"""Shared fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """The shared Multi30k copy (``$SEQ2SEQ_MULTI30K`` or ``../shared/data/multi30k``).

    Skips when it is absent, except under CI (``$CI`` set), where that is a failure.
    """
    path = Path(
        os.environ.get("SEQ2SEQ_MULTI30K", REPO_ROOT.parent / "shared/data/multi30k")
    )
    if not (path / "train.jsonl").is_file():
        message = f"Multi30k not found at {path}; set SEQ2SEQ_MULTI30K"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path
