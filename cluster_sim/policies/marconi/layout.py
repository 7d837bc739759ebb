"""marconi's names on the compiled engine (its arrays' layout is tree.py's)."""
from __future__ import annotations

from ...engine.layout import GROW_P6

GROW_MC_TUNE = GROW_P6   # alpha=auto: its alpha tuning is due at this request's tick
