"""Serving an app with uvicorn the way both ``serve`` and ``run`` do."""

from __future__ import annotations

import gc
import sys
from typing import Any

from ledger.domain.redact import NO_SECRETS, Secrets
from ledger.receiver.logs import log_config

# Everything imported and built before serving (frameworks, models, the app: about a million
# objects) is moved out of the collector's sight. Otherwise each full collection walks all of
# it, finds nothing to free, and stalls every request in flight for about 70 ms, which set
# the receiver's p99 latency. Objects made while serving are collected as usual.
#
# The writer thread releases the GIL on every SQLite call; with the default 5 ms switch
# interval each re-acquisition can wait that long behind the busy event loop (a convoy that
# made group commit CPU-idle). A short interval hands the GIL back promptly.
SWITCH_INTERVAL = 0.0005  # seconds


def serve_app(
    app: Any,
    *,
    host: str,
    port: int,
    access_log: bool = True,
    secrets: Secrets = NO_SECRETS,
) -> None:
    """Run ``app`` until SIGINT or SIGTERM (uvicorn's own handlers end the lifespan); every
    log line is redacted with ``secrets``."""
    import uvicorn

    sys.setswitchinterval(SWITCH_INTERVAL)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=log_config(secrets=secrets),
        access_log=access_log,
        server_header=False,
        workers=1,
        timeout_graceful_shutdown=10,
    )
    config.load()  # imports the HTTP protocol and wraps the app: all of it frozen below
    gc.collect()
    gc.freeze()
    uvicorn.Server(config).run()
