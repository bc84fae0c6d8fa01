"""Even out keep-alive connections over the worker processes of ``deepfield serve``.

Each worker listens on its own ``SO_REUSEPORT`` socket (workers.py) and the kernel places every
new connection by a hash of the client's address. Agents keep their connection open, so with
few clients the split is often uneven: 8 clients over 2 workers land 4/4 only about a quarter
of the time (binomially), and 6/2 or worse in another quarter. The busier worker then sets the
tail while the other core idles (``bench/serve_load.py --no-balance``, hybrid, 10k pages: p95
54-57 ms at 5/3 against 48.5 ms at 4/4; balanced, runs that began at 6/2 ended 4/4 with p95
50.8-51.6 ms, warm-up included).

The remedy is the one HTTP load balancers use: every worker publishes how many connections it
holds in a small shared array; a worker holding more than its fair share (all connections
divided by the workers, rounded up) answers one request with ``Connection: close``. The client
reconnects for its next request (HTTP/1.1 clients do this on their own), the kernel places the
new connection afresh, and within a few requests the split is even. Nothing is dropped: the
response is complete, and a connection is only closed between requests.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableSequence
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

QUIET_S = 0.05
"""After closing a connection, a worker waits this long before closing another: its own count
drops only once the client has gone, and two closes at once could overshoot."""


class ConnectionBalance:
    """One worker's view of the shared connection counts (``counts[slot]`` is its own)."""

    def __init__(self, counts: MutableSequence[int], slot: int,
                 open_connections: Callable[[], int]) -> None:
        self.counts = counts
        self.slot = slot
        self.open_connections = open_connections
        self._quiet_until = 0.0
        self.closed = 0
        """Connections this worker has closed to even out the split."""

    def publish(self) -> int:
        """Write this worker's open connections into the shared counts; returns them."""
        mine = self.open_connections()
        self.counts[self.slot] = mine
        return mine

    def should_close(self) -> bool:
        """Publish this worker's count; True if it holds more than its fair share and has
        not just closed one (the caller then closes the current connection)."""
        mine = self.publish()
        now = time.monotonic()
        if now < self._quiet_until:
            return False
        total = sum(self.counts)
        fair = -(-total // len(self.counts))  # rounded up: 5 over 2 workers may split 3/2
        if mine <= fair:
            return False
        self._quiet_until = now + QUIET_S
        self.closed += 1
        return True


class RebalanceMiddleware:
    """ASGI middleware adding ``Connection: close`` to a response when the worker's
    :class:`ConnectionBalance` says so; every other message passes unchanged."""

    def __init__(self, app: ASGIApp, balance: ConnectionBalance) -> None:
        self.app = app
        self.balance = balance

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("http_version") == "1.0":
            await self.app(scope, receive, send)
            return

        async def send_balanced(message: Message) -> None:
            if message["type"] == "http.response.start" and self.balance.should_close():
                headers = [*message.get("headers", []), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_balanced)
