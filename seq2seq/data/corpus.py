"""Load parallel corpora into a ``DatasetDict`` with splits train/validation/test.

Sources (``DataConfig.name``):

- ``phrasebook``: the built-in English–French corpus with gold alignments, either
  direction (``data.src_lang=fr data.tgt_lang=en`` transposes the links).
- ``multi30k``: ``data.local_dir`` (``{train,validation,test}.jsonl`` with one key per
  language) or, when it is unset, the Hugging Face dataset ``data.hub_id`` (default
  ``bentrevett/multi30k``) through ``datasets.load_dataset`` (``data/hub.py``: one
  quick probe first, so an offline machine hears at once). ``hub_id`` may also be a
  local folder in the hub's layout (``train.jsonl``, ``val.jsonl``, ``test.jsonl``); it
  goes through the same ``load_dataset`` call.
- ``local``: ``data.local_dir`` holding either ``<split>.jsonl|tsv|csv`` files with one
  column per language, or parallel plain text ``<split>.<lang>`` (optionally ``.gz``).
  Split names accept the aliases ``val``/``valid``/``dev`` for validation and a suffixed
  name such as ``test_2016_flickr`` when it is the only candidate.

``data.alignments.<split>=FILE`` attaches word links to a split (``links_file.py``),
replacing the corpus's own.

Pairs with an empty side are dropped in every split, counted and logged (an empty
reference cannot be scored). Everything else is kept; length filtering happens in
``prepare``.
"""

from __future__ import annotations

import csv
import gzip
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from datasets import Dataset, DatasetDict

from seq2seq.config import Corpus, DataConfig
from seq2seq.data.links_file import read_links_file
from seq2seq.errors import UserError

log = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")
SPLIT_ALIASES = {
    "train": ("train",),
    "validation": ("validation", "valid", "val", "dev"),
    "test": ("test",),
}
DEFAULT_HUB_ID = "bentrevett/multi30k"
_TABLE = re.compile(r"^(?P<stem>.+)\.(?P<ext>jsonl|tsv|csv)$")
_TEXT = re.compile(
    r"^(?P<stem>.+?)\.(?P<lang>[A-Za-z]{2,3}(?:[_-][A-Za-z0-9]+)?)(?:\.gz)?$"
)


class CorpusError(UserError, ValueError):
    """A corpus that cannot be read as asked: names the file and what was expected."""


@dataclass
class LoadedCorpus:
    """The corpus and, per split, how many pairs were filtered and why."""

    splits: DatasetDict
    filtered: dict[str, dict[str, int]] = field(default_factory=dict)


def read_corpus(cfg: DataConfig, links_for: Sequence[str] = SPLITS) -> LoadedCorpus:
    """The corpus named by ``cfg`` as ``DatasetDict(train, validation, test)``, with
    the counts of the pairs filtered on the way. ``data.alignments`` files are read
    for the splits in ``links_for`` only (evaluating the test split does not need
    the training links a checkpoint was trained with)."""
    name = Corpus(cfg.name)
    if name == Corpus.phrasebook:
        columns = _phrasebook(cfg)
    elif name == Corpus.multi30k and cfg.local_dir is None:
        columns = _from_hub(cfg.hub_id or DEFAULT_HUB_ID, cfg.src_lang, cfg.tgt_lang)
    elif cfg.local_dir is None:
        raise CorpusError(f"data.name={name} needs data.local_dir (a folder)")
    else:
        columns = _from_folder(Path(cfg.local_dir), cfg.src_lang, cfg.tgt_lang)
    for split in links_for:  # checkpoints' configs are merged onto the schema
        path = getattr(cfg.alignments, split)
        if path:
            cols = columns[split]
            cols["alignment"] = read_links_file(path, cols["src"], cols["tgt"], split)
    return _to_datasets(columns)


def _phrasebook(cfg: DataConfig) -> dict[str, dict[str, list[str]]]:
    """The built-in corpus in the direction asked for: en→fr as generated, fr→en
    with the sides swapped and the gold links transposed; other languages refused."""
    from seq2seq.data.phrasebook import phrasebook_columns, reverse_columns

    pair = (cfg.src_lang, cfg.tgt_lang)
    if pair not in (("en", "fr"), ("fr", "en")):
        raise CorpusError(
            f"the phrasebook is English–French: data.src_lang={pair[0]} "
            f"data.tgt_lang={pair[1]} is neither en→fr nor fr→en"
        )
    pb = cfg.phrasebook
    columns = phrasebook_columns(
        pb.train_size, pb.validation_size, pb.test_size, pb.seed
    )
    return columns if pair == ("en", "fr") else reverse_columns(columns)


def _to_datasets(columns: dict[str, dict[str, list[str]]]) -> LoadedCorpus:
    splits, filtered = {}, {}
    for split in SPLITS:
        cols = columns[split]
        keep = [
            i
            for i, (s, t) in enumerate(zip(cols["src"], cols["tgt"], strict=True))
            if s and t
        ]
        empty = len(cols["src"]) - len(keep)
        if empty:
            log.warning("%s: filtered %d pairs with an empty side", split, empty)
            cols = {name: [values[i] for i in keep] for name, values in cols.items()}
        filtered[split] = {"empty": empty}
        splits[split] = Dataset.from_dict(cols)
    return LoadedCorpus(DatasetDict(splits), filtered)


def _clean(text: object) -> str:
    return "" if text is None else str(text).strip()


# --- Hugging Face hub -----------------------------------------------------------------
def _from_hub(hub_id: str, src: str, tgt: str) -> dict[str, dict[str, list[str]]]:
    from seq2seq.data.hub import NO_HUB, load_from_hub

    try:
        loaded = load_from_hub(hub_id)
    except (ConnectionError, OSError, FileNotFoundError, ValueError) as err:
        if isinstance(err, CorpusError):
            raise
        raise CorpusError(
            f"could not load the dataset {hub_id!r} from the Hugging Face hub "
            f"({type(err).__name__}: {err}); {NO_HUB}"
        ) from err
    names = {alias: name for name in loaded for alias in _aliases_of(name)}
    columns = {}
    for split in SPLITS:
        if split not in names:
            raise CorpusError(
                f"{hub_id}: no split {split!r}; splits present: {sorted(loaded)}"
            )
        ds = loaded[names[split]]
        columns[split] = _pick(ds.to_dict(), src, tgt, f"{hub_id} [{names[split]}]")
    return columns


def _aliases_of(name: str) -> list[str]:
    return [split for split, aliases in SPLIT_ALIASES.items() if name in aliases] or [
        name
    ]


def _pick(
    table: dict[str, list], src: str, tgt: str, where: str
) -> dict[str, list[str]]:
    """Columns ``src``/``tgt`` from a table of languages (or ``translation``)."""
    if src not in table and tgt not in table and "translation" in table:
        pairs = table["translation"]
        table = {
            lang: [p.get(lang) for p in pairs] for lang in (pairs[0] if pairs else {})
        }
    for lang in (src, tgt):
        if lang not in table:
            raise CorpusError(
                f"{where}: no column for language {lang!r}; "
                f"columns present: {sorted(table)}"
            )
    return {
        "src": [_clean(t) for t in table[src]],
        "tgt": [_clean(t) for t in table[tgt]],
    }


# --- local folders --------------------------------------------------------------------
def _from_folder(folder: Path, src: str, tgt: str) -> dict[str, dict[str, list[str]]]:
    if not folder.is_dir():
        raise CorpusError(f"data.local_dir {folder} is not a folder")
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    tables = {m["stem"]: name for name in names if (m := _TABLE.match(name))}
    texts: dict[str, dict[str, str]] = {}
    for name in names:
        m = _TEXT.match(name)
        if m and not _TABLE.match(name):
            texts.setdefault(m["stem"], {})[m["lang"]] = name
    if not tables and not texts:
        raise CorpusError(
            f"{folder}: found no corpus files; expected <split>.jsonl|tsv|csv or "
            f"<split>.<lang>[.gz] for splits {', '.join(SPLITS)}; "
            f"files present: {names}"
        )
    stems = tables if tables else texts
    columns = {}
    for split in SPLITS:
        stem = _find_split(folder, split, list(stems), names)
        if tables:
            columns[split] = _read_table(folder / tables[stem], src, tgt)
        else:
            columns[split] = _read_parallel(folder, stem, texts[stem], src, tgt)
    return columns


def _find_split(folder: Path, split: str, stems: list[str], names: list[str]) -> str:
    aliases = SPLIT_ALIASES[split]
    exact = [s for s in stems if s in aliases]
    if exact:
        return exact[0]
    suffixed = [s for s in stems if any(re.match(rf"{a}[_.-]", s) for a in aliases)]
    if len(suffixed) == 1:
        return suffixed[0]
    if suffixed:
        raise CorpusError(
            f"{folder}: several files could be split {split!r}: {suffixed}"
        )
    raise CorpusError(
        f"{folder}: missing split {split!r}: expected {split}.jsonl|tsv|csv or "
        f"{split}.<lang>[.gz] (names accepted: {', '.join(aliases)}); "
        f"files present: {names}"
    )


def _read_text(path: Path) -> list[str]:
    """Lines of a UTF-8 (optionally gzipped) file, without line ends."""
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as err:
            raise CorpusError(f"{path}: not a readable gzip file ({err})") from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise CorpusError(f"{path}:{line}: invalid UTF-8 ({err.reason})") from err
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def _read_parallel(
    folder: Path, stem: str, langs: dict[str, str], src: str, tgt: str
) -> dict[str, list[str]]:
    for lang in (src, tgt):
        if lang not in langs:
            raise CorpusError(
                f"{folder}: no file for language {lang!r} of {stem!r}: expected "
                f"{stem}.{lang} or {stem}.{lang}.gz; languages present: {sorted(langs)}"
            )
    src_path, tgt_path = folder / langs[src], folder / langs[tgt]
    src_lines, tgt_lines = _read_text(src_path), _read_text(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise CorpusError(
            f"parallel files differ in length: {src_path} has {len(src_lines)} lines, "
            f"{tgt_path} has {len(tgt_lines)} lines"
        )
    return {
        "src": [_clean(t) for t in src_lines],
        "tgt": [_clean(t) for t in tgt_lines],
    }


def _read_table(path: Path, src: str, tgt: str) -> dict[str, list[str]]:
    lines = _read_text(path)
    if path.suffix == ".jsonl":
        return _read_jsonl(path, lines, src, tgt)
    if path.suffix == ".tsv":
        rows = list(csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))
    else:
        rows = list(csv.reader(lines))
    if not rows:
        raise CorpusError(
            f"{path}: empty file; expected a header row naming the languages"
        )
    header, body = rows[0], rows[1:]
    for lang in (src, tgt):
        if lang not in header:
            raise CorpusError(
                f"{path}: no column for language {lang!r}; columns present: {header}"
            )
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise CorpusError(
                f"{path}:{number}: expected {len(header)} fields ({header}), "
                f"got {len(row)}"
            )
    table = {name: [row[k] for row in body] for k, name in enumerate(header)}
    return _pick(table, src, tgt, str(path))


def _read_jsonl(
    path: Path, lines: list[str], src: str, tgt: str
) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"src": [], "tgt": []}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise CorpusError(f"{path}:{number}: invalid JSON ({err.msg})") from err
        if not isinstance(record, dict):
            raise CorpusError(f"{path}:{number}: expected a JSON object per line")
        for lang, key in ((src, "src"), (tgt, "tgt")):
            if lang not in record:
                raise CorpusError(
                    f"{path}:{number}: no key for language {lang!r}; "
                    f"keys present: {sorted(record)}"
                )
            out[key].append(_clean(record[lang]))
    return out
