"""Host sync points, counted on CPU (``tests/syncs.py``): what a training step, a
search and a validation pass may ask of the device, as exact counts, so a new one
fails here.

- a training step: ``TRAIN_STEP_SYNCS``, the non-finite guard (a skipped batch must
  never reach the weights, so the host reads ``isfinite`` before the optimizer step);
  the loop adds ``LOG_SYNCS`` every ``trainer.log_every`` steps;
- a search: one ``nonzero`` every ``check_every`` steps ("who is still searching?"),
  none in the steps between, and ``GREEDY_TAIL`` / ``BEAM_TAIL`` copies of the
  results to the host at the end;
- validation: the loss one copy per split, forced attention one per batch.
"""

from __future__ import annotations

import copy
import time

import pytest
import torch
from torch.testing import assert_close

import seq2seq.decoding.search as search_module
import seq2seq.decoding.translator as translator_module
from seq2seq.decoding.search import beam_search, greedy_search, run_step
from seq2seq.decoding.settings import decode_settings, output_limits
from seq2seq.training.runtime import StopRequested
from tests.helpers import build_trainer, tiny_train_config
from tests.syncs import count_host_syncs, host_tensors

TRAIN_STEP_SYNCS = 1  # the non-finite guard
LOG_SYNCS = 1  # the logged window's values, every trainer.log_every steps
GREEDY_TAIL = 3  # lengths and tokens, scores, attention
BEAM_TAIL = 4  # tokens and parents, attention; scores, steps and beams


def test_counter_counts_a_planted_item_in_a_loop():
    weights = torch.randn(4)  # made outside: a device tensor, as a parameter is
    with count_host_syncs() as syncs:
        total = torch.zeros((), device=weights.device)
        for _ in range(5):
            total = total + weights.sum()
            total.item()  # planted
    assert syncs.count == 5, syncs.calls
    assert all(call.startswith("item at test_syncs.py") for call in syncs.calls)


def test_counter_tells_host_tensors_from_device_tensors():
    lengths = torch.tensor([3, 2])  # a batch's CPU lengths
    with count_host_syncs(host=[lengths]) as syncs:
        lengths.tolist()  # host: free
        int(lengths.max())
        ids = torch.arange(3)  # a factory without a device: host
        ids.tolist()
        moved = lengths.to(torch.device("cpu"), non_blocking=True)  # "the device"
        assert syncs.count == 0, syncs.calls
        if moved.sum() > 0:  # a tensor in an if
            pass
        moved.nonzero()
        moved[moved > 2]  # a data-dependent shape
        moved.cpu()
        lengths.to(torch.device("cpu"))  # a blocking upload
    names = [call.split(" ")[0] for call in syncs.calls]
    assert names == ["__bool__", "nonzero", "__getitem__", "cpu", "to"]
    assert lengths.tolist() == [3, 2]


CASES = {
    "bahdanau": [],
    "luong_input_feeding": ["model/attention=luong_general"],
    "luong_no_feeding": [
        "model/attention=luong_general",
        "model.decoder.input_feeding=false",
    ],
    "guided_alignment": ["trainer.guided_alignment=1.0"],
    "rdrop": ["trainer.rdrop=0.5"],
    "scheduled_sampling": [
        "trainer.teacher_forcing.schedule=linear",
        "trainer.teacher_forcing.k=1",
        "trainer.teacher_forcing.min_ratio=0.5",
    ],
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("syncs-cache")


@pytest.mark.parametrize("case", CASES)
def test_training_step_syncs_once(case, cache, tmp_path):
    cfg = tiny_train_config(cache, "trainer.accumulate=2", *CASES[case])
    trainer = build_trainer(cfg, tmp_path / "run")
    loader = iter(trainer.loader)
    batches = [next(loader), next(loader)]  # as the loader made them: on the host
    with count_host_syncs(host=host_tensors(*batches)) as syncs:
        stats = trainer.train_step(batches)
    assert stats is not None
    assert syncs.count == TRAIN_STEP_SYNCS, syncs.calls
    assert "(train_step)" in syncs.calls[0]


@pytest.mark.parametrize(
    "extra", [[], ["trainer.rdrop=0.5", "trainer.guided_alignment=1"]]
)
def test_training_loop_syncs_once_a_step_and_once_a_log(extra, cache, tmp_path):
    """Six steps between validations, a log every three: the guard at each step,
    and one copy of the logged window (loss, gradient norm, extra terms) per log."""
    cfg = tiny_train_config(
        cache,
        "trainer.max_steps=6",
        "trainer.log_every=3",
        "trainer.valid_every=100",
        *extra,
    )
    trainer = build_trainer(cfg, tmp_path / "run")
    with count_host_syncs() as syncs, StopRequested() as stop:
        reason = trainer._run_epoch(time.monotonic(), stop)
    assert (reason, trainer.progress.step) == ("max_steps", 6)
    assert syncs.count == 6 * TRAIN_STEP_SYNCS + 2 * LOG_SYNCS, syncs.calls


@pytest.fixture(scope="module")
def trained(cache, tmp_path_factory):
    """A tiny model after a few steps (so it ends some sentences early) and a
    validation batch on the "device"."""
    cfg = tiny_train_config(cache)
    trainer = build_trainer(cfg, tmp_path_factory.mktemp("run"))
    for _, batches in zip(range(30), trainer._micro_batches(), strict=False):
        trainer.train_step(batches)
    return trainer


def _steps_counted(step):
    calls = []

    def counted(*args):
        calls.append(1)
        return step(*args)

    return counted, calls


def _batch(trainer):
    split = trainer.data.splits["validation"]
    loader = translator_module.make_loader(split, 400, shuffle=False, seed=0)
    return next(iter(loader))


def _checks(steps: int, limit: int, every: int) -> int:
    """The "still searching?" checks of a search that ran ``steps`` steps: one after
    every ``every``-th step, none after the last possible one."""
    return min(steps, limit - 1) // every


@pytest.mark.parametrize("every", [1, 4])
def test_greedy_search_syncs_once_every_check(trained, every):
    model, batch = trained.model, _batch(trained)
    settings = decode_settings(beam_size=1, max_len_b=8)
    step, calls = _steps_counted(run_step(model, settings, trained.device))
    with count_host_syncs(host=[batch.src_lengths]) as syncs:
        hyps = greedy_search(
            model, batch.src, batch.src_lengths, batch.src_mask, settings, step, every
        )
    limit = int(output_limits(batch.src_lengths, settings).max())
    assert 0 < max(len(h.tokens) for h in hyps) <= len(calls) <= limit
    expected = _checks(len(calls), limit, every) + GREEDY_TAIL
    assert syncs.count == expected, syncs.calls


@pytest.mark.parametrize("every", [1, 3])
def test_beam_search_syncs_once_every_check(trained, every):
    model, batch = trained.model, _batch(trained)
    settings = decode_settings(beam_size=3, n_best=2, coverage_penalty=0.2)
    step, calls = _steps_counted(run_step(model, settings, trained.device))
    with count_host_syncs(host=[batch.src_lengths]) as syncs:
        beam_search(
            model, batch.src, batch.src_lengths, batch.src_mask, settings, step, every
        )
    limit = int(output_limits(batch.src_lengths, settings).max())
    expected = _checks(len(calls), limit, every) + BEAM_TAIL
    assert syncs.count == expected, syncs.calls


def _same(a, b):
    assert [h.tokens for h in a] == [h.tokens for h in b]
    assert [h.finished for h in a] == [h.finished for h in b]
    assert_close(torch.tensor([h.score for h in a]), torch.tensor([h.score for h in b]))
    for x, y in zip(a, b, strict=True):
        assert_close(x.attention, y.attention)


@pytest.mark.parametrize("every", [2, 5, 100])
def test_greedy_search_is_the_same_whatever_the_check_interval(trained, every):
    """Sentences done between two checks ride along masked: nothing of theirs may
    change (the per-step search, ``every=1``, is what CPU runs)."""
    model, batch = trained.model, _batch(trained)
    args = (model, batch.src, batch.src_lengths, batch.src_mask)
    settings = decode_settings(beam_size=1, max_len_b=8)
    _same(greedy_search(*args, settings, None, every), greedy_search(*args, settings))


@pytest.mark.parametrize(
    "options",
    [
        {"beam_size": 3, "n_best": 3},
        {"beam_size": 4, "n_best": 2, "coverage_penalty": 0.2, "length_penalty": 1.0},
        {"beam_size": 3, "n_best": 1, "stop": "best"},
        # sentences stopped at limits of their own, their pools not full
        {"beam_size": 3, "n_best": 3, "max_len_a": 0.3, "max_len_b": 1},
    ],
)
@pytest.mark.parametrize("every", [2, 7])
def test_beam_search_is_the_same_whatever_the_check_interval(trained, options, every):
    model, batch = trained.model, _batch(trained)
    args = (model, batch.src, batch.src_lengths, batch.src_mask)
    settings = decode_settings(**options)
    ours = beam_search(*args, settings, None, every)
    reference = beam_search(*args, settings, None, 1)
    for mine, theirs in zip(ours, reference, strict=True):
        _same(mine, theirs)


def test_validation_pass_syncs(trained, monkeypatch):
    """The passes of a validation (``training/validation.py``): the loss one copy
    per split, the search its checks and its tail per batch, forced attention one
    copy per batch."""
    translator, split = trained.translator, trained.data.splits["validation"]
    loader = translator_module.make_loader(
        split, translator.batch_tokens, shuffle=False, seed=0
    )
    n_batches = len(loader)
    with count_host_syncs() as syncs:
        translator.loss(split)
    assert syncs.count == 1, syncs.calls
    with count_host_syncs() as syncs:
        translator.forced_attention(split)
    assert syncs.count == n_batches, syncs.calls

    every, runs = 4, []
    monkeypatch.setattr(search_module, "check_interval", lambda device: every)
    real = translator_module.translate_batch

    def spied(model, batch, settings, step, **extra):
        counted, calls = _steps_counted(step)
        out = real(model, batch, settings, counted, **extra)
        limit = int(output_limits(batch.src_lengths, settings).max())
        runs.append((len(calls), limit))
        return out

    monkeypatch.setattr(translator_module, "translate_batch", spied)
    with count_host_syncs() as syncs:
        translator.search(split)
    tail = GREEDY_TAIL if translator.beam_size == 1 else BEAM_TAIL
    expected = sum(_checks(steps, limit, every) + tail for steps, limit in runs)
    assert len(runs) == n_batches
    assert syncs.count == expected, syncs.calls


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_sync_debug_mode_sees_what_the_counter_counts(trained):
    """On a GPU, ``torch.cuda.set_sync_debug_mode("warn")`` warns at each real sync:
    a greedy and a beam search warn exactly as often as the CPU counter counts, and
    their checks every ``CHECK_EVERY`` steps find what checks every step find."""
    device = torch.device("cuda")
    model = copy.deepcopy(trained.model).to(device)
    batch = _batch(trained).pin_memory().to(device, non_blocking=True)
    args = (model, batch.src, batch.src_lengths, batch.src_mask)
    for beam in (1, 3):
        settings = decode_settings(beam_size=beam)
        step = run_step(model, settings, device)
        search = greedy_search if beam == 1 else beam_search
        search(*args, settings, step)  # warm-up: kernels, tables
        with count_host_syncs(host=[batch.src_lengths]) as syncs:
            ours = search(*args, settings, step)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with pytest.warns(UserWarning) as warned:
                search(*args, settings, step)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        synced = [str(w.message) for w in warned if "synchroniz" in str(w.message)]
        assert len(synced) == syncs.count, (syncs.calls, synced)
        every_step = search(*args, settings, step, 1)
        if beam == 1:
            _same(ours, every_step)
        else:
            for mine, theirs in zip(ours, every_step, strict=True):
                _same(mine, theirs)
