"""GroupCoordinator and the committed-offset store (not built yet)."""
