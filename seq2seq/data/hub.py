"""The Hugging Face hub as a corpus source, quick to say when it is out of reach.

Without a network, ``datasets.load_dataset`` retries for about 23 s before failing.
``load_from_hub`` first asks the hub once, with a short timeout; when it does not
answer, it says so at once and looks only in the local Hugging Face cache (offline
mode), so a cached copy still loads and a missing one fails in a second, naming
``data.local_dir`` as the way around the hub.
"""

from __future__ import annotations

import logging
import os
import urllib.error
import urllib.request
from pathlib import Path

from datasets import DatasetDict

from seq2seq.data.corpus import CorpusError

log = logging.getLogger(__name__)

HUB_PROBE_SECONDS = 3.0
NO_HUB = (
    "set data.local_dir to a folder with train/validation/test .jsonl files "
    "(e.g. ../shared/data/multi30k) to read the corpus without the hub"
)


def hub_unreachable(hub_id: str) -> str | None:
    """Why the hub cannot be reached (one line), or None when it answers or is not
    needed (offline mode, a local folder). One request of a few seconds at most:
    ``datasets`` would retry for about 23 s before saying the same."""
    import datasets

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


def load_from_hub(hub_id: str) -> DatasetDict:
    """``datasets.load_dataset(hub_id)``; without a hub, from the local Hugging Face
    cache only (``HF_HUB_OFFLINE``), at once."""
    import datasets

    reason = hub_unreachable(hub_id)
    if reason is None:
        return datasets.load_dataset(hub_id)
    log.warning(
        "the Hugging Face hub is unreachable (%s): looking for %s in the local cache "
        "only; data.local_dir=DIR reads a folder instead",
        reason,
        hub_id,
    )
    offline = datasets.config.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = True
    try:
        return datasets.load_dataset(hub_id)
    except (ConnectionError, OSError, ValueError) as err:
        raise CorpusError(
            f"could not load the dataset {hub_id!r}: the Hugging Face hub is "
            f"unreachable ({reason}) and it is not in the local cache; {NO_HUB}"
        ) from err
    finally:
        datasets.config.HF_HUB_OFFLINE = offline
