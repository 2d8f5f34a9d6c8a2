"""What the ledger does in n8n through its public API, besides reading: pin an execution so
that pruning keeps it, retry a failed one, delete one a person chose, and find which of these
the API key may do.

Facts this relies on (n8n 2.41.1, ``public-api/v1/controllers/executions.public.controller``,
``executions/execution.service``; tried against a real one):

- ``PUT /executions/{id}/tags`` (scope ``executionTags:update``) upserts the execution's
  *annotation* first, then sets its annotation tags; pruning skips every execution with an
  annotation. So ``[]`` pins without a tag, and a PUT refused for a tag id n8n does not know
  (404 "Some tags not found") has pinned all the same.
- ``POST /executions/{id}/retry`` (scope ``execution:retry``, body ``{"loadWorkflow": bool}``)
  answers the new execution (``retryOf`` the old id) once it has run; 409 for a queued or
  aborted execution and for one that succeeded; 404 for one that is gone.
- Every "no such execution" 404 of the public API is JSON with a ``message`` (``{"message":
  "Not Found"}``); while n8n starts, Express answers an HTML 404 (``Cannot POST …``) before the
  API's routes are mounted. Only the JSON one is taken as gone (:func:`request_json` makes the
  other :class:`NotReady`, kept for later like a connection error).
- ``DELETE /executions/{id}`` (scope ``execution:delete``) deletes it for good.
- A key without a route's scope is answered 403 before the route looks at the id; with it,
  an id that cannot exist (``0``) is 404. :meth:`N8nActions.missing_scopes` asks that way,
  changing nothing.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from flowledger.connectors import fields
from flowledger.connectors.base import AuthFailed, ConnectorError, Malformed, Settings, clean_text
from flowledger.connectors.http import BadRequest, Conflict, NotFound, request_json
from flowledger.connectors.n8n import STARTING

# The scope each action needs, by the route a probe asks.
SCOPES = {
    "executionTags:update": ("PUT", "/executions/0/tags", []),
    "execution:retry": ("POST", "/executions/0/retry", {"loadWorkflow": False}),
    "execution:delete": ("DELETE", "/executions/0", None),
}
# What each scope is for, as ``sources check`` says it.
SCOPE_USES = {
    "executionTags:update": "pinning a hold's execution against pruning",
    "execution:retry": "hold ID release --retry",
    "execution:delete": "sources delete-pinned",
}
MAX_RETRY_BODY = 32 * 1024 * 1024  # the answer carries the new execution's data
LOOKUP_LIMIT = 250
# The retry runs the workflow as it was when the failed execution ran (``loadWorkflow``
# false): the logic the hold is about and the processing version the operation recorded. A
# workflow changed since is the next execution's to run (docs/acting.md).
LOAD_WORKFLOW = False


class Refused(ConnectorError):
    """n8n refused the action for good (409 for the execution's state, 404 gone, 403 scope):
    trying again changes nothing; the message is n8n's reason in one line."""


class N8nActions:
    """Acts on one n8n instance through ``client``."""

    def __init__(self, client: httpx.Client, settings: Settings) -> None:
        self.client = client
        self.settings = settings
        self.api = settings.base_url.rstrip("/") + "/api/v1"

    def _call(
        self, method: str, path: str, body: Any = None, *, max_body: int = 1024 * 1024
    ) -> Any:
        if not self.settings.api_key:
            raise AuthFailed("no n8n API key: set the environment variable named by api_key_env")
        answer, _ = request_json(
            self.client,
            method,
            self.api + path,
            tool="n8n",
            headers={"X-N8N-API-KEY": self.settings.api_key, "Accept": "application/json"},
            json_body=body,
            starting_marker=STARTING,
            max_body=max_body,
        )
        return answer

    def pin(self, execution_id: str, tag_id: str | None = None) -> str | None:
        """Keep the execution from pruning; with ``tag_id``, tag it so. Returns a note when
        the pin was made without the tag (n8n does not know that tag id)."""
        path = f"/executions/{_quote(execution_id)}/tags"
        body = [{"id": tag_id}] if tag_id else []
        try:
            self._call("PUT", path, body)
        except NotFound as exc:
            if tag_id and "tags not found" in exc.said.lower():
                # The annotation was made before the tags were refused: pinned, untagged.
                return f"pinned without the tag: n8n knows no annotation tag {tag_id!r}"
            raise Refused(f"n8n has no execution {execution_id} (404): pruned or deleted") from None
        except AuthFailed as exc:
            raise _scope(exc, "executionTags:update") from None
        return None

    def retry(self, execution_id: str) -> dict[str, Any]:
        """Run a failed or crashed execution again; the new execution as n8n answered it
        (``id``, ``status``, ``retryOf``)."""
        path = f"/executions/{_quote(execution_id)}/retry"
        try:
            answer = self._call(
                "POST", path, {"loadWorkflow": LOAD_WORKFLOW}, max_body=MAX_RETRY_BODY
            )
        except Conflict as exc:
            raise Refused(_their_words(exc, execution_id)) from None
        except NotFound:
            raise Refused(f"n8n has no execution {execution_id} (404): pruned or deleted") from None
        except AuthFailed as exc:
            raise _scope(exc, "execution:retry") from None
        except BadRequest as exc:
            raise Refused(f"n8n refused to retry execution {execution_id}: {exc}") from None
        return _new_execution(answer, execution_id)

    def retry_of(self, execution_id: str) -> str | None:
        """The execution n8n made retrying ``execution_id``, if it made one: looked for among
        the newest (a retry is newer than any execution it retries), running ones included."""
        for status in (None, "running"):
            params = f"?limit={LOOKUP_LIMIT}" + (f"&status={status}" if status else "")
            try:
                body = self._call("GET", "/executions" + params)
            except AuthFailed as exc:
                raise _scope(exc, "execution:list") from None
            for item in fields.items(body, "data", "the execution list"):
                item = fields.obj(item, "an execution")
                if fields.ident(item, "retryOf") == execution_id:
                    found = fields.ident(item, "id", required=True)
                    return found
        return None

    def delete(self, execution_id: str) -> bool:
        """Delete the execution in n8n; ``False`` when it was gone already."""
        try:
            self._call("DELETE", f"/executions/{_quote(execution_id)}")
        except NotFound:
            return False
        except AuthFailed as exc:
            raise _scope(exc, "execution:delete") from None
        except BadRequest as exc:
            raise Refused(f"n8n refused to delete execution {execution_id}: {exc}") from None
        return True

    def missing_scopes(self) -> list[str]:
        """The scopes of :data:`SCOPES` the API key lacks (each asked with an id that cannot
        exist: nothing changes)."""
        missing = []
        for scope, (method, path, body) in SCOPES.items():
            try:
                self._call(method, path, body)
            except AuthFailed as exc:
                if "(401)" in str(exc):
                    raise
                missing.append(scope)
            except (NotFound, BadRequest, Conflict):
                pass  # the route looked at the id: the key has the scope
        return missing


def scope_lines(actions: N8nActions, *, pins: bool = True) -> list[str]:
    """One line for each scope the key lacks for pins (unless ``pins`` is off), retries and
    deletions; one line saying they were not checked when n8n could not be asked."""
    try:
        missing = actions.missing_scopes()
    except ConnectorError as exc:
        return [f"the key's scopes for pins and retries were not checked: {exc}"]
    return [
        f"the API key lacks the {scope} scope, needed for {SCOPE_USES[scope]}: add it to the "
        "key in n8n (Settings → n8n API)"
        for scope in missing
        if pins or scope != "executionTags:update"
    ]


def _quote(execution_id: str) -> str:
    return quote(execution_id, safe="")


def _scope(exc: AuthFailed, scope: str) -> ConnectorError:
    if "(401)" in str(exc):
        return exc
    return Refused(f"the n8n API key lacks the {scope} scope (403): add it to the key in n8n")


def _their_words(exc: Conflict, execution_id: str) -> str:
    said = str(exc).split("refused (409): ", 1)[-1]
    return f"n8n will not retry execution {execution_id} (409): {said}"


def _new_execution(answer: Any, execution_id: str) -> dict[str, Any]:
    body = fields.obj(answer, "the retried execution")
    new_id = fields.ident(body, "id", required=True)
    assert new_id is not None
    if not new_id.isdigit():
        raise Malformed(f"n8n answered the retry with execution id {clean_text(new_id, 40)!r}")
    if new_id == execution_id:
        raise Malformed(f"n8n answered the retry of {execution_id} with the same execution")
    return {
        "id": new_id,
        "status": fields.text(body, "status", limit=32),
        "retry_of": fields.ident(body, "retryOf"),
    }
