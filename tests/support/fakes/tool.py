"""What every fake tool shares: the requests it saw, faults queued by a test, an intercept."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from flowledger.connectors.base import Settings


class FakeTool:
    kind: str  # the registry's name for the tool faked
    base_url = "http://tool.test"
    list_path = "/"

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.faults: list[httpx.Response] = []  # answered in turn before anything else
        # consulted on every request; answers when it returns a response
        self.intercept: Callable[[httpx.Request], httpx.Response | None] | None = None
        # changes made just before the n-th request of the list (1 is the first) is answered:
        # the list changing underneath a walk, between two of its pages
        self.before_list: dict[int, Callable[[], Any]] = {}

    def settings(self, **kw: Any) -> Settings:
        return Settings(base_url=self.base_url, **kw)

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self.handler))

    def inject(self, response: httpx.Response) -> None:
        self.faults.append(response)

    def list_requests(self) -> list[httpx.Request]:
        return [r for r in self.requests if r.url.path == self.list_path]

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.faults:
            return self.faults.pop(0)
        if request.url.path == self.list_path:
            change = self.before_list.pop(len(self.list_requests()), None)
            if change is not None:
                change()
        if self.intercept is not None:
            answer = self.intercept(request)
            if answer is not None:
                return answer
        return self.serve(request)

    def serve(self, request: httpx.Request) -> httpx.Response:
        raise NotImplementedError
