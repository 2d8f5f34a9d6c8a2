"""Storage: the tables, opening a database, and its migrations."""
