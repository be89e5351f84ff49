"""Hugging Face hub datasets as a corpus source, quick to say when the hub is out of
reach.

``data.hub_id`` with its configuration ``data.hub_config`` (``wmt14`` / ``de-en``:
a ``translation`` column, newstest2013 as ``validation``, newstest2014 as ``test``;
``iwslt2017`` / ``iwslt2017-en-de``), or a dataset with one column per language
(``bentrevett/multi30k``). A local folder in the hub's layout goes through the same
``load_dataset`` call. The hub's tables are Arrow files in its cache, memory-mapped:
nothing is copied into Python lists. A split's fingerprint is the dataset's own
(``Dataset._fingerprint``, which ``datasets`` derives from the files it read).

Without a network, ``datasets.load_dataset`` retries for about 23 s before failing:
the hub is first asked once, with a short timeout; when it does not answer, only the
local Hugging Face cache is searched (offline mode), so a cached copy still loads and
a missing one fails in a second (the command then names a local folder as the way
around the hub).
"""

from __future__ import annotations

import logging
import os
import urllib.error
import urllib.request
from pathlib import Path

import datasets
from datasets import Dataset, DatasetDict

from seq2seq.data.columns import aliases_of, named_split, pick_columns
from seq2seq.disk import refusal
from seq2seq.errors import HubError, SplitChoiceError

log = logging.getLogger(__name__)

HUB_PROBE_SECONDS = 3.0


class HubSource:
    """One hub dataset (and configuration); its splits are loaded once, lazily."""

    def __init__(
        self,
        hub_id: str,
        hub_config: str | None,
        names: dict[str, str | None],
        src: str,
        tgt: str,
    ) -> None:
        self.hub_id, self.hub_config, self.names = hub_id, hub_config, names
        self.src, self.tgt = src, tgt
        self._loaded: DatasetDict | None = None

    @property
    def label(self) -> str:
        return self.hub_id + (f" ({self.hub_config})" if self.hub_config else "")

    def _split(self, split: str) -> tuple[Dataset, str]:
        if self._loaded is None:
            self._loaded = load_from_hub(self.hub_id, self.hub_config)
        loaded = self._loaded
        asked = self.names.get(split)
        if asked is not None:
            return loaded[named_split(self.label, split, asked, list(loaded))], asked
        names = {alias: name for name in loaded for alias in aliases_of(name)}
        if split not in names:
            raise SplitChoiceError(
                f"{self.label}: no split {split!r}; splits present: {sorted(loaded)}",
                split,
            )
        return loaded[names[split]], names[split]

    def fingerprint(self, split: str) -> str:
        ds, name = self._split(split)
        return f"hub {self.hub_id} {self.hub_config} {name} {ds._fingerprint}"

    def raw(self, split: str, work_dir: Path) -> tuple[Dataset, str]:
        ds, name = self._split(split)
        return ds, f"{self.label} [{name}]"

    def pick(self, ds: Dataset, where: str, work_dir: Path) -> Dataset:
        return pick_columns(
            ds, self.src, self.tgt, where, work_dir, extra=("alignment",)
        )


def hub_unreachable(hub_id: str) -> str | None:
    """Why the hub cannot be reached (one line), or None when it answers or is not
    needed (offline mode, a local folder). One request of a few seconds at most:
    ``datasets`` would retry for about 23 s before saying the same."""
    if datasets.config.HF_HUB_OFFLINE or Path(hub_id).exists():
        return None
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    request = urllib.request.Request(f"{endpoint}/api/datasets/{hub_id}", method="HEAD")
    try:
        urllib.request.urlopen(request, timeout=HUB_PROBE_SECONDS).close()
    except urllib.error.HTTPError:
        return None  # the hub answered (not found, gated): load_dataset says what
    except OSError as err:  # no network, no name resolution, a timeout
        return str(getattr(err, "reason", err))
    return None


def load_from_hub(hub_id: str, hub_config: str | None = None) -> DatasetDict:
    """``datasets.load_dataset(hub_id, hub_config)``; without a hub, from the local
    Hugging Face cache only (``HF_HUB_OFFLINE``), at once."""
    reason = hub_unreachable(hub_id)
    if reason is None:
        return _load(hub_id, hub_config, None)
    log.warning(
        "the Hugging Face hub is unreachable (%s): looking for %s in the local cache "
        "only",
        reason,
        hub_id,
    )
    offline = datasets.config.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = True
    try:
        return _load(hub_id, hub_config, reason)
    finally:
        datasets.config.HF_HUB_OFFLINE = offline


def _load(hub_id: str, hub_config: str | None, unreachable: str | None) -> DatasetDict:
    try:
        return datasets.load_dataset(hub_id, hub_config)
    except (ConnectionError, OSError, ValueError) as err:
        if refusal(err) is not None:
            raise  # a full disk under the Hugging Face cache, not the hub
        if unreachable is not None:
            raise HubError(
                f"could not load the dataset {hub_id!r}: the Hugging Face hub is "
                f"unreachable ({unreachable}) and it is not in the local cache"
            ) from err
        raise HubError(
            f"could not load the dataset {hub_id!r}"
            f"{f' (configuration {hub_config!r})' if hub_config else ''} from the "
            f"Hugging Face hub ({type(err).__name__}: {err})"
        ) from err
