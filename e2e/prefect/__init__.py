"""End to end against a real Prefect 3 server: ``python -m e2e.prefect``."""
