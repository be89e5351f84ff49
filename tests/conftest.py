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


@pytest.fixture(scope="session")
def multi30k_prepared(multi30k_dir, tmp_path_factory):
    """Multi30k de→en prepared at the recipes' tokenizer settings (8,000 joint
    pieces), once per session."""
    from seq2seq.config import DataConfig, TokenizerConfig
    from seq2seq.data.prepare import prepare_data

    data = DataConfig(
        name="multi30k", local_dir=str(multi30k_dir), src_lang="de", tgt_lang="en"
    )
    cache = tmp_path_factory.mktemp("multi30k-cache")
    return prepare_data(data, TokenizerConfig(), cache)
