"""oracle_admission's names on the compiled engine: its counters and flag."""
from __future__ import annotations

from ...engine.layout import F_P0, K_P0

PK_ADMITTED, PK_NEVER_USED, PK_UNUSED_BEFORE, PK_FORCED = range(K_P0, K_P0 + 4)
F_OHIT = F_P0        # this SSD copy served a reuse from the SSD (since it entered)
