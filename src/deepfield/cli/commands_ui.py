"""``deepfield ui``: serve the store and open its memory console in the browser."""

from __future__ import annotations

import sys
import threading
import webbrowser
from pathlib import Path
from typing import Any

import click

from .app import app, json_option, print_json
from .commands_serve import (
    DEFAULT_PORT,
    _bind,
    _llm_config,
    _serve,
    _store_settings,
    _tls,
    _url,
    _warn_clear_logins,
    log_level_option,
    tls_options,
)


@app.command("ui")
@click.argument("store", required=False, type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to listen on (writes need users from other hosts).")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535),
              help="Port (0: a free one, printed at start).")
@click.option("--open/--no-open", "open_browser", default=True, show_default=True,
              help="Open the console in the default web browser.")
@log_level_option
@tls_options
@json_option
@click.pass_context
def ui_cmd(ctx: click.Context, store: Path | None, host: str, port: int, open_browser: bool,
           log_level: str, tls_cert: Path | None, tls_key: Path | None,
           as_json: bool) -> None:
    """Serve STORE and open its memory console (http://HOST:PORT/ui/) in the browser.

    The console lists fields and pages, shows search and research results with their
    evidence, edits pages, resolves the review queue, previews and runs forgetting,
    restores archived pages and shows each field's index status. It is the `deepfield
    serve` server (one process), so the HTTP API is there too; writes follow its rules.
    """
    from ..server import create_app

    tls = _tls(tls_cert, tls_key)
    env = _store_settings(ctx, store)
    opened = env.store()
    sock = _bind(host, port)
    url = _url(sock, host, "/ui/", tls)
    users = opened.config.server.users
    info: dict[str, Any] = {"url": url, "store": env.where(absolute=True),
                            "fields": opened.field_names(), "auth": bool(users),
                            "writes": "login" if users else "loopback only"}
    if as_json:
        print_json(info)
    else:
        click.echo(f"memory console for {info['store']} at {url} (writes: {info['writes']}; "
                   "Ctrl-C stops it)", err=True)
    _warn_clear_logins(users, host, tls)
    sys.stdout.flush()
    if open_browser:  # once the server has had a moment to start accepting
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    _serve(create_app(opened, llm_config=_llm_config(env.store_path)), sock, log_level,
           tls=tls)
