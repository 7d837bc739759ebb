"""Helpers the figure modules share: the tiers and payload kinds with their colours, the Agg
backend, byte units, log axes, the seed note of a title, sizes as given in a config."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .records import Group


TIERS = ("hbm", "dram", "ssd")
KINDS = ("fa", "state")
TIER_COLORS = {"hbm": ("#1b7837", "#7fbf7b"), "dram": ("#2166ac", "#92c5de"), "ssd": ("#b2182b", "#f4a582")}


CAPACITY_KEYS = {"hbm": "hbm_cache_bytes", "dram": "dram_bytes", "ssd": "ssd_bytes"}


def _bytes_of(value) -> float:
    from ..errors import ConfigError
    from ..units import parse_bytes

    try:
        return float(parse_bytes(value, "size"))
    except ConfigError:
        return float("nan")


def _plt():
    import logging

    import matplotlib
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _bytes_unit(maxval: float) -> tuple[float, str]:
    for div, unit in ((1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if maxval >= div:
            return div, unit
    return 1.0, "B"


def _log_if_decades(ax, values, axis="y"):
    v = np.asarray([x for x in values if x is not None and np.isfinite(x) and x > 0], dtype=float)
    if len(v) and v.max() / v.min() >= 10:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
        return True
    return False


def _seed_note(gs: Sequence[Group]) -> str:
    n = sorted({g.seeds for g in gs})
    if n and n[-1] > 1:
        return f" — mean ± 95% CI over {n[0]}" + (f"–{n[-1]}" if len(n) > 1 else "") + " seeds"
    return ""


def _series_by_policy(gs: Sequence[Group]) -> dict[str, list[Group]]:
    out: dict[str, list[Group]] = {}
    for g in gs:
        out.setdefault(g.policy, []).append(g)
    return out


def _wrap(label: str, width: int = 22) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(label, width)) or label


def _h(b: float) -> str:
    div, unit = _bytes_unit(b)
    return f"{b / div:.3g} {unit}"
