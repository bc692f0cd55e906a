"""DelayedProduce and DelayedFetch (not built yet)."""
