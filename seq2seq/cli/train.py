"""``seq2seq-train``: prepare the corpus, train, score the best checkpoint on test."""

from __future__ import annotations

from omegaconf import DictConfig

from seq2seq.cli.app import command, run_dir
from seq2seq.config import AttentionType, PieceModel, Schedule
from seq2seq.config_checks import (
    check_data,
    check_decode,
    check_model,
    check_optim,
    check_scheduler,
    check_tokenizer,
    check_trainer,
    require,
)


def check_train(cfg: DictConfig) -> None:
    """Every schema training reads, and the settings of two schemas that must agree."""
    check_data(cfg.data)
    check_tokenizer(cfg.tokenizer)
    check_model(cfg.model)
    check_optim(cfg.optim)
    check_scheduler(cfg.scheduler)
    check_decode(cfg.decode)
    check_trainer(cfg.trainer)
    _check_sampling(cfg.tokenizer)
    require(
        not (
            cfg.trainer.guided_alignment > 0
            and AttentionType(cfg.model.attention.type) == AttentionType.none
        ),
        "trainer.guided_alignment > 0 needs an attention to guide; "
        "model/attention=none has none",
    )
    _check_block_optim(cfg)


def _check_block_optim(cfg: DictConfig) -> None:
    """The blocks' own learning rate needs blocks; their warm-up a schedule that sets
    the rate every step (a plateau schedule only halves it now and then)."""
    scaled = cfg.optim.self_attention_lr_scale != 1.0
    warm = cfg.optim.self_attention_warmup_steps > 0
    require(
        not (scaled or warm) or cfg.model.encoder.self_attention.layers > 0,
        "optim.self_attention_lr_scale and optim.self_attention_warmup_steps set the "
        "blocks' learning rate: add blocks (model.encoder.self_attention.layers=2) "
        "or leave them at 1.0 and 0",
    )
    require(
        not warm or Schedule(cfg.scheduler.name) != Schedule.plateau,
        "optim.self_attention_warmup_steps needs scheduler=budget, warmup or "
        "constant, not plateau",
    )


def _check_sampling(tok: DictConfig) -> None:
    """Subword sampling (``data/sampling.py``) draws unigram segmentations only:
    SentencePiece's BPE-dropout cannot be seeded to repeat in another process, so a
    resumed run would not be exact. Preparing never samples, so this is training's."""
    alpha, model_type = tok.sampling_alpha, tok.model_type
    require(
        alpha == 0 or PieceModel(model_type) == PieceModel.unigram,
        f"tokenizer.sampling_alpha={alpha} samples unigram segmentations; "
        f"tokenizer.model_type={model_type} (BPE-dropout) cannot be sampled "
        "reproducibly, so a resumed run would not be exact: set "
        "tokenizer.model_type=unigram or tokenizer.sampling_alpha=0",
    )


def _train(cfg: DictConfig) -> float | None:
    from seq2seq.training.pipeline import run_training

    return run_training(cfg, run_dir())


main = command("train", _train, check_train)
