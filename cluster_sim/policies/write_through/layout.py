"""write_through's names on the compiled engine: its counter (besides the engine's victim tally)."""
from __future__ import annotations

from ...engine.layout import K_P0

PK_HITS_COUNTED = K_P0
