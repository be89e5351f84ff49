"""What a checkpoint's pickle may hold, checked before a save and scanned after a
refused load.

``torch.load(..., weights_only=True)`` accepts tensors, plain containers, numbers,
strings and bytes, and refuses any other global without running it. Before writing,
``check_weights_only_safe`` names the first value it would refuse (so a bad value fails
at save time, not as an unloadable file); after a refusal, ``unsafe_globals`` tells an
unsafe file (one whose pickle would import code, such as ``posix.system``) from a
truncated one, reading the pickle's opcodes without executing any.
"""

from __future__ import annotations

import pickletools
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch

_LEAVES = (str, bytes, int, float, bool, type(None), torch.dtype, torch.device)
_CONTAINERS = (dict, OrderedDict, list, tuple, set, torch.Size)


def check_weights_only_safe(obj: Any, where: str = "state") -> None:
    """Raise ``TypeError`` naming the first value ``weights_only`` loading would refuse.

    Checked before writing, so a bad value (a NumPy scalar, a ``Path``, an object)
    fails at save time instead of making an unloadable checkpoint.
    """
    if isinstance(obj, torch.Tensor) or type(obj) in _LEAVES:
        return
    if type(obj) not in _CONTAINERS:
        raise TypeError(
            f"{where} is a {type(obj).__module__}.{type(obj).__qualname__}, which "
            "torch.load(weights_only=True) refuses; store plain values or tensors"
        )
    if isinstance(obj, dict):
        for key, value in obj.items():
            check_weights_only_safe(key, f"a key of {where}")
            check_weights_only_safe(value, f"{where}[{key!r}]")
    else:
        for k, value in enumerate(obj):
            check_weights_only_safe(value, f"{where}[{k}]")


def unsafe_globals(path: Path) -> list[str]:
    """The ``module.name`` globals the file's pickle would import and that safe
    loading refuses, found without running anything: torch's own scan for its zip
    files; for a bare pickle (not our format), pickletools' reading of its opcodes
    (only a complete pickle counts, so a text file is not taken for one)."""
    if zipfile.is_zipfile(path):
        try:
            return list(torch.serialization.get_unsafe_globals_in_checkpoint(path))
        except Exception:  # an unreadable archive: truncated, not unsafe
            return []
    found = _pickle_globals(path.read_bytes())
    return [name for name in found if name.split(".")[0] not in _TORCH_MODULES]


def _pickle_globals(data: bytes) -> list[str]:
    """The globals of the complete pickles at the start of ``data`` (a legacy
    ``torch.save`` file is several pickles, then raw storage bytes)."""
    found: list[str] = []
    start = 0
    while start < len(data):
        try:
            ops = list(pickletools.genops(data[start:]))
        except Exception:  # genops stops with an error where the bytes are no pickle
            break
        strings: list[str] = []
        for opcode, arg, _ in ops:
            if opcode.name in ("GLOBAL", "INST"):
                found.append(str(arg).replace(" ", "."))
            elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
                found.append(f"{strings[-2]}.{strings[-1]}")
            elif isinstance(arg, str):
                strings.append(arg)
        start += ops[-1][2] + 1  # just past this pickle's STOP
    return found


_TORCH_MODULES = ("torch", "collections")  # a legacy torch.save file's globals
