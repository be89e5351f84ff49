"""``seq2seq-align``: show where a trained model looked, for a text or a split.

This module checks the settings (``check_align``; ``check_model_view`` once the
checkpoint's model is known), loads the translator (and the reverse one) and calls
``alignment/pipeline.py``'s ``run_align``, which decodes or forces the sentences and
renders or exports their attention. Attention weights describe how the model mixed the
source states; they are not a causal explanation of its output.

With ``reverse_checkpoint=B.pt`` (a model trained the other way on the same corpus)
and ``format=pharaoh words=true`` it writes the two directions' word links combined
by ``symmetrize`` (``alignment/symmetrize.py``); other formats show one model's
attention, so ``check_align`` refuses them with a reverse checkpoint. ``report=DIR``
writes the corpus report of ``split=`` (``alignment/report.py``).
"""

from __future__ import annotations

from omegaconf import DictConfig

from seq2seq.alignment.pipeline import (
    GRADIENT,
    OCCLUSION,
    attribution_kind,
    knockout_of,
)
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
    kind = attribution_kind(cfg.attribution)
    require(
        not (kind == GRADIENT and len(checkpoint_paths(cfg.checkpoint)) > 1),
        "attribution=true explains one model: give one checkpoint, not an ensemble",
    )
    require(
        not (kind and knockout_of(cfg)),
        f"attribution={cfg.attribution} explains the whole model: drop it or the "
        "knockout",
    )
    negative = [i for i in cfg.index or [] if i < 0]
    require(not negative, f"index={list(cfg.index or [])}: indices count from 0")
    check_reverse_file(cfg)
    _check_two_way_output(cfg)
    _check_view(cfg)
    _check_report(cfg)


def _check_report(cfg: DictConfig) -> None:
    """``report=DIR``: a split's sentences, each translated and explained by one
    model's cross-attention."""
    if cfg.report is None:
        return
    require(bool(str(cfg.report).strip()), "report= is empty: give a folder")
    require(
        cfg.split is not None and cfg.text is None,
        "report= lists a split's sentences: give split=NAME (not text=)",
    )
    require(
        not cfg.references,
        "report= scores the model's translations (and reads AER on the references "
        "itself): drop references=true",
    )
    require(
        cfg.reverse_checkpoint is None and knockout_of(cfg) is None,
        "report= explains one model as it is: drop reverse_checkpoint= and knockout.*",
    )
    require(
        AttentionView(cfg.view) == AttentionView.cross,
        "report= shows every view of a sentence itself: drop view=self",
    )


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
        attribution_kind(cfg.attribution) != OCCLUSION,
        "attribution=occlusion knocks out source words for the decoder's "
        "cross-attention: give view=cross",
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
    require(
        knockout_of(cfg) is None,
        "knockout= decodes one model with parts knocked out; reverse_checkpoint= "
        "writes links of two: drop one",
    )


def _align(cfg: DictConfig) -> None:
    from seq2seq.alignment.pipeline import run_align

    translator = load_translator(cfg)
    reverse = load_reverse(cfg, translator)
    if reverse is None:  # a reverse checkpoint writes links of the cross-attention
        check_model_view(cfg, translator.config.model)
    run_align(cfg, run_dir(), translator, reverse)


main = command("align", _align, check_align)
