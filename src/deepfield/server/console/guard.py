"""The console's security: the HTTP API's rules, a per-session CSRF token, and headers.

Reads follow the HTTP API (:func:`deepfield.server.app.deny_read`: open on loopback, a login
for a private store). Every POST is checked in this order:

1. any ``Origin`` (or ``Sec-Fetch-Site: cross-site``) that is not the console's own: 403;
2. the form's ``csrf`` value must equal the session cookie (a random token set on the first
   visit, ``HttpOnly``, ``SameSite=Strict``): 403 otherwise. A page on another site can
   neither read the cookie nor send it, so it cannot forge a form post;
3. the HTTP API's write rule (:func:`deepfield.server.app.deny_write`): the Basic login when
   users exist (401 with the browser's login prompt), loopback only when there are none.

Any request carrying a foreign ``Origin`` is refused, reads included (a script on another
site cannot ``fetch`` the console). Every page is sent with a Content-Security-Policy that
allows no script at all: the console has none, so memory text that slipped through escaping
could still not run.
"""

from __future__ import annotations

import hmac
import json
import secrets
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from ..app import deny_browser, deny_read, deny_write

COOKIE = "deepfield_console"
CSRF_FIELD = "csrf"
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class Refused(Exception):  # noqa: N818 (a refusal, not an error of the server)
    """A request the console will not serve: an HTML error page with this status."""

    def __init__(self, status: int, message: str, hint: str = "",
                 headers: dict[str, str] | None = None, *, login: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.hint = hint
        self.headers = headers or {}
        self.login = login


def session_token(request: Request) -> str | None:
    """The session's token from its cookie (None before the first visit)."""
    token = request.cookies.get(COOKIE)
    return token if token and 20 <= len(token) <= 100 else None


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _refusal(response: Response, *, login: bool = False) -> Refused:
    """The HTTP API's JSON error as a Refused (same status, message, hint, headers)."""
    body = bytes(response.body)
    error = json.loads(body)["error"] if body else {}
    headers = {k: v for k, v in response.headers.items()
               if k.lower() == "www-authenticate"}
    return Refused(response.status_code, str(error.get("message", "refused")),
                   str(error.get("hint", "")), headers,
                   login=login and response.status_code == 401)


def foreign_origin(request: Request) -> str | None:
    """The request's ``Origin`` when it is not this server itself (else None)."""
    origin = request.headers.get("origin")
    host = request.headers.get("host", "").lower()
    if origin is None:
        return None
    if origin == "null" or urlsplit(origin).netloc.lower() != host:
        return origin
    return None


def check_read(request: Request) -> None:
    """Raise a Refused unless the console may be read by this request."""
    if (origin := foreign_origin(request)) is not None:
        raise Refused(403, f"requests from the web origin {origin} are refused",
                      "open the console itself at /ui/")
    if (denied := deny_read(request)) is not None:
        raise _refusal(denied, login=True)


def check_origin(request: Request) -> None:
    """Raise a Refused for a write sent from another site."""
    if (origin := foreign_origin(request)) is not None or \
            request.headers.get("sec-fetch-site") == "cross-site":
        raise Refused(403, f"a form posted from another site ({origin or 'cross-site'}) "
                      "is refused", "use the console's own pages")


def check_write(request: Request, form_token: str | None) -> None:
    """Raise a Refused unless this form post may write (see the module docstring)."""
    check_origin(request)
    if (denied := deny_browser(request, write=True)) is not None:
        raise _refusal(denied)
    expected = session_token(request)
    if not expected or not form_token or not hmac.compare_digest(expected, form_token):
        raise Refused(403, "the form's session token is missing or stale",
                      "reload the page and submit the form again")
    if (denied := deny_write(request)) is not None:
        raise _refusal(denied, login=True)


def logged_in(request: Request) -> bool:
    """Whether the request carries a valid Basic login (always False without users)."""
    auth = request.app.state.auth
    return auth.enabled and auth.user(request.headers.get("authorization")) is not None


def secure(response: Response, request: Request) -> Response:
    """Add the security headers, and the session cookie on a first visit."""
    for key, value in SECURITY_HEADERS.items():
        response.headers.setdefault(key, value)
    if session_token(request) is None:
        token = request.state.console_token if hasattr(request.state, "console_token") \
            else new_token()
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/ui",
                            secure=request.url.scheme == "https")
    return response


def token_for(request: Request) -> str:
    """The CSRF token to put in this response's forms (the one its cookie will carry)."""
    token = session_token(request)
    if token is None:
        if not hasattr(request.state, "console_token"):
            request.state.console_token = new_token()
        token = str(request.state.console_token)
    return token
