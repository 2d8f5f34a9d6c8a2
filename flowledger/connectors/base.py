"""What every connector speaks: the normalized execution record, a page of them with the position
to store beside it, the errors a sync must tell apart, and the Protocol.

A connector does HTTP only. It never touches the ledger's database: it is handed the position
the sync stored last time and hands back pages, each with the position to store *in the same
transaction* as the page, so that a crash between two pages neither skips nor repeats one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import httpx

MAX_ID = 200  # the ledger's longest id; a longer one from a tool is malformed data
# Every status an execution record has, in n8n's words (``unknown``: an old n8n said neither).
STATUSES = ("new", "running", "waiting", "success", "error", "crashed", "canceled", "unknown")


@dataclass(frozen=True)
class ExecutionRecord:
    """One execution as the ledger keeps it, whatever tool it came from.

    ``status`` uses n8n's words (``new``, ``running``, ``waiting``, ``success``, ``error``,
    ``crashed``, ``canceled``); other tools map onto them and keep their own word in ``extra``.
    ``operation_id`` is a link the execution itself declared (n8n ``customData``)."""

    external_id: str
    status: str
    final: bool
    workflow_id: str | None = None
    workflow_name: str | None = None
    mode: str | None = None
    started_at: datetime | None = None
    stopped_at: datetime | None = None
    retry_of: str | None = None
    retry_success_id: str | None = None
    wait_till: datetime | None = None
    operation_id: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Page:
    """Records to store, and the position to store with them. ``total`` is the tool's count of
    what this run will walk, when it says (for a progress bar)."""

    records: Sequence[ExecutionRecord]
    position: str
    total: int | None = None


@dataclass(frozen=True)
class Settings:
    """What a connector needs from a configured source; secrets already read from the
    environment by the caller."""

    base_url: str
    api_key: str | None = None
    username: str | None = None
    password: str | None = None
    page_size: int = 250
    custom_data_workflows: tuple[str, ...] = ()
    custom_data_key: str = "ledger.operation_id"


class ConnectorError(Exception):
    """A problem talking to the tool; the message is one line a person can act on and never
    holds a secret. ``retryable`` errors may pass (429, 5xx, a network blip, a tool still
    starting); the others stop the source until someone fixes the cause. ``record`` names the
    read when it failed for one record alone (``execution 5``): once its retries are spent, the
    sync hands the error to :meth:`Connector.pass_over` and goes on without that read."""

    retryable = False
    stops_source = False

    def __init__(
        self, message: str, *, retry_after: str | None = None, record: str | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after  # the raw Retry-After header, when the tool sent one
        self.record = record


class Unreachable(ConnectorError):
    """No answer: DNS, refused connection, timeout, TLS."""

    retryable = True


class NoConnection(Unreachable):
    """No connection could be made: refused, no such host, TLS, or nothing accepted it within
    the connect timeout. A tool that is down stays down for longer than a retry waits, so a
    sync tries it again at most once and leaves the rest to its next run."""


class ConnectTimedOut(NoConnection):
    """Nothing accepted the connection within the connect timeout: that wait was the retry."""


class NotReady(ConnectorError):
    """The tool answers but is not serving its API yet (n8n "is starting up")."""

    retryable = True


class RateLimited(ConnectorError):
    retryable = True


class ServerError(ConnectorError):
    retryable = True


class AuthFailed(ConnectorError):
    """401 or 403: a missing, wrong or expired key, or one without the scope needed."""

    stops_source = True


class NoApi(ConnectorError):
    """The base URL answers, but the tool's API is not there (404 on its list)."""

    stops_source = True


class Malformed(ConnectorError):
    """The answer is not what the tool's API promises (not JSON, wrong shape, oversized)."""

    stops_source = True


class Connector(Protocol):
    """One workflow-tool instance, read through its API."""

    kind: str
    notes: list[str]  # what the run could not do but did not fail for (e.g. workflow names)

    def pages(self, position: str | None) -> Iterator[Page]:
        """Records new or changed since ``position`` (``None``: everything the tool still
        holds), page by page; the last page's position is where the next run starts."""
        ...

    def fetch(self, external_id: str) -> ExecutionRecord | None:
        """The execution as the tool has it now, or ``None`` when the tool no longer has it."""
        ...

    def present_ids(self) -> Iterator[list[str]]:
        """Every execution id the tool still holds, page by page (to notice pruning)."""
        ...

    def check(self) -> str:
        """One live call; a short description of what answered, or a :class:`ConnectorError`
        saying plainly what is wrong."""
        ...

    def pass_over(self, exc: ConnectorError) -> None:
        """Go on without the read ``exc.record`` names, its retries spent: ``pages`` from now
        on leaves it out (or keeps the record without what it could not read), and ``notes``
        says so. Raises ``exc`` when the connector cannot go on without it."""
        ...


@dataclass(frozen=True)
class Kind:
    """A kind of tool as the rest of the ledger asks about it, before any connector is built:
    how to build one, whether a source of this kind must name an API key, and the tool's own
    page for one execution (``None``: the tool has none the ledger can link to)."""

    name: str  # the ``kind`` of a configured source
    title: str  # the tool as a person names it
    build: Callable[[httpx.Client, Settings], Connector]
    needs_api_key: bool = False
    # (base URL, workflow id, execution id) -> the page's address, or None when it cannot say
    execution_page: Callable[[str, str | None, str], str | None] | None = None


def clean_text(value: object, limit: int = 200) -> str:
    """A tool's string made safe for one line of a message: printable, bounded."""
    text = "".join(ch if ch.isprintable() else " " for ch in str(value))
    return text[: limit - 1] + "…" if len(text) > limit else text


@runtime_checkable
class Versions(Protocol):
    """A connector whose tool says which version of a workflow an execution ran (n8n)."""

    def execution_version(self, external_id: str) -> tuple[str | None, str | None]:
        """The version the execution ran, or ``None`` and why (gone, not said)."""
        ...

    def active_version(self, workflow_id: str) -> tuple[tuple[str, datetime] | None, str | None]:
        """The workflow's active version and since when (the tool's time), or ``None`` and
        why."""
        ...
