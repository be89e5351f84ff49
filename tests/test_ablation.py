"""scripts/labs/ablation.py: every row of its grids is a valid training command."""

from __future__ import annotations

import argparse
import importlib.util

import pytest
from hydra import compose, initialize_config_dir

from seq2seq.config import CONFIG_DIR, register_configs
from tests.conftest import REPO_ROOT, check_command

spec = importlib.util.spec_from_file_location(
    "ablation", REPO_ROOT / "scripts" / "labs" / "ablation.py"
)
ablation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ablation)
register_configs()


def _args(**kw) -> argparse.Namespace:
    base = {"grid": "levers", "minutes": None, "epochs": 6, "seeds": [42, 43]}
    return argparse.Namespace(**{**base, "experiment": "multi30k_en_de", **kw})


@pytest.mark.parametrize(
    "grid,experiment",
    [("levers", "multi30k_en_de"), ("attention", "multi30k_de_en_cpu30")],
)
def test_every_row_composes_and_passes_the_checks(grid, experiment):
    args = _args(grid=grid, experiment=experiment)
    rows = ablation.grid(grid)
    assert len({key + label for key, label, _ in rows}) == len(rows)
    for _, _, overrides in rows:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose(
                config_name="train",
                overrides=[
                    f"experiment={experiment}",
                    *overrides,
                    *ablation.budget(args),
                ],
            )
        check_command("train", cfg)
        for override in overrides:  # each lever really changes its setting
            key, value = override.split("=")
            if not key.startswith("model/"):
                got = _get(cfg, key)
                got = getattr(got, "value", got)  # an enum's name
                assert str(got) == value or float(got) == float(value)


def _get(cfg, dotted: str):
    for part in dotted.split("."):
        cfg = cfg[part]
    return cfg


def test_epoch_budget_replaces_the_recipes_wall_clock():
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            config_name="train",
            overrides=["experiment=multi30k_de_en_cpu30", *ablation.budget(_args())],
        )
    assert cfg.trainer.max_epochs == 6 and cfg.trainer.max_minutes is None
    assert ablation.budget(_args(epochs=None, minutes=7.0)) == [
        "trainer.max_minutes=7.0"
    ]


def test_table_has_one_line_per_row_with_the_mean_over_seeds():
    key, label, _ = ablation.grid("levers")[3]
    run = {"attention": key, "decoder": label, "params": 8_439_616, "steps": 1000}
    results = [
        {
            **run,
            "seed": s,
            "train_wall_s": 600 * s,
            "greedy_bleu": g,
            "beam5_bleu": b,
            "beam5_chrf": 60.0,
        }
        for s, g, b in ((1, 30.0, 31.0), (2, 32.0, 33.0))
    ]
    lines = ablation.table(results, _args()).splitlines()
    assert "6 epochs" in lines[0]
    (row,) = [line for line in lines if line.startswith(f"| {key} |")]
    assert "| 31.00 ± 1.41 | 32.00 ± 1.41 | 60.00 ± 0.00 |" in row
    assert "| 15 ± 7 |" in row  # training minutes: 10 and 20
    assert sum(line.startswith("| ") for line in lines[4:]) == 1


def test_extra_overrides_are_the_base_and_each_row_keeps_its_lever(tmp_path, capsys):
    """A base like the older recipe's dropout must not undo the dropout row's lever:
    Hydra keeps the last value of a key, so the row's overrides come after the base."""
    args = _args(
        out=str(tmp_path), dry_run=True, corpus="c", extra=["model.emb_dropout=0.2"]
    )
    key, label, overrides = ablation.grid("levers")[1]
    assert "model.emb_dropout=0.3" in overrides
    ablation.one_run(args, key, label, overrides, 42)
    command = capsys.readouterr().out.split()
    assert command.index("model.emb_dropout=0.2") < command.index(
        "model.emb_dropout=0.3"
    )
