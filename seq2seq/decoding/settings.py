"""The settings a search runs with: ``decode_settings`` (typed, merged and checked)
and the maximum output length, ``⌊a·|src| + b⌋`` per sentence (``max_lengths``,
``output_limits``), with ``a`` fitted on the training pairs (``fit_max_len_a``).

They live apart from the searches (``search.py``) because the trainer, the pipeline and
the ``Translator`` make and fit settings without running a search.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from omegaconf import OmegaConf
from torch import Tensor

from seq2seq.config import DecodeConfig
from seq2seq.config_checks import check_decode

# ``decode.max_len_a`` where it was not fitted on training pairs (None: an API user's
# own Translator); ``decode.max_len_b``'s default.
DEFAULT_MAX_LEN_A = 1.5
DEFAULT_MAX_LEN_B = 5


def max_lengths(src_lengths: Tensor, a: float, b: float) -> Tensor:
    """Maximum output length per sentence (tokens incl. EOS): ``⌊a·|src| + b⌋ ≥ 1``,
    where ``|src|`` counts the source pieces and their EOS."""
    # (the epsilon keeps float rounding, 0.29 · 100 = 28.99…, from losing a token)
    return (a * src_lengths.double() + b + 1e-9).floor().long().clamp(min=1)


def output_limits(src_lengths: Tensor, settings: DecodeConfig) -> Tensor:
    """``max_lengths`` with the settings' ``max_len_a`` (None reads as
    ``DEFAULT_MAX_LEN_A``) and ``max_len_b``."""
    a = DEFAULT_MAX_LEN_A if settings.max_len_a is None else settings.max_len_a
    return max_lengths(src_lengths, a, settings.max_len_b)


def decode_settings(base: Any = None, **overrides: Any) -> DecodeConfig:
    """``DecodeConfig`` from ``base`` (a checkpoint's ``decode``, say) with the
    overrides that are not None on top; typed and checked (``check_decode``), so a
    bad value (``beam_size=0``, ``n_best`` above the beam) fails here."""
    cfg = OmegaConf.structured(DecodeConfig)
    if base is not None:
        cfg = OmegaConf.merge(cfg, base)
    for key, value in overrides.items():
        if value is not None:
            cfg[key] = value
    check_decode(cfg)
    return cfg  # a DictConfig typed as the dataclass


def fit_max_len_a(
    src_lengths: Sequence[int], tgt_lengths: Sequence[int], b: int, coverage: float
) -> float:
    """The smallest ``a`` (in hundredths) whose limit ``⌊a·|src| + b⌋`` is at least
    the target length of ``coverage`` of the pairs (lengths as ``max_lengths`` counts
    them: pieces plus EOS on both sides). The exact stop rule searches until no live
    hypothesis could beat the finished ones at any length up to the limit, so a limit
    fitted to the language pair (French runs longer than English) ends it sooner than
    one generous enough for every pair."""
    src = np.asarray(src_lengths, dtype=np.float64)
    tgt = np.asarray(tgt_lengths, dtype=np.float64)
    if len(src) == 0 or src.shape != tgt.shape:
        raise ValueError("fit_max_len_a needs one target length per source length")
    needed = (tgt - b) / src  # numpy, not a list: a WMT training split has millions
    k = max(math.ceil(coverage * len(needed)) - 1, 0)  # the k+1 smallest fit
    kth = float(np.partition(needed, k)[k])
    return max(math.ceil(round(kth * 100, 6)) / 100, 0.0)
