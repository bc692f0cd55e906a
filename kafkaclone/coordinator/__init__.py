"""Coordinators: ``group`` (consumer groups and committed offsets) and ``transaction``
(producer ids and transactions, empty so far)."""
