"""Partition, Replica, Broker and EndPoint (not built yet)."""
