"""The cache core: residency of FA and STATE payloads in HBM / DRAM / SSD."""
from .state import CacheState, TierLRU, HBM, DRAM, SSD, TIER_NAMES, DROP, DEMOTE, NO_TIER

__all__ = ["CacheState", "TierLRU", "HBM", "DRAM", "SSD", "TIER_NAMES", "DROP", "DEMOTE", "NO_TIER"]
