"""One module per API handler (not built yet)."""
