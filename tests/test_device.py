"""Device and precision choice (``model/device.py``)."""

from __future__ import annotations

import logging
import os

import pytest
import torch

from seq2seq.model.device import resolve_precision


@pytest.mark.parametrize("native", [True, False])
def test_bf16_on_a_cpu_without_native_bf16_warns(native, monkeypatch, caplog):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.setattr(os, "environ", {})  # resolving bf16 sets the cache caps
    cpu = torch.device("cpu")
    with caplog.at_level(logging.WARNING, logger="seq2seq.model.device"):
        assert resolve_precision("bf16", cpu) == torch.bfloat16
        assert resolve_precision("auto", cpu) is None  # CPU autocast is opt-in
    assert ("emulated" in caplog.text) is not native
    with pytest.raises(ValueError, match="fp16 autocast needs CUDA"):
        resolve_precision("fp16", cpu)
    with pytest.raises(
        ValueError,
        match="'half' is not a valid Precision: choose one of auto, fp32, bf16",
    ):
        resolve_precision("half", cpu)


def test_bf16_on_cpu_caps_the_onednn_caches_unless_the_user_set_them(monkeypatch):
    monkeypatch.setattr(os, "environ", {"LRU_CACHE_CAPACITY": "256"})
    resolve_precision("fp32", torch.device("cpu"))
    assert "ONEDNN_PRIMITIVE_CACHE_CAPACITY" not in os.environ
    resolve_precision("bf16", torch.device("cpu"))
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "64"
    assert os.environ["LRU_CACHE_CAPACITY"] == "256"
