"""The files ``flowledger bundle`` puts beside the evidence: the auditor's single-file verifier
(:mod:`.verify_bundle`, the standard library and ``cryptography`` only, imports nothing of the
ledger) and the README the bundle opens with (``README.md``, a template)."""
