"""What is built from several reads for someone outside the ledger: the handover report for
the next person on duty, and the gauges a Prometheus scrape reads. The reads themselves, and
their statements, are :mod:`flowledger.storage.reads`'."""
