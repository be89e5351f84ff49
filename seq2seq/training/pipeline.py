"""The whole training job: prepare the corpus, train, score on test, report.

``seq2seq-train`` calls ``run_training``; all it makes lives in the run directory.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from seq2seq.alignment.export import write_png
from seq2seq.alignment.extract import attention_maps, forced_split
from seq2seq.data.prepare import format_stats, prepare_data, resolve_cache_root
from seq2seq.data.splits import EncodedSplit, write_lines
from seq2seq.decoding.scores import Scores, score
from seq2seq.decoding.settings import fit_max_len_a
from seq2seq.decoding.translator import Translator
from seq2seq.model.checkpoint import CheckpointError, load_checkpoint
from seq2seq.model.device import select_device
from seq2seq.training.distributed import (
    barrier,
    broadcast_object,
    cleanup,
    init_distributed,
)
from seq2seq.training.runtime import (
    configure_cuda,
    configure_threads,
    seed_everything,
)
from seq2seq.training.trainer import Trainer, TrainResult

log = logging.getLogger(__name__)


def find_resume_checkpoint(cfg: DictConfig, run_dir: Path) -> Path | None:
    """The checkpoint to resume from, or None to start fresh.

    ``trainer.resume_from=PATH`` wins. ``trainer.resume=true`` takes ``last.pt`` of this
    run directory (``hydra.run.dir=...``) or else the newest ``last.pt`` of the sibling
    run directories (the previous run of ``seq2seq-train``).
    """
    if cfg.trainer.resume_from:
        path = Path(cfg.trainer.resume_from)
        if not path.is_file():
            raise CheckpointError(f"trainer.resume_from={path} does not exist")
        return path
    if not cfg.trainer.resume:
        return None
    own = run_dir / "checkpoints" / "last.pt"
    if own.is_file():
        return own
    siblings = sorted(
        run_dir.parent.glob("*/checkpoints/last.pt"), key=lambda p: p.stat().st_mtime
    )
    if siblings:
        return siblings[-1]
    log.warning(
        "trainer.resume=true but no last.pt under %s: starting fresh", run_dir.parent
    )
    return None


def run_training(cfg: DictConfig, run_dir: Path) -> float | None:
    """Prepare data, train, score the best checkpoint on test, and say where things are.

    Under torchrun every rank runs this; one rank prepares the corpus cache while the
    others wait for it (``prepare_data``); rank 0 owns the run directory, logs and
    saves. Returns the best validation metric, so Hydra
    sweeps can compare runs.
    """
    seed_everything(cfg.trainer.seed)
    configure_threads(cfg.trainer.threads)
    device = select_device(cfg.trainer.device)
    dist_info = init_distributed(device.type)
    if dist_info.enabled and device.type == "cuda":
        device = torch.device("cuda", dist_info.local_rank)
    configure_cuda(device)
    run_dir = Path(broadcast_object(str(run_dir)))
    data = _prepare(cfg)
    log.info("corpus:\n%s", format_stats(data.stats))
    fit_output_limit(cfg, data.splits["train"])
    if not dist_info.is_main:
        cfg.trainer.progress = False
    trainer = Trainer(cfg, run_dir, data, device, dist_info)
    log.info(
        "model: %s parameters, device %s, %s",
        f"{trainer.n_params:,}",
        device,
        "fp32" if trainer.amp_dtype is None else f"{trainer.amp_dtype} autocast",
    )
    trainer.tracker.config(OmegaConf.to_yaml(cfg, resolve=True))
    checkpoint = find_resume_checkpoint(cfg, run_dir)
    if checkpoint is not None:
        trainer.resume(checkpoint)
    result = trainer.fit()
    if dist_info.is_main:
        print(finish(trainer, result))
    barrier()
    cleanup()
    return result.progress.best_metric


def fit_output_limit(cfg: DictConfig, train: EncodedSplit) -> None:
    """``decode.max_len_a`` None: fit it on the training pairs (``fit_max_len_a``)
    and write it into ``cfg``, so validation and every checkpoint decode with it."""
    decode = cfg.decode
    if decode.max_len_a is not None:
        return
    decode.max_len_a = fit_max_len_a(
        train.src_lengths() + 1,
        train.tgt_lengths() + 1,
        decode.max_len_b,
        decode.max_len_coverage,
    )
    log.info(
        "decode.max_len_a=%.2f: outputs end by a·|src| + %d pieces, the limit that "
        "covers %g%% of the training pairs' targets",
        decode.max_len_a,
        decode.max_len_b,
        100 * decode.max_len_coverage,
    )


def _prepare(cfg: DictConfig):
    """Every rank asks for the cache: the first to take its lock builds it, the others
    wait on the lock (not on a collective with a timeout), then all map it."""
    return prepare_data(cfg.data, cfg.tokenizer, resolve_cache_root(cfg.data.cache_dir))


def finish(trainer: Trainer, result: TrainResult) -> str:
    """Score the best checkpoint on test, save its alignment pictures, log hparams."""
    cfg, run_dir = trainer.cfg, trainer.run_dir
    lines = [f"run directory: {run_dir}", f"stopped: {result.stop_reason}"]
    metrics = {"hparam/best_valid": result.progress.best_metric or 0.0}
    if result.best_checkpoint is not None:
        best = load_checkpoint(result.best_checkpoint, map_location=trainer.device)
        trainer.scored_model.load_state_dict(best["model"])
        lines.append(f"best checkpoint: {result.best_checkpoint} (step {best['step']})")
        # The run's decoding settings (validation may have decoded more cheaply).
        translator = trainer.translator.with_decoding(cfg.decode)
        if cfg.evaluate_test and "test" in trainer.data.splits:
            scores = score_split(translator, trainer.data.splits["test"], run_dir)
            metrics.update(
                {
                    "hparam/test_bleu": scores.bleu,
                    "hparam/test_chrf": scores.chrf,
                    "hparam/test_ter": scores.ter,
                }
            )
            lines.append(f"test: {scores.summary()}")
        pictures = save_alignment_pictures(
            translator, trainer.data.splits["validation"], cfg, run_dir / "alignments"
        )
        lines.append(f"alignment pictures: {pictures}")
    trainer.tracker.hparams(hparams_of(cfg, trainer.n_params), metrics)
    trainer.tracker.close()
    lines.append(f"TensorBoard: tensorboard --logdir {run_dir / 'tb'}")
    return "\n".join(lines)


def score_split(translator: Translator, split, run_dir: Path) -> Scores:
    """Translate the test split, write ``hyps/test.txt``, score it."""
    texts = translator.detokenize(translator.hypotheses(split))
    write_lines(run_dir / "hyps" / "test.txt", texts)
    return score(texts, split.tgt_text)


def save_alignment_pictures(translator: Translator, split, cfg, folder: Path) -> Path:
    """PNG heatmaps of the first ``trainer.alignment_samples`` validation sentences,
    forced through the best model's own translations."""
    subset = split.head(min(max(cfg.trainer.alignment_samples, 1), len(split)))
    hyps = translator.hypotheses(subset)
    maps = attention_maps(translator, forced_split(subset, [h.tokens for h in hyps]))
    return write_png(maps, folder, prefix="valid")


def hparams_of(cfg: DictConfig, n_params: int) -> dict:
    model = cfg.model
    return {
        "attention": model.attention.type,
        "decoder_style": model.decoder.style or model.attention.style,
        "input_feeding": model.decoder.input_feeding,
        "emb_dim": model.emb_dim,
        "encoder_hidden": model.encoder.hidden_size,
        "decoder_hidden": model.decoder.hidden_size,
        "lr": cfg.optim.lr,
        "label_smoothing": cfg.trainer.label_smoothing,
        "beam_size": cfg.decode.beam_size,
        "parameters": n_params,
    }
