"""Host synchronisation points counted on CPU.

On a GPU the host waits for the device wherever a value must come back: ``.item()``,
``.tolist()``, ``.cpu()``, a tensor in an ``if`` or ``int(...)``, ``nonzero``, a
boolean-mask index (a data-dependent shape). On CPU nothing waits, so
``count_host_syncs`` counts the calls instead, at the Python level (a
``TorchFunctionMode`` sees every torch function and tensor method the code calls).

A call counts only on a *device* tensor, which on CPU needs a rule of its own:

- host tensors are the ones passed as ``host`` (a batch as the loader makes it:
  ``host_tensors(batch)``), the results of factories given no ``device`` (or the
  string ``"cpu"``), of ``.cpu()`` / ``.to("cpu")``, and of any call whose tensor
  inputs are all host tensors;
- every other tensor is a device tensor: parameters, buffers, factories given a
  ``device=``, ``.to(<torch.device>)`` of a host tensor (a new view here, so the host
  original stays a host tensor, as it does on a GPU), and any result with a device
  input.

So code that means to copy to the host writes ``.cpu()`` or ``.to("cpu")``, and
``.to(device)`` means the model's device. A copy of a host tensor to the device counts
too unless it is ``non_blocking=True`` (CUDA's blocking copy waits for the stream), as
does ``torch.tensor(..., device=device)``.
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import fields, is_dataclass
from pathlib import Path

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

# Calls that wait for the device whatever their arguments.
SYNCING = frozenset(
    {
        "item",
        "tolist",
        "numpy",
        "cpu",
        "__bool__",
        "__int__",
        "__float__",
        "__complex__",
        "__index__",
        "__array__",
        "__format__",
        "__repr__",
        "__contains__",
        "nonzero",
        "argwhere",
        "masked_select",
        "unique",
        "unique_consecutive",
        "bincount",
        "is_nonzero",
        "equal",
        "allclose",
    }
)
_HERE = Path(__file__).resolve()
_TORCH = Path(torch.__file__).resolve().parent


def _name(func) -> str:
    name = getattr(func, "__name__", None)
    if name == "__get__":  # a property, such as Tensor.shape
        return "__get__"
    return name or str(func)


def _is_cpu(device) -> bool:
    """The target of an explicit copy to the host (``"cpu"`` as a string)."""
    return isinstance(device, str) and device.split(":")[0] == "cpu"


def _to_target(args, kwargs):
    """The device argument of ``Tensor.to(...)``, or None."""
    if "device" in kwargs:
        return kwargs["device"]
    for arg in args[1:]:
        if isinstance(arg, (str, torch.device)):
            return arg
    return None


def _caller() -> str:
    """The first frame outside torch and this file: where the sync was asked for."""
    frame = sys._getframe(2)
    while frame is not None:
        path = Path(frame.f_code.co_filename).resolve()
        if path != _HERE and _TORCH not in path.parents:
            return f"{path.name}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return "?"


class SyncCounter(TorchFunctionMode):
    """The sync points of the calls made while it is active: ``calls`` lists them as
    ``"name at file:line (function)"``, ``count`` how many there were."""

    def __init__(self, host: Iterable[Tensor] = ()) -> None:
        super().__init__()
        self.calls: list[str] = []
        self._host: dict[int, weakref.ref] = {}
        for tensor in host:
            self._mark(tensor)

    @property
    def count(self) -> int:
        return len(self.calls)

    def by_site(self) -> Counter:
        """How many sync points each call site made."""
        return Counter(self.calls)

    def is_host(self, tensor: Tensor) -> bool:
        ref = self._host.get(id(tensor))
        return ref is not None and ref() is tensor

    def _mark(self, tensor: Tensor) -> None:
        self._host[id(tensor)] = weakref.ref(tensor)

    def _unmark(self, tensor: Tensor) -> None:
        self._host.pop(id(tensor), None)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _name(func)
        if name == "__get__":
            return func(*args, **kwargs)
        inputs = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, Tensor)]
        on_device = any(not self.is_host(x) for x in inputs)
        if (on_device and self._syncs(name, args, kwargs)) or (
            not on_device and self._blocking_upload(name, args, kwargs)
        ):
            self.calls.append(f"{name} at {_caller()}")
        out = func(*args, **kwargs)
        return self._tag(name, args, kwargs, inputs, on_device, out)

    def _blocking_upload(self, name: str, args, kwargs) -> bool:
        """A copy from the host to the device that waits for it to finish (CUDA's
        ``copy_`` without ``non_blocking`` synchronises the stream)."""
        if name in ("to", "cuda"):
            target = "cuda" if name == "cuda" else _to_target(args, kwargs)
            moves = target is not None and not _is_cpu(target)
            return moves and not kwargs.get("non_blocking", False)
        if name in ("tensor", "as_tensor"):
            device = kwargs.get("device")
            return device is not None and not _is_cpu(device)
        return False

    def _syncs(self, name: str, args, kwargs) -> bool:
        if name in SYNCING:
            return True
        if name == "to":
            return _is_cpu(_to_target(args, kwargs))
        if name == "where":  # torch.where(condition) is nonzero
            return len(args) + len(kwargs) == 1
        if name == "repeat_interleave":  # tensor repeats: the output size is data
            repeats = args[1] if len(args) > 1 else kwargs.get("repeats")
            return isinstance(repeats, Tensor) and kwargs.get("output_size") is None
        if name in ("__getitem__", "__setitem__", "index_put_", "index_put"):
            index = args[1] if len(args) > 1 else kwargs.get("indices")
            flat = tree_flatten(index)[0]
            return any(isinstance(i, Tensor) and i.dtype == torch.bool for i in flat)
        return False

    def _tag(self, name, args, kwargs, inputs, on_device, out):
        outputs = [x for x in tree_flatten(out)[0] if isinstance(x, Tensor)]
        if name in ("cpu", "pin_memory") or (
            name == "to" and _is_cpu(_to_target(args, kwargs))
        ):
            host = True
        elif name in ("to", "cuda") and (
            name == "cuda" or _to_target(args, kwargs) is not None
        ):
            if not on_device and out is args[0]:  # a host tensor "moved": a new one
                out = out.view_as(out)
                outputs = [out]
            host = False
        elif name == "_pack_padded_sequence":  # batch sizes: on the host, always
            self._mark(out[1])
            outputs, host = [out[0]], not on_device
        elif inputs:
            host = not on_device
        else:  # a factory: a host tensor unless given a device
            device = kwargs.get("device")
            host = device is None or _is_cpu(device)
        for tensor in outputs:
            if host:
                self._mark(tensor)
            else:
                self._unmark(tensor)
        return out


def host_tensors(*objects) -> list[Tensor]:
    """The tensors of ``objects`` (tensors, or dataclasses such as a ``Batch`` as the
    loader makes it): what lives on the host before the code moves it."""
    found = []
    for obj in objects:
        if isinstance(obj, Tensor):
            found.append(obj)
        elif is_dataclass(obj):
            found.extend(
                value
                for value in (getattr(obj, f.name) for f in fields(obj))
                if isinstance(value, Tensor)
            )
    return found


@contextlib.contextmanager
def count_host_syncs(host: Iterable[Tensor] = ()) -> Iterator[SyncCounter]:
    """Count the host sync points of the code run inside; ``host`` the tensors that
    live on the host on purpose (see the module docstring)."""
    counter = SyncCounter(host)
    with counter:
        yield counter
