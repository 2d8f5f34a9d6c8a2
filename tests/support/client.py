"""The Python client against the in-process receiver (:class:`tests.support.receiver.Api`):
httpx transports that hand each request to the app's own client in its event loop, and one
that loses answers on purpose."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from tests.support.receiver import Api


async def _forward(api: Api, request: httpx.Request) -> httpx.Response:
    response = await api.client.send(request)
    await response.aread()
    return httpx.Response(response.status_code, headers=response.headers, content=response.content)


@dataclass
class ToApi(httpx.BaseTransport):
    """A sync transport to ``api``. ``lose(request)`` true: the request reaches the ledger,
    and its answer is lost (a read timeout); every request and answer is kept in ``seen``."""

    api: Api
    lose: Callable[[httpx.Request], bool] = lambda request: False
    seen: list[tuple[httpx.Request, httpx.Response | None]] = field(default_factory=list)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.api.portal.call(_forward, self.api, request)
        if self.lose(request):
            self.seen.append((request, None))
            raise httpx.ReadTimeout("the answer was lost", request=request)
        self.seen.append((request, response))
        return response


@dataclass
class AsyncToApi(httpx.AsyncBaseTransport):
    """An async transport to ``api``, for a client running in the app's own event loop
    (``api.portal.call``)."""

    api: Api

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await _forward(self.api, request)


def losing_first(call: str) -> Callable[[httpx.Request], bool]:
    """Loses the answer of the first request whose path ends with ``/call``."""
    lost: list[bool] = []

    def lose(request: httpx.Request) -> bool:
        if request.url.path.endswith(f"/{call}") and not lost:
            lost.append(True)
            return True
        return False

    return lose
