"""Liveness, readiness and metrics: unauthenticated, and saying nothing about the data."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ledger.metrics import REGISTRY
from ledger.receiver.errors import RETRY_AFTER, error_response
from ledger.receiver.state import ReceiverState, state_of
from ledger.storage.engine import LedgerError, check_schema

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up and serving."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(st: ReceiverState = Depends(state_of)) -> JSONResponse:
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


@router.get("/metrics")
def metrics() -> Response:
    """Prometheus text format."""
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
