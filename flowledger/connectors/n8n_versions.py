"""What n8n says of workflow versions (docs/n8n.md, "Which version of a workflow an execution
ran"): an execution's ``workflowVersionId`` (read by id only) and a workflow's active version
with the publish history of that version, read as the connector hands them to the sync."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from flowledger.connectors import fields
from flowledger.connectors.base import AuthFailed, Malformed, clean_text
from flowledger.connectors.http import NotFound

MAX_VERSION = 64  # n8n's version ids are UUIDs; a longer one is not a version id
MAX_HISTORY = 1000  # publish history entries read of one workflow; the rest are not looked at


def version_id(value: Any) -> str | None:
    """A version id as n8n sends it (a UUID), or ``None`` for anything else: missing, not a
    string, empty, longer than :data:`MAX_VERSION`, or not printable."""
    if isinstance(value, str) and 0 < len(value) <= MAX_VERSION and value.isprintable():
        return value
    return None


def active_since(body: dict[str, Any]) -> tuple[str, datetime] | None:
    """The active version of a workflow as ``GET /workflows/{id}`` answers
    (``activeVersionId``) and the time of its last ``activated`` event in the publish history
    of that version (``activeVersion.workflowPublishHistory``, n8n's
    ``activeWorkflowVersionPublicSchema``), or ``None`` when the answer does not tell both (no
    active version; a history that is not a list, or names no time for it). Only the first
    :data:`MAX_HISTORY` entries are read."""
    active = version_id(body.get("activeVersionId"))
    version = body.get("activeVersion")
    history = version.get("workflowPublishHistory") if isinstance(version, dict) else None
    if active is None or not isinstance(history, list):
        return None
    since: datetime | None = None
    for entry in history[:MAX_HISTORY]:
        if not isinstance(entry, dict) or entry.get("versionId") != active:
            continue
        if entry.get("event") != "activated":
            continue
        at = _time(entry.get("createdAt"))
        if at is not None and (since is None or at > since):
            since = at
    return None if since is None else (active, since)


def _time(value: Any) -> datetime | None:
    """One time of a publish history entry, or ``None`` for what is not one."""
    try:
        return fields.time({"createdAt": value}, "createdAt")
    except Malformed:
        return None


class VersionReads:
    """The n8n connector's reads of versions (:class:`flowledger.connectors.n8n.N8nConnector`
    is one): through its reads by id and of a path."""

    def _by_id(self, external_id: str, *, data: bool = False) -> Any:
        raise NotImplementedError

    def _get(self, path: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        raise NotImplementedError

    def execution_version(self, external_id: str) -> tuple[str | None, str | None]:
        """The workflow version execution ``external_id`` ran (only a read by id says it), or
        ``None`` with why: n8n no longer has it, or did not say a version id."""
        try:
            body = self._by_id(external_id)
        except NotFound:
            return None, "n8n no longer has it"
        except Malformed as exc:
            return None, clean_text(exc, 200)
        found = version_id(body.get("workflowVersionId") if isinstance(body, dict) else None)
        return (found, None) if found else (None, "n8n did not say which version it ran")

    def active_version(self, workflow_id: str) -> tuple[tuple[str, datetime] | None, str | None]:
        """The workflow's active version and the time of its last activation (see
        :func:`flowledger.connectors.n8n_versions.active_since`), or ``None`` with why. Needs
        the scope ``workflow:read``."""
        try:
            body = self._get(f"/workflows/{quote(workflow_id, safe='')}")
        except AuthFailed as exc:  # a key without workflow:read: the sync goes on without
            return None, f"workflow versions unreadable: {clean_text(exc, 200)}"
        except NotFound:
            return None, f"n8n no longer has workflow {clean_text(workflow_id, 80)}"
        except Malformed as exc:
            return None, clean_text(exc, 200)
        found = active_since(body) if isinstance(body, dict) else None
        if found is None:
            name = clean_text(workflow_id, 80)
            return None, f"n8n did not say since when workflow {name}'s version is active"
        return found, None
