"""Shared builders for the trainer and CLI tests: a tiny phrasebook run on CPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from seq2seq.config import CONFIG_DIR, DataConfig, register_configs
from seq2seq.data.prepare import prepare_data
from seq2seq.training.runtime import seed_everything
from seq2seq.training.trainer import Trainer

register_configs()

TINY = [
    "data=phrasebook",
    "data.phrasebook.train_size=400",
    "data.phrasebook.validation_size=40",
    "data.phrasebook.test_size=40",
    "data.batch_tokens=600",
    "tokenizer.vocab_size=300",
    "model=tiny",
    "model.emb_dim=32",
    "model.encoder.hidden_size=32",
    "model.decoder.hidden_size=64",
    "scheduler=constant",
    "trainer=debug",
    "trainer.threads=1",
    "trainer.progress=false",
    # precision=auto is bf16 on CPUs with AMX or AVX512-BF16: the tests compare code
    # paths and resumed runs bit for bit, which only fp32 promises on every CPU
    "trainer.precision=fp32",
]


def tiny_train_config(cache_dir: Path, *overrides: str) -> DictConfig:
    """The train config of a tiny phrasebook model, caching in ``cache_dir``."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(
            config_name="train",
            overrides=[*TINY, f"data.cache_dir={cache_dir}", *overrides],
        )


def build_trainer(cfg: DictConfig, run_dir: Path) -> Trainer:
    """Seed, prepare the corpus (cached in ``cfg.data.cache_dir``), build a CPU
    trainer writing to ``run_dir``."""
    seed_everything(cfg.trainer.seed)
    data = prepare_data(cfg.data, cfg.tokenizer, Path(cfg.data.cache_dir))
    return Trainer(cfg, run_dir, data, torch.device("cpu"))


def run_keeping_three(tmp: Path) -> Path:
    """A tiny run of 8 steps, validated every 2, whose last three epoch checkpoints
    are kept (``trainer.keep_last=3``); its run directory."""
    cfg = tiny_train_config(
        tmp / "cache",
        "trainer.valid_every=2",
        "trainer.max_steps=8",
        "trainer.keep_last=3",
    )
    build_trainer(cfg, tmp / "run").fit()
    return tmp / "run"


def phrasebook_config(train: int, validation: int, test: int) -> DataConfig:
    """The built-in phrasebook with these split sizes."""
    cfg = DataConfig()
    cfg.phrasebook.train_size = train
    cfg.phrasebook.validation_size = validation
    cfg.phrasebook.test_size = test
    return cfg


def run_script(
    cwd: Path,
    script: str,
    *args: str,
    stdin: str | bytes | None = None,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run one of the installed console scripts (stdout and stderr as text, stdin as
    text or bytes, ``env`` added to this process's); with ``check``, fail the test
    with its output unless it exits 0."""
    proc = subprocess.run(
        [str(Path(sys.executable).parent / script), *args],
        cwd=cwd,
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    proc.stdout = proc.stdout.decode("utf-8", "replace")
    proc.stderr = proc.stderr.decode("utf-8", "replace")
    if check:
        assert proc.returncode == 0, f"{script} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def page_records(page: str) -> list[dict]:
    """The records an HTML viewer page carries for its drawing code (``#data``)."""
    match = re.search(r'<script type="application/json" id="data">(.*?)</script>', page)
    assert match, "no #data in the page"
    return json.loads(match.group(1))


def record_step_gradients(trainer: Trainer) -> dict[str, torch.Tensor]:
    """Fill the returned dict with each parameter's gradient as the optimizer sees it
    (after DDP's all-reduce, the token normalisation and clipping), at the next step.

    Why: two code paths that sum in another order (shards, devices, ISAs) agree on the
    gradient to rounding, but Adam's first update is about lr · sign(g), which turns a
    rounding difference in a gradient near 0 into a weight difference of up to 2 · lr.
    Compare gradients, never weights after an Adam step."""
    grads: dict[str, torch.Tensor] = {}
    step = trainer.optimizer.step

    def recording_step(*args, **kwargs):
        for name, param in trainer.model.named_parameters():
            if param.grad is not None:
                grads[name] = param.grad.detach().clone()
        return step(*args, **kwargs)

    trainer.optimizer.step = recording_step  # type: ignore[method-assign]
    return grads


def assert_gradients_close(
    got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]
) -> None:
    """Gradients equal up to summation order, on any CPU: each entry within 1e-3
    (relative) plus 1e-3 of the largest entry of all the model's gradients.

    Why so wide: rounding noise follows the size of the summed terms, not of the
    sum, and a layer norm over nearly constant features (a tiny untrained model's
    states) multiplies its input's noise by 1/σ; a gradient that cancels to about
    0 (the attention's query at the first step) keeps only noise. A real error,
    a shard weighted wrong or a term lost, moves gradients by tens of percent.
    The same parameters received a gradient."""
    assert got.keys() == want.keys()
    largest = max(float(g.abs().max()) for g in want.values())
    for name, grad in want.items():
        torch.testing.assert_close(
            got[name],
            grad,
            rtol=1e-3,
            atol=1e-3 * largest,
            msg=lambda m, n=name: f"{n}: {m}",
        )


# names of XML namespaces: identifiers a browser never loads
_NAMESPACES = re.compile(r"http://www\.w3\.org/(?:2000/svg|1999/xhtml|1999/xlink)\b")


def outside_urls(page: str) -> list[str]:
    """Every http(s) address in a page but XML namespace names: what the page could
    load from outside (a CDN); a self-contained page has none."""
    return re.findall(r"https?://[^\s\"'<>)]+", _NAMESPACES.sub("", page))
