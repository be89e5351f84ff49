"""The training loop: exact resume, TensorBoard tags, non-finite losses, signals."""

from __future__ import annotations

import copy
import os
import signal
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seq2seq.data.batching import TokenBucketSampler, make_loader
from seq2seq.data.sampling import SampledBucketSampler
from seq2seq.decoding.translator import Translator
from seq2seq.model import output_layer as output_layer_module
from seq2seq.model.checkpoint import CheckpointError, load_checkpoint
from seq2seq.model.deep_gru import DeepGRU
from seq2seq.training.runtime import missing_toolchain
from seq2seq.training.trainer import Trainer
from tests.helpers import build_trainer, tiny_train_config


def _trainer(tmp_path: Path, run: str, *overrides: str) -> Trainer:
    cfg = tiny_train_config(tmp_path / "cache", *overrides)
    return build_trainer(cfg, tmp_path / run)


def _events(run_dir: Path) -> EventAccumulator:
    acc = EventAccumulator(
        str(run_dir / "tb"), size_guidance={"images": 0, "scalars": 0}
    )
    acc.Reload()
    return acc


def _losses(run_dir: Path) -> dict[int, float]:
    return {e.step: e.value for e in _events(run_dir).Scalars("train/loss")}


def _resume_matches_uninterrupted(tmp_path: Path, *extra: str) -> Trainer:
    """Train 14 steps, and 6 then 8 more after a resume: same losses, same weights."""
    common = [
        "trainer.log_every=1",
        "trainer.valid_every=null",
        "trainer.max_epochs=5",
        "data.batch_tokens=1500",
        *extra,
    ]
    full = _trainer(tmp_path, "full", *common, "trainer.max_steps=14")
    full.fit()
    first = _trainer(tmp_path, "first", *common, "trainer.max_steps=6")
    first.fit()
    resumed = _trainer(tmp_path, "resumed", *common, "trainer.max_steps=14")
    resumed.resume(tmp_path / "first" / "checkpoints" / "last.pt")
    resumed.fit()

    assert full.progress.epoch >= 1, "the run must cross an epoch boundary"
    assert first.sampler.position > 0, "the first run must stop inside an epoch"
    full_losses, resumed_losses = (
        _losses(tmp_path / "full"),
        _losses(tmp_path / "resumed"),
    )
    assert sorted(resumed_losses) == list(range(7, 15))
    for step, loss in resumed_losses.items():
        assert loss == full_losses[step], f"step {step}"
    for name, weight in full.model.state_dict().items():
        torch.testing.assert_close(
            resumed.model.state_dict()[name], weight, rtol=0, atol=0
        )
    for name, weight in full.scored_model.state_dict().items():  # the average too
        torch.testing.assert_close(
            resumed.scored_model.state_dict()[name], weight, rtol=0, atol=0
        )
    return full


def test_resumed_run_continues_the_uninterrupted_one_exactly(tmp_path):
    full = _resume_matches_uninterrupted(tmp_path)
    assert type(full.sampler) is TokenBucketSampler


def test_resumed_run_with_subword_sampling_continues_exactly(tmp_path):
    """The resumed run re-creates the sampled pieces of the epoch it stopped in."""
    full = _resume_matches_uninterrupted(tmp_path, "tokenizer.sampling_alpha=0.2")
    assert isinstance(full.sampler, SampledBucketSampler)
    cached = full.data.splits["train"]
    assert full.loader.dataset.current.src_ids != cached.src_ids


def test_resumed_run_with_a_weight_average_continues_exactly(tmp_path):
    full = _resume_matches_uninterrupted(tmp_path, "trainer.ema_decay=0.9")
    assert full.ema.updates == 14


def test_resumed_run_with_compiled_recurrent_steps_continues_exactly(tmp_path, caplog):
    """``trainer.compile=auto`` (the default) on a deep-transition model compiles the
    encoder's and decoder's recurrences and says so; the compiled steps' kernels are
    deterministic, so a resumed run still equals the uninterrupted one."""
    if missing_toolchain(torch.device("cpu")):
        pytest.skip("torch.compile cannot build CPU kernels here (no C++ compiler)")
    with caplog.at_level("INFO"):
        full = _resume_matches_uninterrupted(
            tmp_path,
            "trainer.compile=auto",
            "model.encoder.transition_depth=2",
            "model.decoder.transition_depth=2",
            "model/attention=luong_general",
            "model.decoder.input_feeding=false",
        )
    assert full.compiles
    grus = [m for m in full.model.modules() if isinstance(m, DeepGRU)]
    assert len(grus) == 2 and {m.compile_mode for m in grus} == {"default"}
    assert "they win on a CPU" in caplog.text
    assert "compiling the steps included" in caplog.text


def test_resumed_run_with_self_attention_blocks_continues_exactly(tmp_path):
    full = _resume_matches_uninterrupted(
        tmp_path, "model.encoder.self_attention.layers=1"
    )
    assert full.model.self_attention is not None


def test_without_sampling_the_trainer_batches_the_cached_pieces(tmp_path):
    """``tokenizer.sampling_alpha=0``: the loader of before subword sampling."""
    trainer = _trainer(tmp_path, "run", "tokenizer.sampling_alpha=0")
    reference = make_loader(
        trainer.data.splits["train"],
        batch_tokens=trainer.cfg.data.batch_tokens,
        shuffle=True,
        seed=trainer.train_cfg.seed,
        sort_by="target",
    )
    assert type(trainer.sampler) is TokenBucketSampler
    assert trainer.translator.batch_tokens == trainer.cfg.decode.batch_tokens  # valid
    for epoch in (0, 1):
        trainer.sampler.set_epoch(epoch)
        reference.batch_sampler.set_epoch(epoch)
        for ours, theirs in zip(trainer.loader, reference, strict=True):
            for name in ("src", "src_lengths", "tgt_in", "tgt_out", "ids"):
                assert torch.equal(getattr(ours, name), getattr(theirs, name))


def test_same_seed_same_losses_and_loss_goes_down(tmp_path):
    overrides = ["trainer.log_every=1", "trainer.max_steps=30", "trainer.max_epochs=10"]
    a = _trainer(tmp_path, "a", *overrides)
    a.fit()
    b = _trainer(tmp_path, "b", *overrides)
    b.fit()
    losses = _losses(tmp_path / "a")
    assert losses == _losses(tmp_path / "b")
    assert sum(list(losses.values())[-5:]) < sum(list(losses.values())[:5])


def test_tensorboard_has_every_tag_at_the_expected_steps(tmp_path):
    trainer = _trainer(tmp_path, "run", "trainer.log_every=5", "trainer.valid_every=10")
    result = trainer.fit()
    assert result.stop_reason == "max_steps"
    acc = _events(tmp_path / "run")
    scalars = set(acc.Tags()["scalars"])
    for tag in ["loss", "ppl", "lr", "grad_norm", "tokens_per_sec"]:
        assert [e.step for e in acc.Scalars(f"train/{tag}")] == [5, 10, 15, 20]
    for tag in ["loss", "ppl", "bleu", "chrf"]:
        assert f"valid/{tag}" in scalars
        assert [e.step for e in acc.Scalars(f"valid/{tag}")] == [10, 20]
    images = acc.Images("alignment/0")
    assert [e.step for e in images] == [10, 20]
    from io import BytesIO

    from PIL import Image

    picture = Image.open(BytesIO(images[0].encoded_image_string))
    assert picture.size[0] > 100 and picture.size[1] > 100
    assert "alignment/1" in acc.Tags()["images"]
    assert (tmp_path / "run" / "checkpoints" / "best.pt").is_file()


def test_checkpoint_is_self_contained(tmp_path):
    trainer = _trainer(tmp_path, "run", "trainer.max_steps=3")
    trainer.fit()
    state = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")
    for key in [
        "model",
        "config",
        "tokenizer",
        "optimizer",
        "scheduler",
        "scaler",
        "step",
        "epoch",
        "rng",
        "sampler",
        "best_metric",
        "versions",
    ]:
        assert key in state, key
    assert state["step"] == 3
    assert state["config"]["model"]["emb_dim"] == 32


def test_nonfinite_loss_is_skipped_and_counted(tmp_path, monkeypatch):
    trainer = _trainer(tmp_path, "run", "trainer.max_steps=6", "trainer.nonfinite=skip")
    real = output_layer_module.token_loss
    calls = {"n": 0}

    def poisoned(logits, targets, smoothing=0.0):
        calls["n"] += 1
        loss = real(logits, targets, smoothing)
        return loss * float("nan") if calls["n"] == 2 else loss

    monkeypatch.setattr(output_layer_module, "token_loss", poisoned)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    result = trainer.fit()
    assert result.progress.skipped_batches == 1
    assert result.progress.step == 6
    for name, weight in trainer.model.state_dict().items():
        assert torch.isfinite(weight).all(), name
    assert any(
        not torch.equal(before[k], v) for k, v in trainer.model.state_dict().items()
    )


def test_nonfinite_loss_can_stop_with_step_named(tmp_path, monkeypatch):
    trainer = _trainer(tmp_path, "run", "trainer.nonfinite=stop")
    monkeypatch.setattr(
        output_layer_module,
        "token_loss",
        lambda logits, t, s=0.0: logits.sum() * float("inf"),
    )
    with pytest.raises(FloatingPointError, match="step 1, epoch 0, batch ids"):
        trainer.fit()


def sigterm_after_step(trainer: Trainer, monkeypatch, step: int) -> None:
    """Send this process SIGTERM during optimizer step ``step + 1``."""
    real_step = trainer.train_step

    def step_then_signal(batches):
        out = real_step(batches)
        if trainer.progress.step == step:
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    monkeypatch.setattr(trainer, "train_step", step_then_signal)


def test_sigterm_finishes_the_step_and_saves_last(tmp_path, monkeypatch):
    trainer = _trainer(tmp_path, "run", "trainer.max_steps=50")
    sigterm_after_step(trainer, monkeypatch, 2)
    result = trainer.fit()
    assert result.stop_reason == "signal"
    assert load_checkpoint(result.last_checkpoint)["step"] == 3


@pytest.mark.parametrize(("valid_beam", "expected"), [("1", 1), ("null", 5)])
def test_validation_decodes_with_valid_beam_size(
    tmp_path, monkeypatch, valid_beam, expected
):
    seen = []
    real = Translator.search

    def spy(translator, split):
        seen.append(translator.decode.beam_size)
        return real(translator, split)

    monkeypatch.setattr(Translator, "search", spy)
    trainer = _trainer(
        tmp_path,
        "run",
        "decode=beam",
        f"trainer.valid_beam_size={valid_beam}",
        "trainer.max_steps=2",
        "trainer.valid_every=null",
    )
    trainer.fit()
    assert seen == [expected]
    assert trainer.cfg.decode.beam_size == 5  # the final scores still use the beam


def test_keep_last_keeps_the_newest_validated_checkpoints_by_step(tmp_path):
    trainer = _trainer(
        tmp_path,
        "run",
        "trainer.valid_every=2",
        "trainer.max_steps=9",
        "trainer.keep_last=2",
    )
    trainer.fit()
    kept = sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("step*.pt"))
    assert kept == ["step00000008.pt", "step00000009.pt"]
    # each holds its own step, although last.pt was rewritten after both
    for name, step in zip(kept, (8, 9), strict=True):
        assert load_checkpoint(tmp_path / "run" / "checkpoints" / name)["step"] == step


def test_bf16_autocast_on_cpu_trains_and_validates_with_fp32_weights(tmp_path):
    """``trainer.precision=bf16`` on CPU: bf16 matmuls, fp32 weights and loss, the
    backward outside autocast."""
    common = [
        "trainer.log_every=1",
        "trainer.max_steps=30",
        "trainer.max_epochs=10",
        "trainer.valid_every=30",
    ]
    fp32 = _trainer(tmp_path, "fp32", *common, "trainer.precision=fp32")
    fp32.fit()
    bf16 = _trainer(tmp_path, "bf16", *common, "trainer.precision=bf16")
    assert bf16.amp_dtype == torch.bfloat16
    # the backward runs outside autocast, each gradient in its forward op's dtype
    in_autocast = []
    weight = bf16.model.decoder.embedding.weight
    weight.register_hook(lambda g: in_autocast.append(torch.is_autocast_enabled("cpu")))
    result = bf16.fit()
    assert in_autocast and not any(in_autocast)
    exact, low = _losses(tmp_path / "fp32"), _losses(tmp_path / "bf16")
    # same seed, weights and first batch: the same loss up to bf16 rounding
    assert low[1] == pytest.approx(exact[1], rel=0.02)
    # (the first loss is close to log V at any precision: look at the run's)
    assert any(low[s] != exact[s] for s in low), "bf16 autocast did not run"
    values = list(low.values())
    assert sum(values[-5:]) < sum(values[:5])
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())
    assert result.best_checkpoint is not None  # validation decoded under autocast too
    assert bf16.progress.best_metric is not None


def test_subword_sampling_refuses_bpe_at_trainer_start(tmp_path):
    with pytest.raises(ValueError, match="a bpe model cannot be sampled"):
        _trainer(
            tmp_path, "bpe", "tokenizer.model_type=bpe", "tokenizer.sampling_alpha=0.1"
        )


def test_validation_decodes_the_weights_as_trained_not_as_first_decoded(tmp_path):
    """Fused Adam (torch's CPU default) updates weights without bumping their
    versions: validation after training steps must still decode the new weights,
    exactly as a fresh copy of the model does."""
    trainer = _trainer(
        tmp_path,
        "run",
        "trainer.max_steps=12",
        "trainer.valid_every=4",
        "optim.lr=0.01",
    )
    trainer.fit()
    split = trainer.data.splits["validation"]
    fresh = Translator(
        copy.deepcopy(trainer.model),
        trainer.data.tokenizer,
        trainer.device,
        trainer.amp_dtype,
        batch_tokens=trainer.translator.batch_tokens,
        decode=trainer.translator.decode,
    )
    assert trainer.translator.detokenize(
        trainer.translator.hypotheses(split)
    ) == fresh.detokenize(fresh.hypotheses(split))


def test_resume_refuses_another_model_and_takes_another_budget(tmp_path):
    """A model key that differs from the checkpoint's is named before any weight is
    loaded; ``trainer.max_steps`` may change on a resume."""
    first = _trainer(tmp_path, "run", "trainer.max_steps=2")
    last = first.fit().last_checkpoint
    longer = _trainer(tmp_path, "longer", "trainer.max_steps=4")
    longer.resume(last)
    assert longer.progress.step == 2
    wider = _trainer(tmp_path, "wider", "model.decoder.hidden_size=32")
    with pytest.raises(CheckpointError) as info:
        wider.resume(last)
    assert "model.decoder.hidden_size=64 there, 32 here" in str(info.value)
    assert "trainer.resume=false" in str(info.value)
