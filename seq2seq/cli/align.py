"""``seq2seq-align``: show where a trained model looked, for a text or a split.

The sentences are decoded (or forced through their references), force-decoded in one
batched pass for their attention maps, then rendered (PNG, HTML, terminal) or
exported (Pharaoh, JSON, npy). Attention weights describe how the model mixed the
source states; they are not a causal explanation of its output.

With ``reverse_checkpoint=B.pt`` (a model trained the other way on the same corpus)
and ``format=pharaoh words=true`` it writes the two directions' word links combined
by ``symmetrize`` (``alignment/symmetrize.py``); other formats show one model's
attention, so ``check_align`` refuses them with a reverse checkpoint.
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from seq2seq.cli.app import command, load_reverse, load_translator, run_dir
from seq2seq.cli.checks import (
    check_decoding_overrides,
    check_reverse_file,
    checkpoint_paths,
)
from seq2seq.config import AlignFormat, AttentionType, AttentionView
from seq2seq.config_checks import (
    FRACTION,
    NON_NEGATIVE,
    check_values,
    require,
    show,
)
from seq2seq.errors import InputError

log = logging.getLogger(__name__)


def check_align(cfg: DictConfig) -> None:
    """Which sentences (``text=`` or ``split=``, not both), and outputs that a
    reverse checkpoint can write."""
    check_decoding_overrides(cfg)
    check_values(cfg, "", {"threshold": FRACTION})
    for key in ("text", "reference"):
        value = cfg[key]
        require(
            value is None or bool(value.strip()),
            f'{key}={show(value)} is empty: give the sentence, {key}="..."',
        )
    require(
        cfg.text is not None or cfg.split is not None,
        'give text="..." or split=NAME (optionally index=[...])',
    )
    require(
        cfg.text is None or cfg.split is None, 'give text="..." or split=NAME, not both'
    )
    require(
        cfg.reference is None or cfg.text is not None,
        "reference= goes with text=; for a split use references=true",
    )
    require(
        cfg.index is None or cfg.split is not None,
        "index= picks pairs of a split: give split=NAME too",
    )
    require(
        not (cfg.attribution and len(checkpoint_paths(cfg.checkpoint)) > 1),
        "attribution=true explains one model: give one checkpoint, not an ensemble",
    )
    negative = [i for i in cfg.index or [] if i < 0]
    require(not negative, f"index={list(cfg.index or [])}: indices count from 0")
    check_reverse_file(cfg)
    _check_two_way_output(cfg)
    _check_view(cfg)


def _check_view(cfg: DictConfig) -> None:
    """What ``view``, ``layer`` and ``head`` can show, before any model is read."""
    check_values(cfg, "", {"layer": NON_NEGATIVE, "head": NON_NEGATIVE})
    if AttentionView(cfg.view) == AttentionView.cross:
        require(
            cfg.layer is None,
            f"layer={cfg.layer} picks a self-attention block: give view=self too",
        )
        return
    require(
        AlignFormat(cfg.format) != AlignFormat.pharaoh,
        "view=self maps the source onto itself; format=pharaoh writes links between "
        "source and target: drop one",
    )
    require(
        not (cfg.attribution and AlignFormat(cfg.format) == AlignFormat.html),
        "view=self attribution=true draws in format=png, terminal, json or npy; the "
        "html page shows the cross-attention's attribution",
    )
    require(
        len(checkpoint_paths(cfg.checkpoint)) == 1,
        "view=self shows one model's self-attention: give one checkpoint, not an "
        "ensemble",
    )


def check_model_view(cfg: DictConfig, model_cfg: DictConfig) -> None:
    """``view``, ``layer`` and ``head`` against the checkpoint's model (its
    ``model`` config): blocks to show, and indices inside them."""
    sa = model_cfg.encoder.self_attention
    if AttentionView(cfg.view) == AttentionView.self:
        require(
            sa.layers > 0,
            "view=self: this checkpoint has no self-attention "
            "(model.encoder.self_attention.layers=0); use view=cross",
        )
        _in_range("layer", cfg.layer, sa.layers, "model.encoder.self_attention.layers")
        _in_range("head", cfg.head, sa.heads, "model.encoder.self_attention.heads")
    elif cfg.head is not None:
        multi = AttentionType(model_cfg.attention.type) == AttentionType.multihead
        require(
            multi,
            f"head={cfg.head}: this checkpoint's cross-attention "
            f"(model.attention.type={model_cfg.attention.type}) has one head; "
            "drop head= or give view=self",
        )
        _in_range("head", cfg.head, model_cfg.attention.heads, "model.attention.heads")


def _in_range(key: str, value: int | None, n: int, setting: str) -> None:
    require(
        value is None or value < n,
        f"{key}={value} is out of range: the checkpoint has {setting}={n}, so "
        f"{key} takes 0 to {n - 1}",
    )


def _check_two_way_output(cfg: DictConfig) -> None:
    """A reverse checkpoint writes symmetrized word links, nothing else."""
    if cfg.reverse_checkpoint is None:
        return
    require(
        AlignFormat(cfg.format) == AlignFormat.pharaoh and cfg.words,
        f"reverse_checkpoint= writes symmetrized word links (format={cfg.format}, "
        f"words={str(cfg.words).lower()}): give format=pharaoh words=true",
    )
    require(
        cfg.threshold is None,
        f"threshold={cfg.threshold} reads many links per word from one direction; "
        "reverse_checkpoint= combines each direction's one link per word: drop one",
    )
    require(
        not cfg.attribution,
        "attribution=true explains one model's attention; reverse_checkpoint= "
        "writes links of two: drop one",
    )


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
        hyps = translator.hypotheses(split)
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
    maps = translator.attention_maps(split, titles, forced and cfg.text is None)
    if not cfg.attribution:
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


def run_align(cfg: DictConfig, out_dir: Path) -> Path | None:
    """Render or export the attention of the requested sentences."""
    from seq2seq.alignment import export
    from seq2seq.alignment.maps import CAVEAT
    from seq2seq.alignment.terminal import alignment_terminal
    from seq2seq.alignment.viewer import alignment_html
    from seq2seq.alignment.words import merged

    translator = load_translator(cfg)
    reverse = load_reverse(cfg, translator)
    if reverse is not None:  # check_align: format=pharaoh words=true
        lines = symmetrized_lines(cfg, translator, reverse)
        return emit(cfg, out_dir, "alignments.txt", "".join(x + "\n" for x in lines))
    check_model_view(cfg, translator.config.model)
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


def say_spearman(items) -> None:
    """Each map's Spearman ρ between its weights and its attribution, when asked."""
    for att in items:
        if att.spearman is not None:
            rho = att.spearman
            print(f"{att.title}: Spearman rho(attention, attribution) = {rho:.3f}")


def view_of(cfg: DictConfig, att):
    """The map ``view``, ``layer`` and ``head`` ask for (``alignment/views.py``);
    ``layer`` None is the last block, the one the decoder reads."""
    from seq2seq.alignment.views import cross_view, self_view

    if AttentionView(cfg.view) == AttentionView.cross:
        return cross_view(att, cfg.head)
    layer = len(att.self_attention) - 1 if cfg.layer is None else cfg.layer
    return self_view(att, layer, cfg.head)


def _align(cfg: DictConfig) -> None:
    run_align(cfg, run_dir())


main = command("align", _align, check_align)
