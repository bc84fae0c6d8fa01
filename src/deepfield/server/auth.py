"""HTTP Basic authentication for the servers, with salted scrypt password hashes.

Users live in the store's ``deepfield.toml`` as ``[server.users]`` name = hash lines, written by
``deepfield passwd USER``; plain passwords are never stored. The spec's rule is applied by
:meth:`Auth.may_write`: with users configured every write needs a valid login; without any,
writes are only accepted from the loopback interface.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import ipaddress
import logging
import os
import re
import secrets
import threading
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..config import CONFIG_FILE, load_config
from ..errors import ConfigError
from ..fsutil import atomic_write

SCHEME = "scrypt"
SCRYPT_N, SCRYPT_R, SCRYPT_P = 1 << 14, 8, 1
REALM = "deepfield"
USER_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def hash_password(password: str, *, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P) -> str:
    """A self-describing salted hash: ``scrypt$N$r$p$salt$digest`` (base64)."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=32)
    b64 = base64.b64encode
    return f"{SCHEME}${n}${r}${p}${b64(salt).decode()}${b64(digest).decode()}"


def verify_password(password: str, stored: str) -> bool:
    """True if ``password`` matches ``stored`` (a :func:`hash_password` string)."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != SCHEME:
            return False
        expected = base64.b64decode(digest, validate=True)
        actual = hashlib.scrypt(
            password.encode("utf-8"), salt=base64.b64decode(salt, validate=True),
            n=int(n), r=int(r), p=int(p), dklen=len(expected),
        )
    except (ValueError, binascii.Error):
        return False
    return hmac.compare_digest(actual, expected)


@functools.cache
def _decoy_hash() -> str:
    return hash_password(secrets.token_hex(16))


def is_loopback(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and IPv4-mapped loopback; False for anything else or None."""
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def is_local_name(host: str) -> bool:
    """True if a ``Host`` header (``name[:port]``) names this machine's loopback interface."""
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1:].split("]", 1)[0]
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    return name == "localhost" or name.endswith(".localhost") or is_loopback(name)


RELOAD_CHECK_S = 0.5
"""How often a server looks at its users file (one ``stat``): a user added or removed by
``deepfield passwd`` or an edit counts within a second, well inside the 2 s documented."""


@dataclass
class Auth:
    """Who may do what: ``users`` maps names to hashes; ``private`` gates reading too.
    With a ``source`` (the store's deepfield.toml, see :meth:`for_store`), both are read again
    whenever that file changes; a file that cannot be read keeps the last good settings, so a
    half-saved edit never opens the server."""

    users: Mapping[str, str] = field(default_factory=dict)
    private: bool = False
    source: Path | None = None
    _verified: dict[bytes, str] = field(default_factory=dict, repr=False)
    _key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stamp: tuple[int, int, int] | None = field(default=None, repr=False)
    _next_check: float = field(default=0.0, repr=False)

    @classmethod
    def for_store(cls, root: Path) -> Auth:
        """The logins of the store at ``root``, kept in step with its deepfield.toml."""
        auth = cls(source=root / CONFIG_FILE)
        auth.reload()
        return auth

    def reload(self) -> None:
        """Read the users file again if it changed since it was last read."""
        if self.source is None:
            return
        try:
            info = os.stat(self.source)
        except OSError:
            return  # gone or unreadable: keep the last good settings
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        if stamp == self._stamp:
            return
        try:
            server = load_config(self.source.parent).server
        except ConfigError as exc:
            logging.getLogger("deepfield.server").warning(
                "%s; keeping the logins read before", exc)
            return
        with self._lock:
            self.users, self.private = dict(server.users), server.private
            self._verified.clear()  # a changed password must be checked again
            self._stamp = stamp

    def _fresh(self) -> None:
        now = time.monotonic()
        if self.source is not None and now >= self._next_check:
            self._next_check = now + RELOAD_CHECK_S
            self.reload()

    @property
    def enabled(self) -> bool:
        self._fresh()
        return bool(self.users)

    def user(self, authorization: str | None) -> str | None:
        """The user an ``Authorization: Basic …`` header proves, or None."""
        self._fresh()
        if not authorization or not self.users:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "basic":
            return None
        # scrypt is slow on purpose; remember headers already verified (keyed by an HMAC, so
        # the plain credentials are not kept in memory).
        tag = hmac.new(self._key, token.strip().encode(), hashlib.sha256).digest()
        with self._lock:
            known = self._verified.get(tag)
        if known is not None and known in self.users:
            return known
        try:
            decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return None
        name, sep, password = decoded.partition(":")
        stored = self.users.get(name)
        if stored is None:  # as slow as a wrong password, so names cannot be probed
            verify_password(password, _decoy_hash())
            return None
        if not sep or not verify_password(password, stored):
            return None
        with self._lock:
            if len(self._verified) > 1024:
                self._verified.clear()
            self._verified[tag] = name
        return name

    def may_read(self, authorization: str | None, client_host: str | None = None) -> bool:
        """Anyone, unless ``private``: then a valid login, or (with no users to log in as)
        only loopback clients. A private store never falls open for want of users."""
        self._fresh()
        if not self.private:
            return True
        if not self.users:
            return is_loopback(client_host)
        return self.user(authorization) is not None

    def may_write(self, authorization: str | None, client_host: str | None) -> bool:
        """Writes need a login when users exist; otherwise only loopback clients may write."""
        self._fresh()
        if self.users:
            return self.user(authorization) is not None
        return is_loopback(client_host)

    def challenge(self) -> dict[str, str]:
        return {"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'}


def check_user_name(user: str) -> None:
    if not USER_RE.match(user):
        raise ConfigError(f"user name {user!r} is not allowed",
                          "use letters, digits, '.', '_' and '-' (at most 64)")


def with_user(text: str, user: str, password_hash: str | None, where: str) -> str:
    """``text`` (a deepfield.toml) with ``user`` set to ``password_hash`` in
    ``[server.users]``, or removed when it is None; the rest of the file is kept as written
    (comments included). ConfigError when there is no such user to remove, or when the result
    would not be valid TOML."""
    check_user_name(user)
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if line.strip() == "[server.users]"), None)
    entry = [] if password_hash is None else [f'{user} = "{password_hash}"']
    if header is None:
        if password_hash is None:
            raise ConfigError(f"no user {user!r} in {where}", "it has no [server.users]")
        lines += ["", "[server.users]", *entry]
    else:
        end = next((i for i in range(header + 1, len(lines))
                    if lines[i].lstrip().startswith("[")), len(lines))
        keep = [line for line in lines[header + 1:end]
                if line.split("=", 1)[0].strip().strip('"') != user]
        if password_hash is None and len(keep) == end - header - 1:
            names = [line.split("=", 1)[0].strip().strip('"') for line in keep
                     if "=" in line and not line.lstrip().startswith("#")]
            raise ConfigError(f"no user {user!r} in {where}",
                              f"its users: {', '.join(names) or 'none'}")
        lines = [*lines[:header + 1], *entry, *keep, *lines[end:]]
    new_text = "\n".join(lines).lstrip("\n") + "\n"
    try:
        tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where} would not be valid TOML after changing {user}: {exc}"
                          ) from None
    return new_text


def save_user(root: Path, user: str, password_hash: str | None) -> Path:
    """Add or replace ``user`` in ``[server.users]`` of the store's deepfield.toml (None:
    remove the user)."""
    path = root / CONFIG_FILE
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    atomic_write(path, with_user(text, user, password_hash, str(path)).encode("utf-8"))
    return path
