"""Device and precision choice (``model/device.py``)."""

from __future__ import annotations

import logging
import os

import pytest
import torch

from seq2seq.model import device as device_module
from seq2seq.model.device import auto_precision, resolve_precision


@pytest.mark.parametrize("native", [True, False])
def test_bf16_on_a_cpu_without_native_bf16_warns(native, monkeypatch, caplog):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr(os, "environ", {})  # resolving bf16 sets the cache caps
    cpu = torch.device("cpu")
    with caplog.at_level(logging.WARNING, logger="seq2seq.model.device"):
        assert resolve_precision("bf16", cpu) == torch.bfloat16
    assert ("emulated" in caplog.text) is not native
    with pytest.raises(ValueError, match="fp16 autocast needs CUDA"):
        resolve_precision("fp16", cpu)
    with pytest.raises(
        ValueError,
        match="'half' is not a valid Precision: choose one of auto, fp32, bf16",
    ):
        resolve_precision("half", cpu)


@pytest.mark.parametrize(
    ("amx", "avx512_bf16", "expected", "why"),
    [
        (True, True, torch.bfloat16, "natively (AMX)"),
        (False, True, torch.bfloat16, "natively (AVX512-BF16)"),
        (False, False, None, "neither AMX nor AVX512-BF16"),
    ],
)
def test_auto_is_bf16_where_the_cpu_computes_it_and_says_why(
    amx, avx512_bf16, expected, why, monkeypatch, caplog
):
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr(os, "environ", {})
    cpu = torch.device("cpu")
    with caplog.at_level(logging.INFO, logger="seq2seq.model.device"):
        assert resolve_precision("auto", cpu) == expected
    assert why in caplog.text and "precision=auto" in caplog.text
    assert "emulated" not in caplog.text  # auto never picks an emulated bf16
    assert resolve_precision("fp32", cpu) is None  # the bit-exact choice stays


@pytest.mark.parametrize(
    ("capability", "onednn_cap", "expected"),
    [
        ("AVX512", None, "AMX"),
        ("AVX2", None, None),  # ATEN_CPU_CAPABILITY=avx2: the AVX2-only CPU's choice
        ("DEFAULT", None, None),
        ("AVX512", "AVX512_CORE_BF16", "AVX512-BF16"),
        ("AVX512", "AVX512_CORE", None),
        ("AVX512", "AVX2", None),
        ("AVX512", "ALL", "AMX"),
    ],
)
def test_a_run_capped_below_native_bf16_chooses_as_that_cpu_would(
    capability, onednn_cap, expected, monkeypatch
):
    """On a Xeon with AMX, capping ATen or oneDNN stands for an older CPU, and
    ``precision=auto`` must choose what that CPU would."""
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    env = {} if onednn_cap is None else {"ONEDNN_MAX_CPU_ISA": onednn_cap}
    monkeypatch.setattr(os, "environ", env)
    assert device_module.native_bf16_isa() == expected


def test_auto_is_bf16_on_cuda_whatever_the_cpu(monkeypatch):
    monkeypatch.setattr(device_module, "native_bf16_isa", lambda: None)
    assert auto_precision(torch.device("cuda"))[0].value == "bf16"
    assert auto_precision(torch.device("cpu"))[0].value == "fp32"


def test_bf16_on_cpu_sizes_the_onednn_caches_unless_the_user_set_them(monkeypatch):
    """oneDNN's cache holds a run's bucketed shapes (a smaller one rebuilds kernels
    at every step); ideep's stays capped; a user's own values win."""
    monkeypatch.setattr(os, "environ", {"LRU_CACHE_CAPACITY": "256"})
    resolve_precision("fp32", torch.device("cpu"))
    assert "ONEDNN_PRIMITIVE_CACHE_CAPACITY" not in os.environ
    resolve_precision("bf16", torch.device("cpu"))
    assert int(os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"]) >= 1024
    assert os.environ["LRU_CACHE_CAPACITY"] == "256"
    monkeypatch.setattr(os, "environ", {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64"})
    resolve_precision("bf16", torch.device("cpu"))
    assert os.environ == {
        "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64",
        "LRU_CACHE_CAPACITY": "64",
    }
