"""The JDBC connectors, as Confluent's ``io.confluent.connect.jdbc`` people know them:
``JdbcSourceConnector`` (tables or a query into topics) and ``JdbcSinkConnector`` (topics
into tables), over SQLite (stdlib ``sqlite3``) and PostgreSQL (psycopg 3)."""
