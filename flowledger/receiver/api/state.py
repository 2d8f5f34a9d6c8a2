"""What a running receiver holds: its store, services, engine, token cache and limits."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from flowledger.domain.checkpoints import Signer
from flowledger.receiver.api.bounded import InFlight
from flowledger.receiver.api.tokens import TokenCache
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store, check_schema
from flowledger.storage.unit_of_work import Guard, Work

if TYPE_CHECKING:
    from flowledger.receiver.api.calls import CallRequest
    from flowledger.receiver.api.reply import Reply


class Engine(Protocol):
    """What the API asks of the engine that writes the workflow calls
    (:class:`flowledger.receiver.engine.runtime.Engine`): to start and stop with the app; to
    write a workflow call and give its answer; to write what the API writes itself (the
    tokens' last use, a signed read's signature, a person's action on a hold, once per
    ``Idempotency-Key``) through its group commit; and to redact a new signing token's secret
    in every process it runs."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def write(self, call: CallRequest) -> Awaitable[Reply]: ...

    async def commit(self, actor: str, work: Work[Any], guard: Guard | None = None) -> Any: ...

    async def commit_keyed(
        self, actor: str, work: Work[Any], *, token_id: int, key: str, fingerprint: str, ttl: float
    ) -> bool: ...

    def add_secrets(self, values: list[str]) -> None: ...


@dataclass
class ReceiverState:
    store: Store
    ledger: Ledger
    engine: Engine
    tokens: TokenCache
    secret: bytes | None
    body_limit: int
    idempotency_ttl: float  # seconds
    signature_window: float  # seconds
    # Seconds a read this process needs before it answers waits for the database: the
    # check of /readyz, the token list's refresh (``[receiver] read_deadline``).
    read_deadline: float
    signer: Signer | None = None  # signs the checkpoints the proof routes serve
    # (token id, key) of the Idempotency-Key requests this process is running now.
    in_flight: set[tuple[int, str]] = field(default_factory=set)
    # One token-cache reload at a time, however many requests find it stale together, and
    # one readiness check (each request waits for it at most ``read_deadline``).
    token_reload: InFlight = field(init=False)
    ready_check: InFlight = field(init=False)

    def __post_init__(self) -> None:
        self.token_reload = InFlight(self.tokens.reload)
        self.ready_check = InFlight(lambda: check_schema(self.store))
