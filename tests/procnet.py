"""Which process holds which TCP sockets, from Linux's /proc: for tests and benchmarks of
``deepfield serve --workers`` (how connections spread over the worker processes)."""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from pathlib import Path


def port_sockets(pid: int, port: int) -> Counter[str]:
    """How many TCP sockets on local ``port`` process ``pid`` holds, by state ("0A"
    listening, "01" established), from /proc."""
    states: dict[str, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                parts = line.split()
                if int(parts[1].rsplit(":", 1)[1], 16) == port:
                    states[parts[9]] = parts[3]
    held: Counter[str] = Counter()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in states:
                    held[states[target[8:-1]]] += 1
    return held


def listening_workers(parent: int, port: int) -> list[int]:
    try:
        children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    except OSError:
        return []
    return [pid for pid in map(int, children) if port_sockets(pid, port)["0A"]]


def connections_per_worker(parent: int, port: int) -> list[int]:
    """Established connections held by each listening worker of ``parent``, most first."""
    return sorted((port_sockets(pid, port)["01"] for pid in listening_workers(parent, port)),
                  reverse=True)
