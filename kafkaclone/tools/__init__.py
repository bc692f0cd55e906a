"""The command-line tools behind scripts/."""
