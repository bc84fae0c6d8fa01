"""Several server processes on one port, each accepting on its own socket (``SO_REUSEPORT``).

uvicorn's ``--workers`` shares one listening socket among its processes. Whichever process
wakes first accepts every pending connection, so a burst of keep-alive clients (agents keep
their connection open) lands on one process while the others idle. Measured with
bench/serve_load.py (10k pages, 8 clients, 2 workers): one process served about 7 of every 8
searches, and the server did ~210 searches/s instead of the ~290 that two balanced processes do.

With ``SO_REUSEPORT`` (Linux 3.9+) every worker binds its own listening socket to the same
address and the kernel spreads new connections over them. A worker that dies takes its socket
out of the group, so no connection waits on a socket nobody accepts; its replacement binds a
new one. The kernel places connections by a hash, so a few keep-alive clients may still split
unevenly; balance.py evens them out. The parent keeps a bound, non-listening socket only to
hold the port (and to learn it, for port 0). Where the option is missing, or does not balance
(macOS, BSD), the shared socket of uvicorn's supervisor is used instead.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import MutableSequence
from multiprocessing.process import BaseProcess
from typing import Any

from ..errors import ConfigError

log = logging.getLogger("deepfield.server")

STARTUP_FAILURE = 3
"""uvicorn's exit status for a worker that could not start (bad app, TLS files, socket)."""
RESTART_WINDOW_S = 10.0
"""Two workers dying this soon after they started, within a minute, stop the server: they
would only crash again."""
BACKLOG = 2048


def balances_connections() -> bool:
    """True where ``SO_REUSEPORT`` spreads connections over sockets (Linux)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def bound_socket(host: str, port: int, *, reuse_addr: bool,
                 reuse_port: bool = False) -> socket.socket:
    """A TCP socket bound to ``host:port`` (IPv6 when the host has a colon), closed again
    if binding fails."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if reuse_addr:  # TIME_WAIT connections of an earlier server do not block the port
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        # Accepted connections inherit this: without it, a response written as headers then
        # body waits for the client's delayed ACK (~40 ms a request).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def claim_port(host: str, port: int) -> int:
    """``port`` (a free one for 0) after checking that nothing listens on it: a socket bound
    without SO_REUSEPORT fails if anything holds the port, while one with it would join the
    group of another deepfield server (same user) and silently share its clients."""
    with bound_socket(host, port, reuse_addr=True) as probe:
        return int(probe.getsockname()[1])


def reuse_port_socket(host: str, port: int, *, listen: bool) -> socket.socket:
    """A TCP socket bound to ``host:port`` with ``SO_REUSEPORT`` (listening if asked). The
    parent's non-listening holder has no ``SO_REUSEADDR``: with it, Linux would let another
    server's :func:`claim_port` probe bind beside it while the workers start (or are all
    being replaced), and that server would then join this one's port."""
    sock = bound_socket(host, port, reuse_addr=listen, reuse_port=True)
    if listen:
        try:
            sock.listen(BACKLOG)
        except OSError:
            sock.close()
            raise
    return sock


def _worker_main(config: Any, host: str, port: int, slot: int = 0,
                 counts: MutableSequence[int] | None = None) -> None:
    """A worker process: its own listening socket on the shared port, then uvicorn. It stops
    when the supervisor dies, even by SIGKILL (an orphan would keep serving, unsupervised,
    and hold the port against a restart). ``counts`` (shared by all workers, ``slot`` this
    one's) evens out keep-alive connections (balance.py)."""
    import uvicorn

    from .balance import ConnectionBalance, RebalanceMiddleware

    parent = multiprocessing.parent_process()
    if parent is not None:
        def stop_with_parent() -> None:
            parent.join()
            os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's graceful shutdown

        threading.Thread(target=stop_with_parent, daemon=True,
                         name="deepfield-parent-watch").start()
    config.configure_logging()
    try:
        sock = reuse_port_socket(host, port, listen=True)
    except OSError as exc:
        log.error("worker cannot listen on %s:%s: %s", host, port, exc)
        sys.exit(STARTUP_FAILURE)
    server = uvicorn.Server(config)
    if counts is not None and len(counts) > 1:
        config.load()  # uvicorn loads the app only if it is not loaded yet
        connections = server.server_state.connections
        balance = ConnectionBalance(counts, slot, lambda: len(connections))
        config.loaded_app = RebalanceMiddleware(config.loaded_app, balance)

        async def publish() -> None:
            balance.publish()

        # Every second as well, so an idle worker's count does not go stale between requests.
        config.callback_notify, config.timeout_notify = publish, 1
    server.run(sockets=[sock])


class Supervisor:
    """Runs ``workers`` processes of ``config`` (an app-factory import string) on the port
    that ``holder`` is bound to, restarting one that dies, until SIGINT or SIGTERM.
    ``balance=False`` leaves keep-alive connections where the kernel put them (for measuring
    what balance.py buys: bench/serve_load.py --no-balance)."""

    def __init__(self, config: Any, holder: socket.socket, workers: int, *,
                 balance: bool = True) -> None:
        self.config = config
        self.host, self.port = holder.getsockname()[:2]
        self.holder = holder
        self.workers = workers
        self.should_exit = threading.Event()
        self.failed: str | None = None
        self._context = multiprocessing.get_context("spawn")
        # Open connections per worker, written by each worker (balance.py).
        self.counts: MutableSequence[int] | None = (
            self._context.RawArray("i", workers) if balance else None)
        self._procs: list[tuple[BaseProcess, float]] = []
        self._quick_deaths: list[float] = []

    def _start(self, slot: int) -> tuple[BaseProcess, float]:
        if self.counts is not None:
            self.counts[slot] = 0  # a dead worker's connections died with it
        proc = self._context.Process(target=_worker_main,
                                     args=(self.config, self.host, self.port, slot,
                                           self.counts),
                                     name="deepfield-serve-worker")
        proc.start()
        return proc, time.monotonic()

    def _watch(self) -> None:
        for slot, (proc, started) in enumerate(self._procs):
            if proc.is_alive() or self.should_exit.is_set():
                continue
            proc.join()
            now = time.monotonic()
            if now - started < RESTART_WINDOW_S:
                self._quick_deaths.append(now)
            self._quick_deaths = [t for t in self._quick_deaths if now - t < 6 * RESTART_WINDOW_S]
            if proc.exitcode == STARTUP_FAILURE or len(self._quick_deaths) >= 2:
                self.failed = f"a worker process exited with status {proc.exitcode}"
                self.should_exit.set()
                return
            log.warning("worker %s exited with status %s; starting another", proc.pid,
                        proc.exitcode)
            self._procs[slot] = self._start(slot)

    def run(self) -> None:
        """Serve until told to stop; a worker that cannot start stops it with ConfigError."""
        # A SIGINT ignored by whoever started us (`nohup … &`) stays ignored.
        previous = {sig: signal.signal(sig, lambda *_: self.should_exit.set())
                    for sig in (signal.SIGINT, signal.SIGTERM)
                    if signal.getsignal(sig) is not signal.SIG_IGN}
        try:
            for slot in range(self.workers):  # one by one: a failed start stops the rest
                self._procs.append(self._start(slot))
            while not self.should_exit.wait(0.25):
                self._watch()
        finally:
            for proc, _ in self._procs:
                if proc.is_alive():
                    proc.terminate()  # uvicorn shuts down gracefully on SIGTERM
            deadline = time.monotonic() + 15
            for proc, _ in self._procs:
                proc.join(max(0.0, deadline - time.monotonic()))
                if proc.is_alive():
                    proc.kill()
                    proc.join()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            with contextlib.suppress(OSError):
                self.holder.close()
        if self.failed:
            raise ConfigError(f"the server stopped: {self.failed}",
                              "run with --workers 1 to see the error, or --log-level info")
