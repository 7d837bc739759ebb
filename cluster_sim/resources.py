"""Where the bundled files live: ``conf/`` and ``traces/default.parquet``.

In a git checkout (and an editable install of one) they are the repository's top-level
``conf/`` and ``traces/``. A built wheel carries them inside the package as
``cluster_sim/conf/`` and ``cluster_sim/traces/`` (``setup.py`` maps the top-level folders
there), so a regular ``pip install .`` runs from any folder. The packaged copy wins when it
is there: in a checkout ``cluster_sim/conf`` does not exist.
"""
from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_root() -> Path:
    """The folder that holds ``conf/`` and ``traces/``: the installed package, or the checkout."""
    if (_PKG / "conf" / "config.yaml").is_file():
        return _PKG
    return _PKG.parent


def conf_dir() -> Path:
    """The bundled Hydra config folder (``config.yaml`` and its groups)."""
    return data_root() / "conf"


def checkout_root() -> Path | None:
    """The repository root when running from a checkout (it has ``hydra_plugins/`` beside
    ``cluster_sim/``), else None."""
    root = _PKG.parent
    return root if (root / "hydra_plugins").is_dir() and (root / "conf").is_dir() else None
