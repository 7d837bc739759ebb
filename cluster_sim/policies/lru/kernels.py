"""lru's compiled hooks: none. The engine's defaults are LRU: the candidate queue is the touch log
(least recent first), DRAM victims go down to the SSD and the SSD's are dropped
(:func:`cluster_sim.engine._jit.default_action`)."""
