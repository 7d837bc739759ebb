"""``type_aware_lru``'s Python side on the compiled engine (cluster_sim.engine.adapter): what the node
asks a policy between kernel calls. This one has no arrays of its own, so it only reads its counters
back; a policy with arrays sizes them in ``segments`` / ``floats`` and names its meta slots in
``setup`` (the built-in policies' ``engine.py`` files show every method)."""
from cluster_sim.engine.adapter import Adapter as _Base
from cluster_sim.engine.layout import K_DRAM_DEMOTED, K_DRAM_DROPPED

from .kernels import K_STATE_BYTES_DROPPED


class Adapter(_Base):
    def counters(self) -> dict:
        K = self.node.S.K
        return {"dram_victims_demoted": int(K[K_DRAM_DEMOTED]), "dram_victims_dropped": int(K[K_DRAM_DROPPED]),
                "state_bytes_dropped": int(K[K_STATE_BYTES_DROPPED])}
