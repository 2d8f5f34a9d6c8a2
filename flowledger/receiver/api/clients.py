"""What one client address holds at once — connections (:mod:`flowledger.receiver.connections`)
or requests in flight (:mod:`flowledger.receiver.api.guard`) — capped by
``[receiver] max_connections_per_client``, so that one client cannot take every connection
``max_connections`` allows and starve the others. One event loop counts, so no lock."""

from __future__ import annotations

from flowledger.receiver.api.errors import ApiError
from flowledger.receiver.api.reply import Reply


class Clients:
    """How many each client address holds now, at most ``cap`` each; ``refusal`` is the answer
    for one over it (429, and the connection closed)."""

    __slots__ = ("cap", "held", "refusal")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.held: dict[str, int] = {}
        self.refusal = Reply.error(
            ApiError(
                429,
                "too_many_connections",
                f"this client already holds {cap} connections or requests at once, the most "
                "one client may",
                headers={"Retry-After": "1", "Connection": "close"},
            )
        )

    def take(self, address: str) -> bool:
        """One more for ``address``; False, and nothing taken, when it holds ``cap`` already."""
        held = self.held.get(address, 0)
        if held >= self.cap:
            return False
        self.held[address] = held + 1
        return True

    def give_back(self, address: str) -> None:
        held = self.held[address] - 1
        if held:
            self.held[address] = held
        else:
            del self.held[address]
