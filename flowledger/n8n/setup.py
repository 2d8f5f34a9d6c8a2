"""``flowledger n8n setup``: connect one n8n instance to the ledger through n8n's public API.

What it makes, each found by name first so that a second run creates nothing twice:

- a write token (only when the n8n credential is made with it: a token is shown once, so an
  existing credential keeps the one it holds);
- the n8n credential: the Flowledger node's own type (``flowledgerApi``) when the package
  ``n8n-nodes-flowledger`` is installed in that n8n, a Header Auth credential otherwise;
- the error workflow (the template matching the credential), imported and activated;
- with ``with_example``, the guarded-write template, linked to that error workflow;
- for each of ``workflows``, that workflow's error workflow setting.

The templates are the package's data, ``flowledger/n8n/templates`` (the files a person imports
by hand), read through :mod:`importlib.resources` and their placeholders filled in. Every
failure is one line naming what to do, and n8n's refusals name the API key's missing scope.
HTTP only, through an injected ``httpx.Client``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any
from urllib.parse import quote

import httpx

from flowledger.connectors.base import AuthFailed, ConnectorError, NotReady, Settings, Unreachable
from flowledger.connectors.http import NotFound, public_url, request_json
from flowledger.connectors.n8n_actions import N8nActions, scope_lines

NODE_CREDENTIAL_TYPE = "flowledgerApi"
HEADER_CREDENTIAL_TYPE = "httpHeaderAuth"
CREDENTIAL_PLACEHOLDER = "REPLACE_WITH_FLOWLEDGER_CREDENTIAL_ID"
ERROR_WORKFLOW_PLACEHOLDER = "REPLACE_WITH_ERROR_WORKFLOW_ID"
SETTINGS_NODE = "Ledger settings"  # the no-install template's one place for the ledger's URL
TEMPLATE_LEDGER_URL = "http://127.0.0.1:8787"  # what the files say until filled in
STARTING = "n8n is starting up"
MAX_PAGES = 40
TEMPLATES: Traversable = files("flowledger") / "n8n" / "templates"  # installed with the package
# Which file each role takes, with the node package installed and without it.
TEMPLATE_FILES = {
    (True, "error"): "error-workflow-node.json",
    (True, "example"): "guarded-write-node.json",
    (False, "error"): "error-workflow.json",
    (False, "example"): "guarded-write.json",
}
# What POST /workflows accepts of a workflow file; n8n refuses other top-level fields.
WORKFLOW_FIELDS = ("name", "nodes", "connections", "settings")


class SetupFailed(Exception):
    """One line a person can act on; nothing after it was attempted."""


@dataclass(frozen=True)
class SetupRequest:
    source: str  # the [[sources]] name: credential names and the dispatches' ``source``
    n8n_url: str
    api_key: str | None
    ledger_url: str  # where n8n reaches the ledger
    with_example: bool = False
    workflows: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    """One line of the report: ``created``, ``exists``, ``activated`` or ``updated``."""

    action: str
    kind: str
    name: str
    id: str | None = None
    note: str = ""


@dataclass
class SetupReport:
    node_installed: bool
    steps: list[Step] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    # What the API key lacks for the ledger to act in n8n (pins, retries, deletions), each
    # said as a line; setup makes nothing that needs them.
    scope_notes: list[str] = field(default_factory=list)


# Given a token name to start from, create a write token under a free name; return
# (name, token). The second callable revokes one by name (when the credential meant to hold
# it could not be made).
MakeToken = Callable[[str], tuple[str, str]]
RevokeToken = Callable[[str], None]


class N8nApi:
    """n8n's public API for what setup needs; every refusal becomes :class:`SetupFailed`."""

    def __init__(self, client: httpx.Client, base_url: str, api_key: str | None) -> None:
        if not api_key:
            raise SetupFailed(
                "no n8n API key: set the environment variable the source's api_key_env names "
                "(n8n: Settings → n8n API → Create an API key)"
            )
        self.client = client
        self.base_url = base_url.rstrip("/")
        self.api = self.base_url + "/api/v1"
        self.api_key = api_key

    def call(
        self,
        method: str,
        path: str,
        scope: str | None,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        absent_ok: bool = False,
    ) -> Any:
        """The JSON answer; with ``absent_ok`` a 404 is ``None`` instead of a failure."""
        where = public_url(self.base_url)
        try:
            answer, _ = request_json(
                self.client,
                method,
                self.api + path,
                tool="n8n",
                headers={"X-N8N-API-KEY": self.api_key, "Accept": "application/json"},
                params=params,
                json_body=body,
                starting_marker=STARTING,
            )
        except NotReady:
            raise SetupFailed(f"n8n at {where} is still starting; run this again shortly") from None
        except Unreachable as exc:
            raise SetupFailed(f"n8n unreachable: {exc}") from None
        except AuthFailed as exc:
            if "(401)" in str(exc):
                raise SetupFailed(
                    f"n8n at {where} refused the API key (401): check the key in the "
                    "environment variable the source's api_key_env names"
                ) from None
            needed = f"the {scope} scope" if scope else "a scope this needs"
            raise SetupFailed(
                f"the n8n API key lacks {needed} (403): n8n → Settings → n8n API → edit the key "
                f"and add {scope or 'it'}"
            ) from None
        except NotFound:
            if absent_ok:
                return None
            raise SetupFailed(
                f"n8n answered 404 to {method} {public_url(self.api + path)}: is this n8n 2.x "
                "with its public API enabled (N8N_PUBLIC_API_DISABLED)?"
            ) from None
        except ConnectorError as exc:
            raise SetupFailed(f"n8n: {exc}") from None
        return answer

    def listing(self, path: str, scope: str, params: dict[str, Any] | None = None) -> list[Any]:
        """Every item of a cursor-paged list."""
        items: list[Any] = []
        query: dict[str, Any] = {"limit": 250, **(params or {})}
        for _ in range(MAX_PAGES):
            page = self.call("GET", path, scope, params=query, absent_ok=True)
            if page is None:
                raise SetupFailed(
                    f"no n8n public API at {public_url(self.api)} (404): check the source's "
                    "base_url, and that the API is not disabled (N8N_PUBLIC_API_DISABLED)"
                )
            if not isinstance(page, dict) or not isinstance(page.get("data"), list):
                raise SetupFailed(f"n8n answered {path} with something other than a list")
            items.extend(item for item in page["data"] if isinstance(item, dict))
            cursor = page.get("nextCursor")
            if not cursor:
                return items
            query = {**query, "cursor": cursor}
        raise SetupFailed(f"n8n's {path} list did not end after {MAX_PAGES} pages")

    def has_credential_type(self, name: str) -> bool:
        """Whether that n8n knows the credential type (its node package is installed)."""
        path = f"/credentials/schema/{quote(name, safe='')}"
        return self.call("GET", path, None, absent_ok=True) is not None

    def created_id(self, answer: Any, what: str) -> str:
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), str | int):
            raise SetupFailed(f"n8n created the {what} but did not say its id")
        return str(answer["id"])


def setup(
    client: httpx.Client,
    req: SetupRequest,
    make_token: MakeToken,
    revoke_token: RevokeToken,
    templates: Traversable = TEMPLATES,
) -> SetupReport:
    """Bring one n8n instance to where its workflows can call the ledger; see the module."""
    n8n = N8nApi(client, req.n8n_url, req.api_key)
    credentials = n8n.listing("/credentials", "credential:list")
    installed = n8n.has_credential_type(NODE_CREDENTIAL_TYPE)
    error_name, error_wf = load_template(templates, installed, "error")
    example_name, example_wf = load_template(templates, installed, "example")
    report = SetupReport(node_installed=installed)
    cred = _credential(n8n, req, report, credentials, make_token, revoke_token)

    error_id = _workflow(
        n8n, report, error_name, lambda: _filled(error_wf, cred, req, None), activate=True
    )
    if req.with_example:
        _workflow(
            n8n,
            report,
            example_name,
            lambda: _filled(example_wf, cred, req, error_id),
            activate=False,
            note="not active: set its write URL, then publish it (the credential is set)",
        )
    for workflow_id in req.workflows:
        _link_error_workflow(n8n, report, workflow_id, error_id)
    report.links.append(f"{n8n.base_url}/home/workflows")
    settings = Settings(base_url=req.n8n_url, api_key=req.api_key)
    report.scope_notes = scope_lines(N8nActions(client, settings))
    return report


def credential_name(source: str, installed: bool) -> str:
    return f"Flowledger API ({source})" if installed else f"flowledger write token ({source})"


@dataclass(frozen=True)
class _Credential:
    id: str
    name: str
    type: str


def _credential(
    n8n: N8nApi,
    req: SetupRequest,
    report: SetupReport,
    existing: list[dict[str, Any]],
    make_token: MakeToken,
    revoke_token: RevokeToken,
) -> _Credential:
    kind = NODE_CREDENTIAL_TYPE if report.node_installed else HEADER_CREDENTIAL_TYPE
    name = credential_name(req.source, report.node_installed)
    for found in existing:
        if found.get("name") == name and found.get("type") == kind:
            cred = _Credential(str(found.get("id")), name, kind)
            report.steps.append(Step("exists", "credential", name, cred.id, f"{kind}, not changed"))
            return cred
    token_name, token = make_token(f"n8n-{req.source}")
    data = (
        {"baseUrl": req.ledger_url, "token": token, "signingSecret": "", "source": req.source}
        if report.node_installed
        else {"name": "Authorization", "value": f"Bearer {token}"}
    )
    try:
        answer = n8n.call(
            "POST",
            "/credentials",
            "credential:create",
            body={"name": name, "type": kind, "data": data},
        )
        cred = _Credential(n8n.created_id(answer, "credential"), name, kind)
    except SetupFailed as exc:
        revoke_token(token_name)  # nobody holds it: never leave a live token behind
        raise SetupFailed(f"{exc} (the new token {token_name} was revoked again)") from None
    report.steps.append(
        Step("created", "token", token_name, None, "write scope, held only by the credential")
    )
    report.steps.append(
        Step("created", "credential", name, cred.id, f"{kind}, ledger at {req.ledger_url}")
    )
    return cred


def load_template(templates: Traversable, installed: bool, role: str) -> tuple[str, dict[str, Any]]:
    """The name and workflow of the ``error`` or ``example`` template, with the node or
    without it."""
    path = templates / TEMPLATE_FILES[(installed, role)]
    try:
        workflow = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SetupFailed(
            f"cannot read the template {path} ({type(exc).__name__}): this flowledger "
            "install lacks its n8n templates; reinstall the package"
        ) from None
    if not isinstance(workflow, dict) or not isinstance(workflow.get("name"), str):
        raise SetupFailed(f"the template {path} is not an n8n workflow")
    return workflow["name"], workflow


def fill_template(
    template: dict[str, Any],
    *,
    credential_id: str,
    credential_name: str,
    ledger_url: str,
    source: str,
    error_workflow_id: str | None,
) -> dict[str, Any]:
    """The template as POST /workflows takes it: the credential's id, the ledger's URL (in the
    settings node, or in the one ledger call of an error workflow) and the source name, the
    error workflow's id (or no error workflow)."""
    workflow = copy.deepcopy({k: template[k] for k in WORKFLOW_FIELDS if k in template})
    for node in workflow.get("nodes", []):
        for ref in (node.get("credentials") or {}).values():
            if isinstance(ref, dict) and ref.get("id") == CREDENTIAL_PLACEHOLDER:
                ref.update(id=credential_id, name=credential_name)
        url = node.get("parameters", {}).get("url")
        if isinstance(url, str) and url.startswith(TEMPLATE_LEDGER_URL + "/"):
            node["parameters"]["url"] = ledger_url + url[len(TEMPLATE_LEDGER_URL) :]
        if node.get("name") == SETTINGS_NODE:
            for assignment in node["parameters"]["assignments"]["assignments"]:
                if assignment.get("name") == "ledger_url":
                    assignment["value"] = ledger_url
                elif assignment.get("name") == "source":
                    assignment["value"] = source
    settings = workflow.setdefault("settings", {})
    if settings.get("errorWorkflow") == ERROR_WORKFLOW_PLACEHOLDER:
        if error_workflow_id is None:
            settings.pop("errorWorkflow")
        else:
            settings["errorWorkflow"] = error_workflow_id
    return workflow


def _filled(
    template: dict[str, Any], cred: _Credential, req: SetupRequest, error_id: str | None
) -> dict[str, Any]:
    return fill_template(
        template,
        credential_id=cred.id,
        credential_name=cred.name,
        ledger_url=req.ledger_url,
        source=req.source,
        error_workflow_id=error_id,
    )


def _workflow(
    n8n: N8nApi,
    report: SetupReport,
    name: str,
    build: Callable[[], dict[str, Any]],
    *,
    activate: bool,
    note: str = "",
) -> str:
    """The workflow named ``name``: found (and activated when it should be), or imported."""
    found = [
        w
        for w in n8n.listing("/workflows", "workflow:list", {"name": name})
        if w.get("name") == name and not w.get("isArchived")
    ]
    if found:
        workflow_id = str(found[0].get("id"))
        report.steps.append(Step("exists", "workflow", name, workflow_id, note))
    else:
        answer = n8n.call("POST", "/workflows", "workflow:create", body=build())
        workflow_id = n8n.created_id(answer, "workflow")
        report.steps.append(Step("created", "workflow", name, workflow_id, note))
    report.links.append(f"{n8n.base_url}/workflow/{workflow_id}")
    if activate and not (found and found[0].get("active")):
        n8n.call("POST", f"/workflows/{quote(workflow_id)}/activate", "workflow:activate")
        report.steps.append(Step("activated", "workflow", name, workflow_id))
    return workflow_id


def _link_error_workflow(n8n: N8nApi, report: SetupReport, workflow_id: str, error_id: str) -> None:
    path = f"/workflows/{quote(workflow_id, safe='')}"
    workflow = n8n.call("GET", path, "workflow:read", absent_ok=True)
    if workflow is None:
        raise SetupFailed(f"n8n has no workflow {workflow_id!r} (404)")
    if not isinstance(workflow, dict):
        raise SetupFailed(f"n8n answered workflow {workflow_id!r} with something else")
    name = str(workflow.get("name", workflow_id))
    settings = dict(workflow.get("settings") or {})
    if settings.get("errorWorkflow") == error_id:
        report.steps.append(Step("exists", "error workflow of", name, workflow_id, "already set"))
        return
    settings["errorWorkflow"] = error_id
    body = {k: workflow[k] for k in ("name", "nodes", "connections") if k in workflow}
    n8n.call("PUT", path, "workflow:update", body={**body, "settings": settings})
    report.steps.append(Step("updated", "error workflow of", name, workflow_id, "set"))
