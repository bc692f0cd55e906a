"""PySpark Python Data Source (not built yet)."""
