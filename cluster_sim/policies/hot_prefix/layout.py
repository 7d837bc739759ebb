"""hot_prefix's names on the compiled engine: the floats of a decaying heat (``policy.half_life_s``)."""
from __future__ import annotations

from ...engine.layout import M_P0

#: M_HP_DECAY: 1 when the heat decays (policy.half_life_s is set): it is then a float in FX
M_HP_DECAY = M_P0
# FX: the request's time, the half-life T, the threshold F, then per payload its heat (FX_HEAT0 + p)
# and the time of its last update (FX_HEAT0 + 2U + p: M_HP_TUPD holds that offset)
FX_NOW, FX_T, FX_F, FX_HEAT0 = 0, 1, 2, 4
M_HP_TUPD = M_P0 + 1
