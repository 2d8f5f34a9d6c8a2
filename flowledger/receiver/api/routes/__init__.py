"""The API's routes: the workflow calls (served by the engine's write lane, documented here),
the reads, and health."""
