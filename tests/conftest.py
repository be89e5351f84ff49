"""Shared fixtures."""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig

from seq2seq.config_checks import check_composed

REPO_ROOT = Path(__file__).resolve().parents[1]

# A test whose name says it compares two code paths (``..._equals_...``, ``matches``,
# ``like_the``, ...) is marked ``paths``: .ci/run reruns them with ATen capped at AVX2,
# where sums run in another order, so that a comparison that only holds on one
# instruction set fails in CI, not on a user's CPU.
PATH_EQUALITY = re.compile(
    r"equals?_|_equal$|matches|same_as|like_the|identical_passes|one_step_on_two"
)


def pytest_collection_modifyitems(config, items) -> None:
    """Tests comparing two code paths get the ``paths`` marker; tests marked ``gpu``
    skip without a CUDA device (``scripts/gpu/gpu_check.sh`` runs them with
    ``pytest -m gpu`` on one)."""
    for item in items:
        if PATH_EQUALITY.search(item.originalname or item.name):
            item.add_marker(pytest.mark.paths)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (pytest -m gpu on a GPU)")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fp32_without_tf32(request):
    """On CUDA, fp32 matmuls and cuDNN in full fp32 (no TF32) for the ``gpu`` tests,
    so that CUDA's fp32 results compare with the CPU's; restored afterwards."""
    if request.node.get_closest_marker("gpu") is None:
        yield
        return
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# ``@pytest.mark.parametrize("device", DEVICES)``: a test that must hold on either
# device, its CUDA case marked ``gpu``.
DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", marks=pytest.mark.gpu, id="cuda"),
]


def check_command(command: str, cfg: DictConfig) -> None:
    """What the console script ``seq2seq-<command>`` checks before it runs: the
    composed config, then the command's own rules (``check_<command>``)."""
    module = importlib.import_module(f"seq2seq.cli.{command}")
    check_composed(cfg)
    getattr(module, f"check_{command}")(cfg)


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


def _tiny_run(tmp_path_factory, name: str, *overrides: str) -> Path:
    """A tiny phrasebook model trained in-process for 40 steps (seconds), with
    ``overrides``: its ``last.pt``."""
    from tests.helpers import build_trainer, tiny_train_config

    tmp = tmp_path_factory.mktemp(name)
    cfg = tiny_train_config(
        tmp / "cache",
        "trainer.max_steps=40",
        "trainer.max_epochs=5",
        "trainer.valid_every=40",
        "trainer.valid_max_sentences=8",
        "trainer.alignment_samples=0",
        "evaluate_test=false",
        *overrides,
    )
    build_trainer(cfg, tmp / "run").fit()
    return tmp / "run" / "checkpoints" / "last.pt"


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """A tiny en→fr phrasebook model trained in-process for 40 steps (seconds): its
    ``last.pt``, for the tests that need a checkpoint whose translations differ from
    text to text (its ``best.pt``, from step 10, writes nothing)."""
    return _tiny_run(tmp_path_factory, "tiny-checkpoint")


@pytest.fixture(scope="session")
def tiny_reverse_checkpoint(tmp_path_factory) -> Path:
    """``tiny_checkpoint``'s model the other way: fr→en on the same phrasebook."""
    return _tiny_run(
        tmp_path_factory, "tiny-reverse", "data.src_lang=fr", "data.tgt_lang=en"
    )


@pytest.fixture(scope="session")
def tiny_blocks_checkpoint(tmp_path_factory) -> Path:
    """``tiny_checkpoint``'s model with one encoder self-attention block of 2 heads."""
    return _tiny_run(
        tmp_path_factory,
        "tiny-blocks",
        "model.encoder.self_attention.layers=1",
        "model.encoder.self_attention.heads=2",
    )
