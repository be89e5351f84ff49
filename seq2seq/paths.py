"""Where the packaged Hydra configs live."""

from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
