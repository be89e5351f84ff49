"""``trainer.compile``: the decoder's step loop through torch.compile (inductor, CPU).

The compiled body must compute what the eager one does, in value and gradient, and
one compilation must serve every batch shape (token buckets vary the batch size and
the source length from batch to batch)."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from seq2seq.data.tokenizer import BOS_ID, PAD_ID
from seq2seq.model.seq2seq import build_model
from seq2seq.training import runtime
from seq2seq.training.runtime import check_compile_toolchain
from tests.helpers import build_trainer, tiny_train_config
from tests.test_decoder import V_SRC, V_TGT, tiny_config


def _batch(b: int, s: int, t: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, s + 1, (b,), generator=gen)
    lengths[0] = s
    mask = torch.arange(s)[None] < lengths[:, None]
    src = torch.randint(4, V_SRC, (b, s), generator=gen).masked_fill(~mask, PAD_ID)
    tgt_in = torch.randint(4, V_TGT, (b, t), generator=gen)
    tgt_in[:, 0] = BOS_ID
    return src, lengths, mask, tgt_in


def _logits_and_grads(model, batch):
    out = model(*batch)
    params = [p for p in model.parameters() if p.requires_grad]
    return out.logits, torch.autograd.grad(out.logits.square().sum(), params)


@pytest.mark.parametrize(
    ("attention", "style"), [("bahdanau", None), ("luong_general", None)]
)
def test_compiled_step_loop_equals_eager_for_every_batch_shape(attention, style):
    torch.manual_seed(0)
    model = build_model(tiny_config(attention, style, feeding=True), V_SRC, V_TGT)
    model.eval()  # no dropout: inductor draws other random numbers than eager
    assert model.decoder.has_step_loop
    # Real batches have B·S > 32 (below it inductor picks another matmul kernel), and
    # B, S differ from the model's sizes (4, 6, 8, 24 here): a size equal to a fixed
    # one shares its symbol and would be specialised (torch's "duck sizing").
    batches = [_batch(9, 5, 4, seed=0), _batch(11, 7, 3, seed=1), _batch(13, 10, 5, 2)]
    for i, batch in enumerate(batches):
        model.decoder.compile_loop = False
        ref_logits, ref_grads = _logits_and_grads(model, batch)
        model.decoder.compile_loop = True
        # After the first batch, no shape may trigger a new compilation.
        with torch._dynamo.config.patch(error_on_recompile=i > 0):
            logits, grads = _logits_and_grads(model, batch)
        assert_close(logits, ref_logits, rtol=1e-4, atol=1e-5)
        for g, r in zip(grads, ref_grads, strict=True):
            assert_close(g, r, rtol=1e-4, atol=1e-5)


def test_trainer_compile_flag_trains(tmp_path):
    cfg = tiny_train_config(
        tmp_path / "cache",
        "trainer.compile=true",
        "trainer.max_steps=3",
        "trainer.valid_every=null",
        "trainer.log_every=1",
    )
    trainer = build_trainer(cfg, tmp_path / "run")
    assert trainer.model.decoder.compile_loop
    result = trainer.fit()
    assert result.progress.step == 3
    assert result.last_checkpoint.is_file()


def test_compile_without_a_cxx_compiler_fails_at_start(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(runtime.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="needs a C\\+\\+ compiler"):
        check_compile_toolchain(torch.device("cpu"))


def test_compile_on_cuda_without_triton_fails_at_start(monkeypatch):
    monkeypatch.setattr(runtime, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match="needs Triton"):
        check_compile_toolchain(torch.device("cuda"))
