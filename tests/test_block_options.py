"""The options against saturated self-attention heads: attention dropout, layer norm
on queries and keys, blocks started as the identity, the blocks' own learning rate and
warm-up, and each head's attention entropy in TensorBoard."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.testing import assert_close

from seq2seq.cli.train import check_train
from seq2seq.config import (
    DecoderConfig,
    EncoderConfig,
    ModelConfig,
    OptimConfig,
    SchedulerConfig,
    SelfAttentionConfig,
)
from seq2seq.errors import ConfigValueError
from seq2seq.model.self_attention import SelfAttentionBlock
from seq2seq.model.seq2seq import build_model
from seq2seq.training.optim import BudgetCosine, build_optimizer, build_scheduler
from seq2seq.training.validation import head_entropies
from tests.helpers import build_trainer, tiny_train_config
from tests.test_train import _resume_matches_uninterrupted

V = 19


def _model(seed: int = 0, **options):
    sa = SelfAttentionConfig(layers=2, heads=2, ffn=12, **options)
    cfg = ModelConfig(
        emb_dim=6,
        encoder=EncoderConfig(hidden_size=4, layers=1, self_attention=sa),
        decoder=DecoderConfig(hidden_size=8),
    )
    torch.manual_seed(seed)
    return build_model(cfg, V, V)


def _states(seed: int = 3):
    torch.manual_seed(seed)
    x = torch.randn(3, 5, 8)
    mask = torch.arange(5)[None] < torch.tensor([5, 3, 1])[:, None]
    return x, mask


def test_zero_init_out_makes_each_block_the_identity_and_keeps_other_draws():
    plain, identity = _model(), _model(zero_init_out=True)
    x, mask = _states()
    for block in identity.self_attention.blocks:
        y, _ = block(x, mask)
        assert_close(y, x, rtol=0, atol=0)
    y, _ = plain.self_attention.blocks[0](x, mask)
    assert (y - x).abs().max() > 1e-3  # the default block is no identity
    for (name, p), q in zip(
        plain.named_parameters(), identity.parameters(), strict=True
    ):
        if ".blocks." in name and name.split(".")[-2] in ("out", "ffn_out"):
            assert not q.any(), name
        else:  # the same draws: only the zeroed layers differ
            assert torch.equal(p, q), name


def test_qk_norm_bounds_the_scores_where_plain_blocks_saturate():
    x, mask = _states()
    seen = {}

    def scores(block):
        def hook(q, k, v, m):
            seen["scores"] = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
            return torch.zeros_like(q), None

        block.weights_hook = hook
        with torch.no_grad():
            block.qkv.weight.mul_(100.0)  # a query/key projection grown large
            block(x, mask)
        return seen["scores"].abs().max().item()

    torch.manual_seed(0)
    plain = SelfAttentionBlock(8, 2, 12)
    torch.manual_seed(0)
    normed = SelfAttentionBlock(8, 2, 12, qk_norm=True)
    head_dim = 4
    assert scores(plain) > 10 * math.sqrt(head_dim)
    assert scores(normed) <= math.sqrt(head_dim) + 1e-4  # unit gains: |q̂·k̂| ≤ dₕ


def test_attention_dropout_acts_in_training_only():
    x, mask = _states()
    block = SelfAttentionBlock(8, 2, 12, dropout=0.0, attention_dropout=0.5)
    for need_weights in (False, True):
        block.train()
        torch.manual_seed(1)
        a, wa = block(x, mask, need_weights)
        b, _ = block(x, mask, need_weights)
        assert (a - b).abs().max() > 1e-4, "training: weights dropped at random"
        block.eval()
        c, wc = block(x, mask, need_weights)
        d, _ = block(x, mask, need_weights)
        assert_close(c, d, rtol=0, atol=0)
        if need_weights:  # the weights shown are the ones before dropout
            assert_close(wa, wc)
    off = SelfAttentionBlock(8, 2, 12, dropout=0.0).train()
    assert_close(off(x, mask)[0], off(x, mask)[0], rtol=0, atol=0)


def test_defaults_keep_the_parameter_names_and_draws():
    plain = _model()
    assert not any("norm_q" in n or "norm_k" in n for n, _ in plain.named_parameters())
    dropped = _model(attention_dropout=0.1)
    assert plain.state_dict().keys() == dropped.state_dict().keys()
    for (n, p), q in zip(
        plain.state_dict().items(), dropped.state_dict().values(), strict=True
    ):
        assert torch.equal(p, q), n
    normed = _model(qk_norm=True)
    extra = set(normed.state_dict()) - set(plain.state_dict())
    assert extra == {
        f"self_attention.blocks.{i}.norm_{s}.{w}"
        for i in range(2)
        for s in "qk"
        for w in ("weight", "bias")
    }
    assert all(
        normed.state_dict()[k].eq(1 if "weight" in k else 0).all() for k in extra
    )


def test_the_blocks_get_their_own_group_rate_and_ramp():
    model = _model()
    plain = build_optimizer(OptimConfig(lr=0.01), model)
    assert len(plain.param_groups) == 1
    cfg = replace(
        OptimConfig(lr=0.01), self_attention_lr_scale=0.1, self_attention_warmup_steps=4
    )
    opt = build_optimizer(cfg, model)
    rest, blocks = opt.param_groups
    assert {id(p) for p in blocks["params"]} == {
        id(p) for p in model.self_attention.parameters()
    }
    assert len(rest["params"]) + len(blocks["params"]) == len(list(model.parameters()))
    assert (rest["lr"], blocks["lr"]) == (0.01, pytest.approx(0.001))

    sched, _, _ = build_scheduler(SchedulerConfig(name="constant"), opt, "bleu")
    lrs = []
    for _ in range(6):
        lrs.append([g["lr"] for g in opt.param_groups])
        opt.step()
        sched.step()
    assert [r for r, _ in lrs] == [0.01] * 6
    assert [b for _, b in lrs] == pytest.approx(
        [0.001 * k / 4 for k in (1, 2, 3, 4, 4, 4)]
    )

    opt = build_optimizer(cfg, model)
    budget = BudgetCosine(opt, warmup_steps=0, min_lr=0.0)
    budget.update(step=1, fraction=0.0)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.01, 0.001 * 2 / 4])


def test_block_settings_without_blocks_or_with_a_plateau_are_refused(tmp_path):
    cfg = tiny_train_config(tmp_path, "optim.self_attention_lr_scale=0.5")
    with pytest.raises(ConfigValueError, match="add blocks"):
        check_train(cfg)
    cfg = tiny_train_config(
        tmp_path,
        "model.encoder.self_attention.layers=1",
        "optim.self_attention_warmup_steps=10",
        "scheduler=plateau",
    )
    with pytest.raises(ConfigValueError, match="not plateau"):
        check_train(cfg)


def test_head_entropies_are_zero_for_one_hot_and_log_s_for_uniform_rows():
    one_hot = np.eye(3)[None, None].repeat(2, axis=1)  # (1 layer, 2 heads, 3, 3)
    uniform = np.full((1, 2, 4, 4), 0.25)
    assert_close(
        torch.tensor(head_entropies([one_hot])), torch.zeros(1, 2, dtype=torch.float64)
    )
    both = head_entropies([one_hot, uniform])  # 3 rows at 0, 4 rows at log 4
    assert both == pytest.approx(np.full((1, 2), 4 * math.log(4) / 7))


@pytest.mark.slow
def test_a_run_with_every_option_resumes_exactly_and_logs_entropies(tmp_path):
    options = [
        "model.encoder.self_attention.layers=1",
        "model.encoder.self_attention.heads=2",
        "model.encoder.self_attention.attention_dropout=0.1",
        "model.encoder.self_attention.qk_norm=true",
        "model.encoder.self_attention.zero_init_out=true",
        "optim.self_attention_lr_scale=0.5",
        "optim.self_attention_warmup_steps=10",  # the resume at step 6 is inside it
    ]
    full = _resume_matches_uninterrupted(tmp_path, *options)
    assert len(full.optimizer.param_groups) == 2

    cfg = tiny_train_config(
        tmp_path / "cache",
        *options,
        "trainer.max_steps=2",
        "trainer.log_every=1",
        "trainer.valid_every=2",
        "trainer.valid_max_sentences=8",
        "trainer.alignment_samples=0",
        "evaluate_test=false",
    )
    build_trainer(cfg, tmp_path / "logged").fit()
    acc = EventAccumulator(
        str(tmp_path / "logged" / "tb"), size_guidance={"scalars": 0}
    )
    acc.Reload()
    lrs = [e.value for e in acc.Scalars("train/lr_self_attention")]
    top = cfg.optim.lr * 0.5  # the blocks' rate at the end of their ramp
    assert lrs and all(0 < lr < top for lr in lrs), lrs  # still ramping at step 2
    assert lrs == sorted(set(lrs))
    tags = {t for t in acc.Tags()["scalars"] if "entropy" in t}
    assert tags == {
        "valid/self_attention_entropy/layer0_head0",
        "valid/self_attention_entropy/layer0_head1",
    }
    for tag in tags:
        (event,) = acc.Scalars(tag)
        assert 0 < event.value < math.log(cfg.data.max_len)
    assert OmegaConf.select(cfg, "optim.self_attention_lr_scale") == 0.5
