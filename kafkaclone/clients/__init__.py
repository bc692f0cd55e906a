"""The project's own synchronous Producer, Consumer and AdminClient (not built yet)."""
