"""Producer ids and transactions (not built yet)."""
