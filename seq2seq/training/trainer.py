"""The training loop: teacher forcing, AMP, clipping, schedules, validation, early stop.

The trainer knows the model only through ``forward`` and a ``Translator`` (validation);
everything it needs to continue exactly after a crash goes into the checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from seq2seq.alignment.guided import (
    GoldAttention,
    SampledGoldAttention,
    guided_alignment_loss,
)
from seq2seq.config import AttentionType, Metric, NonFinite
from seq2seq.data.batching import Batch, make_loader
from seq2seq.data.prepare import PreparedData
from seq2seq.data.sampling import (
    SampledExamples,
    make_sampled_loader,
    subword_sampling,
)
from seq2seq.decoding.translator import Translator, decode_settings
from seq2seq.errors import ConfigValueError, UserError
from seq2seq.model.checkpoint import (
    CheckpointError,
    library_versions,
    load_checkpoint,
    save_checkpoint,
)
from seq2seq.model.device import autocast, resolve_precision
from seq2seq.model.loss import symmetric_kl, token_loss
from seq2seq.model.seq2seq import Seq2Seq, build_model
from seq2seq.training.distributed import DistInfo, all_reduce_sum, max_over_ranks
from seq2seq.training.ema import WeightAverage
from seq2seq.training.optim import (
    build_optimizer,
    build_scheduler,
    teacher_forcing_ratio,
)
from seq2seq.training.runtime import (
    StopRequested,
    check_compile_toolchain,
    rng_state,
    set_rng_state,
)
from seq2seq.training.tracking import ThroughputMeter, Tracker, progress_bar
from seq2seq.training.validation import validate

log = logging.getLogger(__name__)


class TrainingDiverged(UserError, FloatingPointError):
    """A non-finite loss or gradient under ``trainer.nonfinite=stop``: the stop the
    settings asked for, with the step and batch, not a bug."""


@dataclass
class Progress:
    """Counters that a checkpoint carries so a resumed run continues exactly."""

    step: int = 0
    epoch: int = 0
    best_metric: float | None = None
    bad_validations: int = 0
    skipped_batches: int = 0
    elapsed_s: float = 0.0  # training wall-clock, summed over resumed runs
    history: list[dict] = field(default_factory=list)


@dataclass
class TrainResult:
    run_dir: Path
    best_checkpoint: Path | None
    last_checkpoint: Path
    progress: Progress
    stop_reason: str


class Trainer:
    """Owns the model, optimizer, schedules and the run directory's artifacts."""

    def __init__(
        self,
        cfg: DictConfig,
        run_dir: Path,
        data: PreparedData,
        device: torch.device,
        dist_info: DistInfo | None = None,
    ) -> None:
        self.cfg, self.run_dir, self.data, self.device = cfg, run_dir, data, device
        self.dist = dist_info or DistInfo()
        self.tcfg = cfg.trainer
        self.amp_dtype = resolve_precision(self.tcfg.precision, device)
        tok = data.tokenizer
        self.model: Seq2Seq = build_model(
            cfg.model, tok.src_vocab_size, tok.tgt_vocab_size
        ).to(device)
        if self.tcfg.compile:
            self._compile_step_loop()
        # The module that trains: the model itself, or its DDP wrapper under torchrun.
        self.train_model: torch.nn.Module = self.model
        if self.dist.enabled:
            self.train_model = DistributedDataParallel(
                self.model, device_ids=[device.index] if device.type == "cuda" else None
            )
        if self.tcfg.rdrop < 0:
            raise ConfigValueError(f"trainer.rdrop must be >= 0, got {self.tcfg.rdrop}")
        self.optimizer = build_optimizer(cfg.optim, self.model)
        self.ema = (
            WeightAverage(self.model, self.tcfg.ema_decay)
            if self.tcfg.ema_decay
            else None
        )
        self.metric = Metric(self.tcfg.early_stopping_metric)
        self.step_sched, self.plateau, self.budget = build_scheduler(
            cfg.scheduler, self.optimizer, self.metric
        )
        # Validation decodes the scored weights: the model being trained (the same
        # module), or the moving average of its weights.
        self.translator = Translator(
            self.scored_model,
            tok,
            device,
            self.amp_dtype,
            batch_tokens=cfg.decode.batch_tokens,
            decode=decode_settings(cfg.decode, beam_size=self.tcfg.valid_beam_size),
        )
        self.scaler = torch.amp.GradScaler(
            device.type, enabled=self.amp_dtype == torch.float16
        )
        self.loader = self._train_loader()
        self.sampler = self.loader.batch_sampler
        self.gold = self._gold_attention()
        self.progress = Progress()
        self.stepped = False  # has this process run a step yet
        self.ckpt_dir = run_dir / "checkpoints"
        self.tracker = Tracker(run_dir / "tb", enabled=self.dist.is_main)
        self.n_params = sum(p.numel() for p in self.model.parameters())

    def _train_loader(self) -> DataLoader:
        """The cached pieces in token buckets, or with ``tokenizer.sampling_alpha > 0``
        the training split re-encoded with sampled pieces every epoch."""
        tcfg = self.cfg.tokenizer
        sampling = subword_sampling(tcfg.sampling_alpha, tcfg.model_type)
        common = {
            "batch_tokens": self.cfg.data.batch_tokens,
            "seed": self.tcfg.seed,
            "num_replicas": self.dist.world_size,
            "rank": self.dist.rank,
            "pin_memory": self.device.type == "cuda",
            "agree": max_over_ranks if self.dist.enabled else None,
        }
        train = self.data.splits["train"]
        if sampling is None:
            # sorted by target: target padding runs through the step loop
            return make_loader(train, shuffle=True, sort_by="target", **common)
        log.info("subword sampling: %s", sampling)
        return make_sampled_loader(train, self.data.tokenizer, sampling, **common)

    def _gold_attention(self) -> GoldAttention | SampledGoldAttention | None:
        """The training split's gold attention when guided alignment is on."""
        weight = self.tcfg.guided_alignment
        if weight < 0:
            raise ConfigValueError(f"trainer.guided_alignment={weight}: must be >= 0")
        if not weight:
            return None
        if self.cfg.model.attention.type == AttentionType.none:
            raise ConfigValueError(
                "trainer.guided_alignment > 0 needs an attention to guide; "
                "model/attention=none has none"
            )
        examples = self.loader.dataset
        if isinstance(examples, SampledExamples):  # the gold follows the pieces
            return SampledGoldAttention(lambda: examples.current, self.data.tokenizer)
        return GoldAttention(self.data.splits["train"], self.data.tokenizer)

    @property
    def scored_model(self) -> Seq2Seq:
        """The weights that validation decodes and checkpoints carry as ``model``."""
        return self.ema.module if self.ema else self.model

    # ----------------------------------------------------------------- checkpoints
    def state(self) -> dict:
        ema = {}
        if self.ema:  # "model" is the average; training resumes from these
            ema = {
                "trained_model": self.model.state_dict(),
                "ema_updates": self.ema.updates,
            }
        return {
            "format": "seq2seq-checkpoint",
            "format_version": 1,
            "model": self.scored_model.state_dict(),
            **ema,
            "config": OmegaConf.to_container(self.cfg, resolve=True, enum_to_str=True),
            "tokenizer": self.data.tokenizer.to_bytes(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": {
                "step": self.step_sched.state_dict() if self.step_sched else None,
                "plateau": self.plateau.state_dict() if self.plateau else None,
                "budget": self.budget.state_dict() if self.budget else None,
            },
            "scaler": self.scaler.state_dict(),
            "step": self.progress.step,
            "epoch": self.progress.epoch,
            "progress": asdict(self.progress),
            "rng": rng_state(),
            "sampler": self.sampler.state_dict(),
            "best_metric": self.progress.best_metric,
            "versions": library_versions(),
        }

    def _compile_step_loop(self) -> None:
        """``trainer.compile``: the decoder's step loop body goes through
        torch.compile (compiled at the first step, once for all batch shapes)."""
        check_compile_toolchain(self.device)
        decoder = self.model.decoder
        if not decoder.has_step_loop:
            log.info(
                "trainer.compile: this decoder has no step loop; nothing to compile"
            )
            return
        decoder.compile_loop = True
        log.info("trainer.compile: the decoder's step loop compiles at the first step")

    def save(self, name: str) -> Path:
        """Write a checkpoint (rank 0 only; the other ranks just name the path)."""
        path = self.ckpt_dir / name
        if self.dist.is_main:
            save_checkpoint(path, self.state())
        return path

    def resume(self, path: Path) -> None:
        state = load_checkpoint(path, map_location=self.device)
        if "optimizer" not in state:
            raise CheckpointError(
                f"{path} holds weights only, no training state (an average written by "
                "seq2seq-average?): resume from the run's checkpoints/last.pt"
            )
        # With trainer.ema_decay, "model" is the average of "trained_model"'s weights;
        # an average turned on at a resume starts from the trained weights.
        trained = state.get("trained_model", state["model"])
        self.model.load_state_dict(trained)
        if self.ema:
            self.ema.load(state["model"], state.get("ema_updates", 0))
        self.optimizer.load_state_dict(state["optimizer"])
        if self.step_sched and state["scheduler"]["step"]:
            self.step_sched.load_state_dict(state["scheduler"]["step"])
        if self.plateau and state["scheduler"]["plateau"]:
            self.plateau.load_state_dict(state["scheduler"]["plateau"])
        if self.budget and state["scheduler"].get("budget"):
            self.budget.load_state_dict(state["scheduler"]["budget"])
        self.scaler.load_state_dict(state["scaler"])
        self.progress = Progress(**state["progress"])
        self.sampler.load_state_dict(state["sampler"])
        set_rng_state(state["rng"])
        log.info(
            "resumed from %s at step %d, epoch %d", path, state["step"], state["epoch"]
        )

    # ------------------------------------------------------------------- training
    def train_step(self, batches: list[Batch]) -> dict | None:
        """One optimizer step over ``accumulate`` micro-batches; None if skipped."""
        self.model.train()
        ratio = teacher_forcing_ratio(
            self.tcfg.teacher_forcing.schedule,
            self.progress.step,
            self.tcfg.teacher_forcing.k,
            self.tcfg.teacher_forcing.min_ratio,
        )
        total_tokens = sum(b.n_tokens for b in batches)
        # Normalise by the tokens of all ranks: DDP averages gradients over ranks, so
        # scaling by world_size makes the step equal one step on the combined batch.
        all_tokens = all_reduce_sum(total_tokens, self.device) / self.dist.world_size
        loss_sum = torch.zeros((), device=self.device)
        align_sum = torch.zeros((), device=self.device) if self.gold else None
        kl_sum = torch.zeros((), device=self.device) if self.tcfg.rdrop else None
        for i, batch in enumerate(batches):
            gold = None
            if self.gold is not None:
                gold = self.gold.batch(
                    batch.ids.tolist(), batch.tgt_out.size(1), batch.src.size(1)
                ).to(self.device, non_blocking=True)
            batch = batch.to(self.device, non_blocking=True)
            last = i == len(batches) - 1
            sync = contextlib.nullcontext
            if self.dist.enabled and not last:
                sync = self.train_model.no_sync  # all-reduce once, after the last
            with sync(), autocast(self.device, self.amp_dtype):
                loss, objective, guide, kl = self._objective(batch, 1.0 - ratio, gold)
                self.scaler.scale(objective / all_tokens).backward()
            loss_sum += loss.detach()
            if guide is not None:
                align_sum += guide.detach()  # type: ignore[operator]
            if kl is not None:
                kl_sum += kl.detach()  # type: ignore[operator]
        self.scaler.unscale_(self.optimizer)
        clip = self.tcfg.clip_grad_norm or float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        # One host sync per step: a non-finite loss must never reach the weights.
        if not bool(torch.isfinite(loss_sum) & torch.isfinite(grad_norm)):
            return self._nonfinite(batches)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        if self.step_sched:
            self.step_sched.step()
        if self.ema:
            self.ema.update(self.model)
        return {
            "loss_sum": loss_sum,
            "tokens": total_tokens,
            "grad_norm": grad_norm,
            "align_sum": align_sum,
            "kl_sum": kl_sum,
        }

    def _objective(
        self, batch: Batch, sampling_ratio: float, gold: torch.Tensor | None
    ) -> tuple[torch.Tensor, ...]:
        """One micro-batch's summed translation loss (what is logged), the objective
        that is minimised, and the guided-alignment and R-Drop terms (or None).

        R-Drop runs the batch twice in one forward pass (the batch stacked on itself,
        other dropout masks per copy): the loss is the two copies' mean
        cross-entropy, the objective adds ``rdrop / 2`` times their symmetric KL."""
        src, lengths, mask, tgt_in, rows = (
            batch.src,
            batch.src_lengths,
            batch.src_mask,
            batch.tgt_in,
            batch.tgt_rows,  # logits for the non-pad targets only
        )
        twice = self.tcfg.rdrop > 0
        if twice:
            src, lengths, mask, tgt_in = (
                torch.cat([x, x]) for x in (src, lengths, mask, tgt_in)
            )
            rows = torch.cat([rows, rows + batch.tgt_in.numel()])
        out = self.train_model(
            src, lengths, mask, tgt_in, sampling_ratio=sampling_ratio, rows=rows
        )
        targets, eps = batch.flat_targets(), self.tcfg.label_smoothing
        kl = None
        if twice:
            first, second = out.logits.chunk(2)
            loss = (
                token_loss(first, targets, eps) + token_loss(second, targets, eps)
            ) / 2
            kl = symmetric_kl(first, second)
            objective = loss + self.tcfg.rdrop / 2 * kl
        else:
            loss = objective = token_loss(out.logits, targets, eps)
        guide = None
        if gold is not None:  # logged losses stay the translation loss
            gold = torch.cat([gold, gold]) if twice else gold
            guide = guided_alignment_loss(out.attention, gold) / (2 if twice else 1)
            objective = objective + self.tcfg.guided_alignment * guide
        return loss, objective, guide, kl

    def _nonfinite(self, batches: list[Batch]) -> None:
        ids = [int(i) for b in batches for i in b.ids[:8]]
        step, epoch = self.progress.step + 1, self.progress.epoch
        where = f"step {step}, epoch {epoch}, batch ids {ids}"
        self.optimizer.zero_grad(set_to_none=True)
        if self.tcfg.nonfinite == NonFinite.stop:
            raise TrainingDiverged(
                f"non-finite loss or gradient at {where} (trainer.nonfinite=stop); "
                "lower optim.lr, or skip such batches with trainer.nonfinite=skip"
            )
        self.progress.skipped_batches += 1
        log.warning(
            "non-finite loss or gradient at %s: batch skipped (%d so far)",
            where,
            self.progress.skipped_batches,
        )
        return None

    def _micro_batches(self):
        """Yield groups of ``accumulate`` batches for the current epoch."""
        group: list[Batch] = []
        for batch in self.loader:
            group.append(batch)
            if len(group) == self.tcfg.accumulate:
                yield group
                group = []
        if group:
            yield group

    def fit(self) -> TrainResult:
        """Train until a limit, early stopping or a signal; return where things are."""
        # max_minutes counts training time across resumes, not since this launch.
        start = time.monotonic() - self.progress.elapsed_s
        if self.budget:
            self.budget.update(self.progress.step, self._budget_used())
        reason = "max_epochs"
        with StopRequested() as stop:
            while self.progress.epoch < self.tcfg.max_epochs:
                reason = self._run_epoch(start, stop)
                if reason != "epoch_end":
                    if (
                        reason in ("max_steps", "max_minutes")
                        and not self._validated_now()
                    ):
                        self._validate_and_checkpoint()
                    break
                self.progress.epoch += 1
                self.sampler.set_epoch(self.progress.epoch)
                if self._validate_and_checkpoint() == "early_stop":
                    reason = "early_stop"
                    break
                reason = "max_epochs"
        last = self.save("last.pt")
        best = self.ckpt_dir / "best.pt"
        log.info("training stopped (%s) at step %d", reason, self.progress.step)
        return TrainResult(
            self.run_dir, best if best.exists() else None, last, self.progress, reason
        )

    def _run_epoch(self, start: float, stop: StopRequested) -> str:
        bar = progress_bar(
            total=len(self.sampler),
            enabled=self.tcfg.progress,
            desc=f"epoch {self.progress.epoch + 1}",
        )
        bar.update(self.sampler.state_dict().get("position", 0))
        window = ThroughputMeter()
        try:
            for batches in self._micro_batches():
                stats = self.train_step(batches)
                bar.update(len(batches))
                if stats is None:
                    continue
                self.progress.step += 1
                self.progress.elapsed_s = time.monotonic() - start
                if not self.stepped:  # how long the start took, for people and benches
                    self.stepped = True
                    step = self.progress.step
                    log.info("first step of this process done (step %d)", step)
                if self.budget:
                    self.budget.update(self.progress.step, self._budget_used())
                window.add(stats)
                if self.progress.step % self.tcfg.log_every == 0:
                    self._log_train(window.flush(), bar)
                reason = self._limit_reached(start, stop)
                if reason:
                    return reason
                every = self.tcfg.valid_every
                if (
                    every
                    and self.progress.step % every == 0
                    and self._validate_and_checkpoint() == "early_stop"
                ):
                    return "early_stop"
        finally:
            bar.close()
        return "epoch_end"

    def _budget_used(self) -> float:
        """Fraction of the run's budget spent: the largest over the limits set."""
        epochs = self.progress.epoch + self.sampler.position / max(len(self.sampler), 1)
        used = [epochs / self.tcfg.max_epochs]
        if self.tcfg.max_steps:
            used.append(self.progress.step / self.tcfg.max_steps)
        if self.tcfg.max_minutes:
            # Ranks must set the same learning rate: average their clocks.
            elapsed = all_reduce_sum(self.progress.elapsed_s, self.device)
            used.append(elapsed / self.dist.world_size / 60 / self.tcfg.max_minutes)
        return max(used)

    def _limit_reached(self, start: float, stop: StopRequested) -> str:
        reason = ""
        minutes = (time.monotonic() - start) / 60
        if stop.requested:
            reason = "signal"
        elif self.tcfg.max_steps and self.progress.step >= self.tcfg.max_steps:
            reason = "max_steps"
        elif self.tcfg.max_minutes and minutes >= self.tcfg.max_minutes:
            reason = "max_minutes"
        # Ranks stop together, or the others would wait forever in an all-reduce.
        stopping = self.dist.enabled and all_reduce_sum(bool(reason), self.device)
        return reason or ("another rank stopped" if stopping else "")

    def _log_train(self, window: dict, bar) -> None:
        lr = self.optimizer.param_groups[0]["lr"]
        loss = window["loss"]
        self.tracker.scalars(
            {
                "train/loss": loss,
                "train/ppl": math.exp(min(loss, 50.0)),
                "train/lr": lr,
                "train/grad_norm": window["grad_norm"],
                "train/tokens_per_sec": window["tokens_per_sec"],
                **{
                    f"train/{name}": window[name]
                    for name in ("alignment_loss", "rdrop_kl")
                    if name in window
                },
            },
            self.progress.step,
        )
        bar.set_postfix(
            loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{window['tokens_per_sec']:.0f}"
        )

    # ----------------------------------------------------------------- validation
    def _validate_and_checkpoint(self) -> str:
        """Validate, log, keep best.pt / last.pt, step the plateau schedule."""
        metrics = validate(
            self.translator, self.data, self.cfg, self.tracker, self.progress.step
        )
        metric = metrics[self.metric.value]
        self.progress.history.append({"step": self.progress.step, **metrics})
        if self.plateau:
            self.plateau.step(metric)
        improved = self._is_better(metric)
        if improved:
            self.progress.best_metric = metric
            self.progress.bad_validations = 0
        else:
            self.progress.bad_validations += 1
        log.info(
            "step %d | valid loss %.3f ppl %.2f | BLEU %.2f chrF %.2f TER %.2f "
            "| lr %.2e%s",
            self.progress.step,
            metrics["loss"],
            metrics["ppl"],
            metrics["bleu"],
            metrics["chrf"],
            metrics["ter"],
            self.optimizer.param_groups[0]["lr"],
            " | new best" if improved else "",
        )
        if improved:
            self.save("best.pt")
        last = self.save("last.pt")
        self._keep_recent(last)
        patience = self.tcfg.patience
        if patience is not None and self.progress.bad_validations > patience:
            log.info("early stopping: no improvement in %d validations", patience + 1)
            return "early_stop"
        return "continue"

    def _keep_recent(self, last: Path) -> None:
        """Keep the last ``trainer.keep_last`` validated checkpoints, for averaging.

        Each is a hard link to the ``last.pt`` just written, so nothing is serialised
        or written twice; ``last.pt`` is later replaced by rename, so the link keeps
        this step's file. Named by step (``step00001234.pt``) so that
        ``seq2seq-average`` and a shell glob take them in training order; older ones
        are deleted.
        """
        keep = self.tcfg.keep_last
        if not keep or not self.dist.is_main:
            return
        path = self.ckpt_dir / f"step{self.progress.step:08d}.pt"
        path.unlink(missing_ok=True)
        try:
            os.link(last, path)
        except OSError:  # a file system without hard links
            self.save(path.name)
        for old in sorted(self.ckpt_dir.glob("step*.pt"))[:-keep]:
            old.unlink()

    def _validated_now(self) -> bool:
        history = self.progress.history
        return bool(history) and history[-1]["step"] == self.progress.step

    def _is_better(self, metric: float) -> bool:
        best = self.progress.best_metric
        if best is None:
            return True
        if self.metric.mode == "max":
            return metric > best
        return metric < best
