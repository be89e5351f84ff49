"""torch.compile of the recurrent steps (``trainer.compile``): one compiled function
per step function and mode, shared by every module that steps it.

The step functions themselves live beside their modules (``decoder.py``'s loop body,
``deep_gru.deep_step``, ``deep_gru_loop``'s forward and backward steps); each is a
plain function of tensors with every projection that does not depend on the previous
state hoisted out of the time loop by its caller, so what is compiled is a step's
recurrent matmul and its element-wise work.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.fx.experimental._config

_COMPILED: dict[tuple[Callable, str], Callable] = {}
# Graphs per compiled function: a step function meets a few variants in one run
# (with and without gradients or masks, one or two directions, batches of one in
# search), more than torch's default 8, past which it would fall back to eager
RECOMPILE_LIMIT = 32


def compiled(fn: Callable, mode: str = "default") -> Callable:
    """``torch.compile`` of ``fn`` with dynamic shapes, made once per process and mode.

    The batch size and the source length change from batch to batch (token
    buckets): dynamic shapes let one graph serve them all instead of recompiling
    per shape. Compiling the plain function, not a bound method, keeps the module
    free of compiled state (it copies, pickles and saves as usual). ``mode`` is
    torch.compile's: ``"default"`` or ``"reduce-overhead"`` (CUDA graphs on CUDA, one
    recorded per distinct shape; on CPU it runs as ``"default"``)."""
    if (fn, mode) not in _COMPILED:
        dynamo = torch._dynamo.config
        dynamo.recompile_limit = max(dynamo.recompile_limit, RECOMPILE_LIMIT)
        # no guard that two sizes are equal because they were in the first batch
        # (a time step's offset and the batch size): it would compile again later
        torch.fx.experimental._config.use_duck_shape = False
        _COMPILED[fn, mode] = torch.compile(fn, dynamic=True, mode=mode)
    return _COMPILED[fn, mode]
