"""Liveness, readiness and metrics: unauthenticated, and saying nothing about the data."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from flowledger.plumbing.metrics import REGISTRY
from flowledger.receiver.api.deps import StateDep
from flowledger.receiver.api.errors import RETRY_AFTER, documented
from flowledger.receiver.api.handlers import error_response
from flowledger.receiver.api.schemas.errors import ErrorPublic
from flowledger.storage.engine import LedgerError

router = APIRouter(tags=["health"], responses=documented(413, 429))
NOT_READY: dict[int | str, dict[str, Any]] = {
    503: {
        "model": ErrorPublic,
        "description": "`not_ready`: the database is unreachable, did not answer within "
        "`read_deadline`, or is outdated",
    }
}


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up and serving."""
    return {"status": "ok"}


@router.get("/readyz", responses=NOT_READY)
async def readyz(st: StateDep) -> JSONResponse:
    """The database answers within ``read_deadline`` and its schema is the one this
    flowledger knows; else 503 with ``Retry-After``, as the workflow calls answer while the
    database is down. One check runs at a time: a probe while one is under way waits for it."""
    try:
        await st.ready_check.within(st.read_deadline)
    except TimeoutError:
        message = f"the ledger database did not answer within {st.read_deadline:g} s"
    except LedgerError:
        message = "the ledger database is unreachable or outdated"
    except Exception:
        message = "the ledger database is unreachable"
    else:
        return JSONResponse({"status": "ready"})
    return error_response(503, "not_ready", message, headers={"Retry-After": RETRY_AFTER})


@router.get("/metrics", response_class=PlainTextResponse)
def metrics() -> Response:
    """Prometheus text format. In a worker thread, with no deadline of the receiver's: under
    ``run`` the ledger's gauges read the database, for as long as the scrape's own timeout
    lets them."""
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
