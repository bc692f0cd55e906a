"""Test support shipped with the package."""
