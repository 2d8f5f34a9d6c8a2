"""The n8n integration end to end against a real n8n: ``python -m e2e.n8n`` (see
:mod:`e2e.n8n.__main__`)."""
