"""The indexer lease: one object in the bucket naming the replica that keeps indexes current.

Replicas of a store share one LanceDB dataset per field, and one of them at a time writes
it. The writer holds ``.deepfield/indexer-lease.json``: it creates the object with
``If-None-Match`` and renews it every TTL/3 with ``If-Match`` on the ETag it last wrote, so
two replicas can never both believe they hold it. A lease not renewed for TTL seconds, by
the bucket's own clock (the object's Last-Modified against the Date of the reply, so hosts'
clocks do not matter), is expired, and any replica may take it over, again with ``If-Match``
(only one wins). A holder that stops cleanly deletes the object so the next one takes over
at once; one that dies is replaced within TTL plus one poll.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass

from .objects import Bucket, ObjectConflictError

LEASE_OBJECT = ".deepfield/indexer-lease.json"
LEASE_TTL_S = 15.0
"""A holder that has not renewed for this long is presumed dead."""
CLOCK_RESOLUTION_S = 1.0
"""Last-Modified and Date come in whole seconds: an age is only known to within one."""


@dataclass
class LeaseState:
    holder: str | None
    mine: bool
    etag: str | None = None
    age_s: float = 0.0


class Lease:
    """This process's claim on the indexer lease of one store."""

    def __init__(self, bucket: Bucket, *, ttl_s: float = LEASE_TTL_S,
                 holder: str | None = None) -> None:
        self.bucket = bucket
        self.ttl_s = ttl_s
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._etag: str | None = None
        self._renewed = 0.0
        self._refused = -1e9
        self.seen: str | None = None
        """The holder the bucket named when this process last asked (for messages)."""

    @property
    def held(self) -> bool:
        """Whether this process holds the lease (and renewed it within the TTL)."""
        return self._etag is not None and time.monotonic() - self._renewed < self.ttl_s

    def _body(self) -> bytes:
        return json.dumps({"holder": self.holder, "ttl_s": self.ttl_s,
                           "renewed_at": time.time()}).encode()

    def state(self) -> LeaseState:
        """Who holds the lease now, as the bucket says."""
        got = self.bucket.get(LEASE_OBJECT)
        if got is None:
            return LeaseState(None, False)
        try:
            holder = str(json.loads(got.data).get("holder"))
        except (ValueError, AttributeError):
            holder = "?"
        self.seen = holder
        return LeaseState(holder, holder == self.holder, got.etag,
                          max(0.0, got.server_time - got.modified))

    def acquire(self) -> bool:
        """Take, renew or keep the lease if this process may; whether it holds it now. A
        process that found it held asks the bucket again only after TTL/5 (searches may ask
        often; a takeover then happens within TTL * 1.2 plus one poll)."""
        now = time.monotonic()
        if self.held and now - self._renewed < self.ttl_s / 3:
            return True
        if self._etag is None and now - self._refused < self.ttl_s / 5:
            return False
        try:
            if self._etag is not None:
                self._write(self._etag)  # renew what we wrote last
                return True
        except ObjectConflictError:
            self._etag = None  # someone took it over: we had stalled past the TTL
        current = self.state()
        try:
            if current.holder is None:
                self._write(None)
            elif current.mine or current.age_s > self.ttl_s + CLOCK_RESOLUTION_S:
                self._write(current.etag)
            else:
                self._refused = now
                return False
        except ObjectConflictError:
            self._etag = None
            self._refused = now
            return False
        return True

    def _write(self, etag: str | None) -> None:
        started = time.monotonic()
        body = self._body()
        if etag is None:
            self._etag = self.bucket.put(LEASE_OBJECT, body, create=True)
        else:
            self._etag = self.bucket.put(LEASE_OBJECT, body, if_match=etag)
        self._renewed = started

    def release(self) -> None:
        """Give the lease up (so another replica takes over without waiting for the TTL)."""
        etag, self._etag = self._etag, None
        if etag is not None:
            with contextlib.suppress(ObjectConflictError):  # already taken over
                self.bucket.delete(LEASE_OBJECT, if_match=etag)
