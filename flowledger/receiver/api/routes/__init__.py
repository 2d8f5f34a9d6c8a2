"""The API's routes: the workflow calls (:mod:`.calls`), the reads, the holds, the proofs and
health."""
