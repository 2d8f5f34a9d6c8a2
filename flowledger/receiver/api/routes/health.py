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
from flowledger.storage.engine import LedgerError, check_schema

router = APIRouter(tags=["health"], responses=documented(413, 429))
NOT_READY: dict[int | str, dict[str, Any]] = {
    503: {
        "model": ErrorPublic,
        "description": "`not_ready`: the database is unreachable or outdated",
    }
}


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up and serving."""
    return {"status": "ok"}


@router.get("/readyz", responses=NOT_READY)
def readyz(st: StateDep) -> JSONResponse:
    """The database answers and its schema is the one this flowledger knows; else 503 with
    ``Retry-After``, as the workflow calls answer while the database is down."""
    try:
        check_schema(st.store)
    except LedgerError:
        message = "the ledger database is unreachable or outdated"
    except Exception:
        message = "the ledger database is unreachable"
    else:
        return JSONResponse({"status": "ready"})
    return error_response(503, "not_ready", message, headers={"Retry-After": RETRY_AFTER})


@router.get("/metrics", response_class=PlainTextResponse)
def metrics() -> Response:
    """Prometheus text format."""
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
