"""The training loop: teacher forcing, AMP, clipping, schedules, validation, early stop.

The trainer drives the model through ``forward`` (the objective, ``objective.py``),
``attends`` and ``compile_steps``, and validates through a ``Translator``; when to
stop is ``limits.py``'s, what a run keeps ``progress.py``'s. Everything it needs to
continue exactly after a crash goes into the checkpoint, which must hold this run's
model (``resume.py``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import asdict
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from seq2seq.alignment.guided import GoldAttention, SampledGoldAttention
from seq2seq.config import Metric, NonFinite
from seq2seq.config_checks import check_trainer, compile_switch
from seq2seq.data.batching import Batch, VocabCheck, make_loader
from seq2seq.data.prepare import PreparedData
from seq2seq.data.sampling import (
    SampledExamples,
    make_sampled_loader,
    subword_sampling,
)
from seq2seq.decoding.settings import decode_settings
from seq2seq.decoding.translator import Translator
from seq2seq.errors import UserError
from seq2seq.model.checkpoint import (
    CheckpointError,
    library_versions,
    load_checkpoint,
    save_checkpoint,
)
from seq2seq.model.device import autocast, resolve_precision
from seq2seq.model.seq2seq import Seq2Seq, build_model
from seq2seq.training.distributed import DistInfo, all_reduce_sum, max_over_ranks
from seq2seq.training.ema import WeightAverage
from seq2seq.training.limits import budget_used, limit_reached
from seq2seq.training.objective import batch_objective
from seq2seq.training.optim import (
    build_optimizer,
    build_scheduler,
    teacher_forcing_ratio,
)
from seq2seq.training.progress import Progress, TrainResult, is_better, keep_recent
from seq2seq.training.resume import check_resumable
from seq2seq.training.runtime import (
    StopRequested,
    compile_scope,
    rng_state,
    set_rng_state,
)
from seq2seq.training.tracking import (
    ThroughputMeter,
    Tracker,
    log_train_window,
    progress_bar,
)
from seq2seq.training.validation import validate

log = logging.getLogger(__name__)


class TrainingDiverged(UserError, FloatingPointError):
    """A non-finite loss or gradient under ``trainer.nonfinite=stop``: the stop the
    settings asked for, with the step and batch, not a bug."""


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
        self.train_cfg = cfg.trainer
        check_trainer(self.train_cfg)  # what seq2seq-train checks, for Python callers
        self.amp_dtype = resolve_precision(self.train_cfg.precision, device)
        tok = data.tokenizer
        self.model: Seq2Seq = build_model(
            cfg.model, tok.src_vocab_size, tok.tgt_vocab_size
        ).to(device)
        self.model.decoder.output.chunk_bytes = self.train_cfg.loss_chunk_mb * 2**20
        self.compiles = self._compile_steps()
        # The module that trains: the model itself, or its DDP wrapper under torchrun.
        self.train_model: torch.nn.Module = self.model
        if self.dist.enabled:
            self.train_model = DistributedDataParallel(
                self.model, device_ids=[device.index] if device.type == "cuda" else None
            )
        self.optimizer = build_optimizer(cfg.optim, self.model)
        self.ema = (
            WeightAverage(self.model, self.train_cfg.ema_decay)
            if self.train_cfg.ema_decay
            else None
        )
        self.metric = Metric(self.train_cfg.early_stopping_metric)
        self.step_sched, self.plateau, self.budget = build_scheduler(
            cfg.scheduler, self.optimizer, self.metric
        )
        # Validation decodes the scored weights: the model being trained (the same
        # module), or the moving average of its weights; in the precision asked for,
        # or under auto in what auto means for a search.
        self.translator = Translator(
            self.scored_model,
            tok,
            device,
            resolve_precision(self.train_cfg.precision, device, decoding=True),
            batch_tokens=cfg.decode.batch_tokens,
            decode=decode_settings(
                cfg.decode, beam_size=self.train_cfg.valid_beam_size
            ),
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
        tok_cfg = self.cfg.tokenizer
        sampling = subword_sampling(tok_cfg.sampling_alpha, tok_cfg.model_type)
        common = {
            "batch_tokens": self.cfg.data.batch_tokens,
            "seed": self.train_cfg.seed,
            "num_replicas": self.dist.world_size,
            "rank": self.dist.rank,
            "pin_memory": self.device.type == "cuda",
            "agree": max_over_ranks if self.dist.enabled else None,
        }
        train = self.data.splits["train"]
        if sampling is None:
            # sorted by target: target padding runs through the step loop
            vocab = VocabCheck.of(train, "train", self.data.tokenizer)
            return make_loader(
                train, shuffle=True, sort_by="target", vocab=vocab, **common
            )
        log.info("subword sampling: %s", sampling)
        return make_sampled_loader(train, self.data.tokenizer, sampling, **common)

    def _gold_attention(self) -> GoldAttention | SampledGoldAttention | None:
        """The training split's gold attention when guided alignment is on."""
        if not self.train_cfg.guided_alignment:
            return None
        if not self.model.attends:
            raise ValueError(
                "guided alignment needs a model that attends to the source"
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

    def _compile_steps(self) -> bool:
        """``trainer.compile``: the steps the model takes by hand go through
        torch.compile (compiled at the first step, once for all batch shapes) in
        ``trainer.compile_mode``, as far as ``compile_scope`` decides; says at start
        what compiles and why. Returns whether anything does."""
        switch = compile_switch(self.train_cfg.compile)
        scope, why = compile_scope(switch, self.device)
        if scope == "none":
            if switch == "auto":
                log.info("trainer.compile: every step eager (%s)", why)
            return False
        mode = str(getattr(self.train_cfg, "compile_mode", "default"))
        bucket = int(getattr(self.train_cfg, "compile_bucket", 0) or 0)
        parts = self.model.compile_steps(mode, bucket, scope)
        if parts:
            log.info(
                "trainer.compile: %s compile (mode %s) at the first step (%s)",
                " and ".join(parts),
                mode,
                why,
            )
        elif switch == "true":
            log.info(
                "trainer.compile: this model steps nothing by hand (nn.GRU and a "
                "decoder without a step loop); nothing to compile"
            )
        return bool(parts)

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
        check_resumable(state, self.cfg, self.data.tokenizer.to_bytes(), path)
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
            self.train_cfg.teacher_forcing.schedule,
            self.progress.step,
            self.train_cfg.teacher_forcing.k,
            self.train_cfg.teacher_forcing.min_ratio,
        )
        total_tokens = sum(b.n_tokens for b in batches)
        # Normalise by the tokens of all ranks: DDP averages gradients over ranks, so
        # scaling by world_size makes the step equal one step on the combined batch.
        all_tokens = all_reduce_sum(total_tokens, self.device) / self.dist.world_size
        loss_sum = torch.zeros((), device=self.device)
        align_sum = torch.zeros((), device=self.device) if self.gold else None
        kl_sum = torch.zeros((), device=self.device) if self.train_cfg.rdrop else None
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
            with sync():
                with autocast(self.device, self.amp_dtype):
                    loss, objective, guide, kl = batch_objective(
                        self.train_model,
                        batch,
                        1.0 - ratio,
                        self.train_cfg.label_smoothing,
                        self.train_cfg.rdrop,
                        gold,
                        self.train_cfg.guided_alignment,
                    )
                # outside autocast, so each gradient is computed in its forward op's
                # dtype: under it, the products kept in fp32 (the attention's, whose
                # shapes vary) would turn bf16 in the backward, a oneDNN kernel built
                # for each new shape
                self.scaler.scale(objective / all_tokens).backward()
            loss_sum += loss.detach()
            if guide is not None:
                align_sum += guide.detach()  # type: ignore[operator]
            if kl is not None:
                kl_sum += kl.detach()  # type: ignore[operator]
        self.scaler.unscale_(self.optimizer)
        clip = self.train_cfg.clip_grad_norm or float("inf")
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

    def _nonfinite(self, batches: list[Batch]) -> None:
        ids = [int(i) for b in batches for i in b.ids[:8]]
        step, epoch = self.progress.step + 1, self.progress.epoch
        where = f"step {step}, epoch {epoch}, batch ids {ids}"
        self.optimizer.zero_grad(set_to_none=True)
        if self.train_cfg.nonfinite == NonFinite.stop:
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
            if len(group) == self.train_cfg.accumulate:
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
            while self.progress.epoch < self.train_cfg.max_epochs:
                reason = self._run_epoch(start, stop)
                if reason != "epoch_end":
                    if (
                        reason in ("max_steps", "max_minutes")
                        and not self.progress.validated_now()
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
            enabled=self.train_cfg.progress,
            desc=f"epoch {self.progress.epoch + 1}",
        )
        bar.update(self.sampler.state_dict().get("position", 0))
        window = ThroughputMeter()
        try:
            for batches in self._micro_batches():
                began = time.monotonic()
                stats = self.train_step(batches)
                bar.update(len(batches))
                if stats is None:
                    continue
                self.progress.step = step = self.progress.step + 1
                self.progress.elapsed_s = time.monotonic() - start
                if not self.stepped:  # how long the start took, for people and benches
                    self.stepped = True
                    step = self.progress.step
                    log.info(
                        "first step of this process done (step %d) in %.1f s%s",
                        step,
                        time.monotonic() - began,
                        ", compiling the steps included" if self.compiles else "",
                    )
                if self.budget:
                    self.budget.update(self.progress.step, self._budget_used())
                window.add(stats)
                if self.progress.step % self.train_cfg.log_every == 0:
                    groups = self.optimizer.param_groups
                    log_train_window(
                        self.tracker, bar, window.flush(), groups[0]["lr"], step
                    )
                    if (
                        len(groups) > 1
                    ):  # the blocks' own group (optim.self_attention_*)
                        self.tracker.scalars(
                            {"train/lr_self_attention": groups[1]["lr"]}, step
                        )
                reason = limit_reached(
                    self.progress, self.train_cfg, start, stop, self.dist, self.device
                )
                if reason:
                    return reason
                every = self.train_cfg.valid_every
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
        return budget_used(
            self.progress,
            self.sampler,
            self.train_cfg,
            self.device,
            self.dist.world_size,
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
        improved = is_better(metric, self.progress.best_metric, self.metric.mode)
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
        if self.train_cfg.keep_last and self.dist.is_main:
            step, keep = self.progress.step, self.train_cfg.keep_last
            keep_recent(self.ckpt_dir, last, step, keep, self.save)
        patience = self.train_cfg.patience
        if patience is not None and self.progress.bad_validations > patience:
            log.info("early stopping: no improvement in %d validations", patience + 1)
            return "early_stop"
        return "continue"
