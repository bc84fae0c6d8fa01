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
import re
import secrets
import threading
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..config import CONFIG_FILE
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


@dataclass
class Auth:
    """Who may do what: ``users`` maps names to hashes; ``private`` gates reading too."""

    users: Mapping[str, str] = field(default_factory=dict)
    private: bool = False
    _verified: dict[bytes, str] = field(default_factory=dict, repr=False)
    _key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def enabled(self) -> bool:
        return bool(self.users)

    def user(self, authorization: str | None) -> str | None:
        """The user an ``Authorization: Basic …`` header proves, or None."""
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
        if not self.private:
            return True
        if not self.users:
            return is_loopback(client_host)
        return self.user(authorization) is not None

    def may_write(self, authorization: str | None, client_host: str | None) -> bool:
        """Writes need a login when users exist; otherwise only loopback clients may write."""
        if self.users:
            return self.user(authorization) is not None
        return is_loopback(client_host)

    def challenge(self) -> dict[str, str]:
        return {"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'}


def save_user(root: Path, user: str, password_hash: str) -> Path:
    """Add or replace ``user`` in ``[server.users]`` of the store's deepfield.toml."""
    if not USER_RE.match(user):
        raise ConfigError(f"user name {user!r} is not allowed",
                          "use letters, digits, '.', '_' and '-' (at most 64)")
    path = root / CONFIG_FILE
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    lines = text.splitlines()
    entry = f'{user} = "{password_hash}"'
    header = next((i for i, line in enumerate(lines) if line.strip() == "[server.users]"), None)
    if header is None:
        lines += ["", "[server.users]", entry]
    else:
        end = next((i for i in range(header + 1, len(lines))
                    if lines[i].lstrip().startswith("[")), len(lines))
        keep = [line for line in lines[header + 1:end]
                if line.split("=", 1)[0].strip().strip('"') != user]
        lines = [*lines[:header + 1], entry, *keep, *lines[end:]]
    new_text = "\n".join(lines).lstrip("\n") + "\n"
    try:
        tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} would not be valid TOML after adding {user}: {exc}") from None
    atomic_write(path, new_text.encode("utf-8"))
    return path
