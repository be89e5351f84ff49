"""``seq2seq-align``'s job: show where a trained model looked, for a text or a split.

The sentences are decoded (or forced through their references), force-decoded in one
batched pass for their attention maps, then rendered (PNG, HTML, terminal) or
exported (Pharaoh, JSON, npy). With a reverse translator (a model trained the other
way on the same corpus) it writes the two directions' word links combined by
``symmetrize``. Attention weights describe how the model mixed the source states; they
are not a causal explanation of its output.

``attribution=occlusion`` draws occlusion (``alignment/occlusion.py``) where
``attribution=true`` draws gradient × input; ``knockout.words=[...]`` (``heads``,
``self_heads``) decodes and draws the model with those parts knocked out and says how
the log-probability of its own translation changed. ``report=DIR`` writes the corpus
report of a split instead (``alignment/report.py``, ``report_page.py``).

``cli/align.py`` checks the settings, loads the translators and calls ``run_align``;
the settings are its config (``AlignConfig``), read here by key.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from seq2seq.config import AlignFormat, AttentionView
from seq2seq.errors import ConfigValueError, InputError

if TYPE_CHECKING:
    from seq2seq.decoding.translator import Translator

log = logging.getLogger(__name__)

GRADIENT, OCCLUSION = "gradient", "occlusion"
ATTRIBUTIONS = {True: GRADIENT, "true": GRADIENT, GRADIENT: GRADIENT}
ATTRIBUTIONS[OCCLUSION] = OCCLUSION


def attribution_kind(value: Any) -> str | None:
    """``attribution=``'s method: None (false), ``gradient`` (true) or
    ``occlusion``; anything else is a ``ConfigValueError``."""
    if value is None or value is False or value == "false":
        return None
    if isinstance(value, bool | str) and value in ATTRIBUTIONS:
        return ATTRIBUTIONS[value]
    raise ConfigValueError(
        f"attribution={value}: give true (gradient × input), occlusion or false"
    )


def knockout_of(cfg: DictConfig):
    """``knockout.*`` as a ``Knockout``, or None when it knocks nothing out."""
    from seq2seq.decoding.knockout import Knockout

    ko = cfg.knockout
    pairs = tuple((int(x), int(h)) for x, h in ko.self_heads)
    return Knockout(tuple(ko.words), tuple(ko.heads), pairs) or None


def _sentences(cfg: DictConfig, translator):
    """The pairs to show (text or split selection) and a title for each."""
    from seq2seq.data.splits import encode_corpus_split

    if cfg.text is not None:
        refs = [cfg.reference] if cfg.reference is not None else None
        return translator.encode([cfg.text], refs), ["text"]
    full = encode_corpus_split(translator.config.data, translator.tokenizer, cfg.split)
    n = len(full)
    indices = list(range(n)) if cfg.index is None else list(cfg.index)
    bad = [i for i in indices if not 0 <= i < n]
    if bad:
        raise InputError(
            f"index={bad} out of range: split={cfg.split} has {n} pairs, "
            f"so index takes 0 to {n - 1}"
        )
    return full.select(indices), [f"{cfg.split} {i}" for i in indices]


def pairs(cfg: DictConfig, translator):
    """The pairs the user asked for, with their titles and whether their targets are
    the references (forced); otherwise the targets are the model's hypotheses (their
    pieces and detokenized text)."""
    from seq2seq.decoding.maps import forced_split

    split, titles = _sentences(cfg, translator)
    forced = cfg.reference is not None or (cfg.split is not None and cfg.references)
    if not forced:
        kos = _knockouts(cfg, len(split))
        hyps = [hs[0] for hs in translator.search(split, None, kos)]
        split = forced_split(split, [h.tokens for h in hyps])
        split.tgt_text = translator.detokenize(hyps)
    return split, titles, forced


def collect(cfg: DictConfig, translator) -> list:
    """The sentences the user asked for, decoded or forced to their references, as
    attention maps. Gold links are attached only when the references are forced:
    their indices count the reference's words, not a hypothesis's."""
    from seq2seq.alignment.attribution import (
        model_attribution,
        self_attention_attribution,
        spearman,
    )

    split, titles, forced = pairs(cfg, translator)
    kos = _knockouts(cfg, len(split))
    gold = forced and cfg.text is None
    maps = translator.attention_maps(split, titles, gold, knockouts=kos)
    if kos is not None:
        _say_knockout(cfg, translator, split if forced else None, titles)
    kind = attribution_kind(cfg.attribution)
    if kind is None:
        return maps
    if kind == OCCLUSION:  # with one model, gradient × input for the ρ of each pair
        from seq2seq.alignment.occlusion import attach_occlusion
        from seq2seq.model.seq2seq import Seq2Seq

        grads = None
        if isinstance(translator.model, Seq2Seq):
            pairs_ = zip(split.src_ids, split.tgt_ids, strict=True)
            grads = [
                model_attribution(translator, s, t).cpu().numpy() for s, t in pairs_
            ]
        attach_occlusion(translator, split, maps, grads)
        return maps
    on_self = AttentionView(cfg.view) == AttentionView.self
    for att, src, tgt in zip(maps, split.src_ids, split.tgt_ids, strict=True):
        if on_self:  # each head's, drawn by the view (views.self_view)
            attr = self_attention_attribution(translator, src, tgt)
            att.self_attribution = attr.cpu().numpy()
        else:
            att.attribution = model_attribution(translator, src, tgt).cpu().numpy()
            att.spearman = spearman(att.weights, att.attribution)
    return maps


def _knockouts(cfg: DictConfig, n: int) -> list | None:
    ko = knockout_of(cfg)
    return None if ko is None else [ko] * n


def _say_knockout(
    cfg: DictConfig, translator: Translator, forced, titles: list[str]
) -> None:
    """Print, per pair, how the knock-out changed the log-probability of the
    model's own translation (or of the forced reference, ``forced``)."""
    from seq2seq.decoding.maps import forced_split
    from seq2seq.decoding.whatif import log_probabilities

    ko = knockout_of(cfg)
    if forced is None:
        split, _ = _sentences(cfg, translator)
        hyps = translator.hypotheses(split)
        forced = forced_split(split, [h.tokens for h in hyps])
        forced.tgt_text = translator.detokenize(hyps)
    before = log_probabilities(translator, forced)
    after = log_probabilities(translator, forced, [ko] * len(forced))
    what = "reference" if cfg.reference is not None or cfg.references else "original"
    for k, title in enumerate(titles):
        print(
            f"{title}: knocked out {ko.describe()}: log p({what} "
            f"{forced.tgt_text[k]!r}) {before[k]:.3f} -> {after[k]:.3f} "
            f"({after[k] - before[k]:+.3f})"
        )


def symmetrized_lines(cfg: DictConfig, forward, reverse) -> list[str]:
    """One Pharaoh line of word links per pair: the two directions (read at the
    predicting step, or ``shifted``, through ``cfg.two_way``) combined by
    ``cfg.symmetrize``. A pair that either model's pieces do not regroup into its
    words gets an empty line, with a warning."""
    from seq2seq.alignment.twoway import readout_for, two_way_links

    split, titles, _ = pairs(cfg, forward)
    readout = readout_for(cfg.two_way, forward.config.data)
    lines, skipped = [], []
    two_way = two_way_links(forward, reverse, split, cfg.shifted, readout=readout)
    for title, links in zip(titles, two_way, strict=True):
        if links is None:
            skipped.append(title)
            lines.append("")
        else:
            combined = sorted(links.combined(cfg.symmetrize, readout))
            lines.append(" ".join(f"{i}-{j}" for i, j in combined))
    if skipped:
        log.warning(
            "%d pair(s) left empty: one model's pieces are not the text's words "
            "(an <unk> inside a word?): %s",
            len(skipped),
            ", ".join(skipped),
        )
    return lines


def emit(cfg: DictConfig, out_dir: Path, name: str, text: str) -> Path:
    """Write one text file (``output=`` or ``name`` in the run directory), whole or
    not at all."""
    from seq2seq.alignment.export import ELSEWHERE
    from seq2seq.disk import write_atomic

    path = Path(cfg.output) if cfg.output else out_dir / name
    write_atomic(path, text, "the alignments", ELSEWHERE)
    print(f"wrote {path}")
    return path


def run_align(
    cfg: DictConfig, out_dir: Path, translator: Translator, reverse: Translator | None
) -> Path | None:
    """Render or export the attention of the requested sentences (``translator``'s;
    with ``reverse``, the two directions' symmetrized word links)."""
    from seq2seq.alignment import export
    from seq2seq.alignment.maps import CAVEAT
    from seq2seq.alignment.terminal import alignment_terminal
    from seq2seq.alignment.viewer import alignment_html
    from seq2seq.alignment.words import merged

    if cfg.report is not None:  # check_align: split=, one model's attention
        return write_report(cfg, translator)
    if reverse is not None:  # check_align: format=pharaoh words=true
        lines = symmetrized_lines(cfg, translator, reverse)
        return emit(cfg, out_dir, "alignments.txt", "".join(x + "\n" for x in lines))
    items = collect(cfg, translator)
    print(CAVEAT)
    fmt = AlignFormat(cfg.format)
    if cfg.merge_subwords and not (fmt == AlignFormat.pharaoh and cfg.words):
        items = [merged(a) for a in items]  # words=true regroups the pieces itself
    if fmt == AlignFormat.html:  # the page holds every view and switches itself
        say_spearman(items)
        page = alignment_html(items, scale=cfg.scale)
        return emit(cfg, out_dir, "alignments.html", page)
    items = [view_of(cfg, att) for att in items]
    say_spearman(items)
    if fmt == AlignFormat.pharaoh:
        lines = [
            export.pharaoh_line(a, cfg.words, cfg.shifted, cfg.threshold) for a in items
        ]
        return emit(cfg, out_dir, "alignments.txt", "".join(x + "\n" for x in lines))
    if fmt == AlignFormat.terminal:
        for att in items:
            print(att.title)
            tokens = (att.src_tokens, att.tgt_tokens)
            print(alignment_terminal(att.weights, *tokens, scale=cfg.scale))
            if att.attribution is not None:
                print(f"attribution ({att.attribution_method}):")
                print(alignment_terminal(att.attribution, *tokens, scale=cfg.scale))
        return None
    if fmt == AlignFormat.json:
        return emit(cfg, out_dir, "alignments.json", export.json_text(items))
    folder = Path(cfg.output) if cfg.output else out_dir / "alignments"
    if fmt == AlignFormat.png:
        export.write_png(items, folder, scale=cfg.scale)
    else:
        export.write_npy(items, folder)
    print(f"wrote {len(items)} {fmt} file(s) to {folder}")
    return folder


def write_report(cfg: DictConfig, translator: Translator) -> Path:
    """The corpus report of ``split=`` (``index=`` its pairs) in the folder
    ``report=``: ``report.html`` and ``sentences.tsv`` (``alignment/report.py``);
    the attribution is occlusion, or gradient × input with ``attribution=true``."""
    from seq2seq.alignment.export import ELSEWHERE
    from seq2seq.alignment.report import corpus_report
    from seq2seq.alignment.report_page import report_html, report_tsv
    from seq2seq.disk import make_folder, write_atomic

    split, _ = _sentences(cfg, translator)
    indices = None if cfg.index is None else list(cfg.index)
    method = attribution_kind(cfg.attribution) or OCCLUSION
    report = corpus_report(translator, split, str(cfg.split), indices, method)
    folder = Path(cfg.report)
    make_folder(folder, "the report", ELSEWHERE)
    table = write_atomic(
        folder / "sentences.tsv", report_tsv(report), "a table", ELSEWHERE
    )
    page = write_atomic(
        folder / "report.html", report_html(report), "a page", ELSEWHERE
    )
    stages = ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items())
    print(f"wrote {page} and {table} ({len(report.rows)} sentences; {stages})")
    return page


def say_spearman(items) -> None:
    """Each map's Spearman ρ between its weights and its attribution (or
    occlusion), when asked."""
    for att in items:
        if att.spearman is not None:
            rho = att.spearman
            what = OCCLUSION if att.attribution_method == OCCLUSION else "attribution"
            print(f"{att.title}: Spearman rho(attention, {what}) = {rho:.3f}")
        for pair, value in (att.correlations or {}).items():
            if pair != "attention~occlusion":
                shown = "undefined" if value is None else f"{value:.3f}"
                print(f"{att.title}: Spearman rho({pair.replace('~', ', ')}) = {shown}")


def view_of(cfg: DictConfig, att):
    """The map ``view``, ``layer`` and ``head`` ask for (``alignment/views.py``);
    ``layer`` None is the last block, the one the decoder reads."""
    from seq2seq.alignment.views import cross_view, self_view

    if AttentionView(cfg.view) == AttentionView.cross:
        return cross_view(att, cfg.head)
    layer = len(att.self_attention) - 1 if cfg.layer is None else cfg.layer
    return self_view(att, layer, cfg.head)
