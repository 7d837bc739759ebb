"""Parsing of sizes and rates written with units (``100GB``, ``4TiB``, ``25GB/s``).

kB/MB/GB/TB/PB are powers of 10; KiB/MiB/GiB/TiB/PiB powers of 2 (simulation-model.md).
"""
from __future__ import annotations

import math
import re

from .errors import ConfigError

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50,
}
#: sizes and rates are at most 2^62 bytes: byte counters are int64, and twice any one size still fits
MAX_BYTES = 2**62
_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*(/s)?\s*$")


def parse_bytes(value, key: str, *, allow_rate: bool = False) -> int:
    """Return a non-negative whole number of bytes from an int, float or unit string.

    ``key`` names the config key in any error.
    """
    if isinstance(value, bool) or value is None:
        raise ConfigError(key, f"expected a size in bytes (e.g. 100GB, 4TiB, 1e9), got {value!r}")
    if isinstance(value, (int, float)):
        num = float(value)
    elif isinstance(value, str):
        m = _RE.match(value)
        if not m:
            raise ConfigError(key, f"cannot read {value!r} as a size (e.g. 100GB, 4TiB, 1e9)")
        unit = m.group(2).lower()
        if unit not in _UNITS:
            raise ConfigError(key, f"unknown unit {m.group(2)!r} in {value!r}; use B, kB, MB, GB, TB, KiB, MiB, GiB, TiB")
        if m.group(3) and not allow_rate:
            raise ConfigError(key, f"{value!r} is a rate; a size is expected here")
        num = float(m.group(1)) * _UNITS[unit]
    else:
        raise ConfigError(key, f"expected a size in bytes, got {type(value).__name__} {value!r}")
    if not math.isfinite(num) or num < 0:
        raise ConfigError(key, f"must be a non-negative size, got {value!r}")
    if num > MAX_BYTES:
        raise ConfigError(key, f"{value!r} is too large (at most {MAX_BYTES:.3g} bytes = 2^62, about 4.6 EB)")
    return int(round(num))


def parse_rate(value, key: str) -> float:
    """Bytes per second from a number or a string such as ``25GB/s``; must be > 0."""
    b = parse_bytes(value, key, allow_rate=True)
    if b <= 0:
        raise ConfigError(key, f"must be a positive rate, got {value!r}")
    return float(b)


def parse_number(key: str, value, *, lo=None, hi=None, integer=False, allow_none=False, lo_open=False,
                 allow_inf=False):
    """Validate the numeric setting ``key`` (a number or a numeric string); ConfigError names the
    key. ``allow_inf`` admits ``inf`` (e.g. Gandalf's α = ∞, "never pay a write")."""
    if value is None:
        if allow_none:
            return None
        raise ConfigError(key, "is required")
    if isinstance(value, bool):
        raise ConfigError(key, f"expected a number, got {value!r}")
    if isinstance(value, str):
        try:
            value = float("inf") if allow_inf and value.strip().lower() == ".inf" else float(value)
        except ValueError:
            raise ConfigError(key, f"expected a number, got {value!r}") from None
    if not isinstance(value, (int, float)):
        raise ConfigError(key, f"expected a number, got {value!r}")
    if integer:
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(key, f"expected a whole number, got {value!r}")
        value = int(value)
    else:
        value = float(value)
        if not math.isfinite(value) and not (allow_inf and value == math.inf):
            raise ConfigError(key, f"must be finite, got {value!r}")
    if lo is not None and (value < lo or (lo_open and value == lo)):
        raise ConfigError(key, f"must be {'>' if lo_open else '>='} {lo}, got {value!r}")
    if hi is not None and value > hi:
        raise ConfigError(key, f"must be <= {hi}, got {value!r}")
    return value


def lifetime_text(years: float) -> str:
    """An SSD lifetime for people: years from one year up, else months (from two months), days
    (from one day) or hours; a year is 365 days, as in :func:`cluster_sim.metrics.lifetime_years`,
    and a month a twelfth of one (docs/decisions.md 59)."""
    y = float(years)
    if not math.isfinite(y):
        return f"{y} years"
    if y >= 1.0:
        return f"{y:.2f} years"
    days = y * 365.0
    if y * 12 >= 2.0:
        return f"{y * 12:.1f} months"
    if days >= 1.0:
        return f"{days:.1f} days"
    return f"{days * 24:.1f} hours"
