"""seq2seq: train, evaluate and see RNN-with-attention translation models.

Packages in reading order (each imports only those before it): ``config`` (with
``errors``, ``disk``, ``config_checks`` and the built-in corpus ``phrasebook``),
``data``, ``model``, ``decoding``, ``alignment``, ``serve``, ``training``, ``cli``;
each package's ``__init__`` maps its modules, and docs/architecture.md gives the
reading order. The Python API is ``seq2seq.Translator``
(``decoding/translator.py``), loaded on first use so that ``import seq2seq.model``
stays light; with it ``alignment/notebook.py``, so that the maps its ``attention``
returns draw themselves in Jupyter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seq2seq.decoding.translator import Translator

__all__ = ["Translator"]


def __getattr__(name: str) -> Any:
    if name == "Translator":
        import seq2seq.alignment.notebook  # noqa: F401 (Jupyter draws its maps)
        from seq2seq.decoding.translator import Translator

        return Translator
    raise AttributeError(f"module 'seq2seq' has no attribute {name!r}")
