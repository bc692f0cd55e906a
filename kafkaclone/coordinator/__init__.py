"""Coordinators: ``group`` (consumer groups and committed offsets, built) and
``transaction`` (producer ids and transactions, not built yet)."""
