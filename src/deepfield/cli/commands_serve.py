"""Commands that serve a store: ``serve`` (memoryfield HTTP), ``mcp`` (MCP) and ``passwd``."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from ..errors import ConfigError, StoreNotFoundError
from ..store_openers import url_scheme
from .app import Settings, app, json_option, print_json, settings, store_exists, warn

DEFAULT_PORT = 8765
MAX_AUTO_WORKERS = 4
DEFAULT_MCP_PORT = 8766


def _store_settings(ctx: click.Context, store: str | os.PathLike[str] | None) -> Settings:
    env = settings(ctx)
    if store is not None:
        env.close()
        chosen = Settings.of(os.fspath(store), env.embedder_name, env.embed_options)
        env.store_path, env.store_url = chosen.store_path, chosen.store_url
    if env.scheme() is None and not store_exists(env.store_path):  # ftp://: known ones named
        raise StoreNotFoundError(f"no store at {env.store_path}")
    return env


def project_store(store: str | None, environ: Mapping[str, str]) -> str | None:
    """STORE for ``deepfield mcp``: a relative folder is taken inside ``$CLAUDE_PROJECT_DIR``
    when that is set. Claude Code passes it to the servers of a project's ``.mcp.json``
    (which setup fills with the relative store, so the file can be committed) but starts them
    in the folder it was launched from, which may be a subfolder of the project. Where that
    folder holds no such store, the nearest folder above it with a ``.mcp.json`` and the
    store is taken (a session started in a subfolder may name the subfolder)."""
    base = environ.get("CLAUDE_PROJECT_DIR", "")
    if store is None or url_scheme(store) is not None or not base or \
            not Path(base).is_absolute():
        return store
    path = Path(store).expanduser()
    if path.is_absolute():
        return store
    first = Path(base) / path
    if store_exists(first):
        return str(first)
    for folder in Path(base).parents:
        if (folder / ".mcp.json").is_file():  # the nearest: the file Claude Code read
            return str(folder / path) if store_exists(folder / path) else str(first)
    return str(first)


def _bind(host: str, port: int, *, workers: int = 1) -> socket.socket:
    """The server's socket (port 0: a free one), so the URL is known before serving. Several
    workers on Linux each listen on a socket of their own (server/workers.py): this one only
    holds the port; otherwise it is the listening socket they share."""
    from ..server.workers import (
        balances_connections,
        bound_socket,
        claim_port,
        reuse_port_socket,
    )

    try:
        if workers > 1 and balances_connections():
            return reuse_port_socket(host, claim_port(host, port), listen=False)
        sock = bound_socket(host, port, reuse_addr=True)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}",
                          "choose another --port (0 picks a free one)") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


Tls = tuple[str, str] | None
"""(certificate file, private key file) to serve HTTPS, or None for plain HTTP."""


def _url(sock: socket.socket, host: str, path: str = "/", tls: Tls = None) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}{path}"


def tls_options(command: Any) -> Any:
    """``--tls-cert`` / ``--tls-key``: the spec asks for TLS wherever logins travel."""
    file = click.Path(exists=True, dir_okay=False, path_type=Path)
    command = click.option("--tls-key", type=file, default=None,
                           help="Private key (PEM) for --tls-cert.")(command)
    return click.option("--tls-cert", type=file, default=None,
                        help="Serve HTTPS with this certificate (PEM; needs --tls-key).")(command)


log_level_option = click.option(
    "--log-level", default="warning", show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]))
"""``--log-level`` of the servers (uvicorn's levels)."""


def _tls(cert: Path | None, key: Path | None) -> Tls:
    """The checked pair, or None; a bad pair is one clear error before anything listens."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ConfigError("--tls-cert and --tls-key go together", "give both, or neither")
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"cannot use {cert} with {key} for TLS: {exc}",
                          "give a PEM certificate and its matching private key") from None
    return str(cert), str(key)


def _warn_clear_logins(users: Any, host: str, tls: Tls) -> None:
    from ..server.auth import is_loopback

    if users and not tls and not (host == "localhost" or is_loopback(host)):
        warn(f"logins to {host} travel unencrypted: serve HTTPS with --tls-cert/--tls-key, "
             "or put a TLS proxy in front")


KEEP_ALIVE_S = 75
"""How long an idle keep-alive connection stays open. uvicorn's default (5 s) closes
connections that clients pausing a few seconds still hold, and a request sent as the server
closes one fails with "connection reset" (seen under bench/scale_replicas.py's load); longer
than the 60 s idle timeout of common load balancers, so they close first."""


def uvicorn_config(asgi: Any, log_level: str, workers: int = 1, tls: Tls = None) -> Any:
    import uvicorn

    return uvicorn.Config(asgi, log_level=log_level, lifespan="auto", access_log=False,
                          workers=workers, factory=workers > 1,
                          timeout_keep_alive=KEEP_ALIVE_S,
                          ssl_certfile=tls[0] if tls else None,
                          ssl_keyfile=tls[1] if tls else None)


def _serve(asgi: Any, sock: socket.socket, log_level: str, workers: int = 1,
           tls: Tls = None) -> None:
    """Run uvicorn on ``sock``: ``asgi`` in this process, or (workers > 1) ``asgi`` is an
    import string of an app factory that each worker process calls."""
    import uvicorn

    config = uvicorn_config(asgi, log_level, workers, tls)
    if workers > 1:
        from ..server.workers import Supervisor, balances_connections

        if balances_connections():
            Supervisor(config, sock, workers).run()
            return
        from uvicorn.supervisors import Multiprocess

        Multiprocess(config, sockets=[sock]).run()
    else:
        uvicorn.Server(config).run(sockets=[sock])


def worker_app() -> Any:
    """The app of one ``deepfield serve --workers N`` process (settings from the environment
    the parent set: DEEPFIELD_STORE, DEEPFIELD_EMBEDDER, DEEPFIELD_EMBED_*)."""
    from ..server import create_app
    from .settings import env_options

    env = Settings.of(os.environ["DEEPFIELD_STORE"], os.environ.get("DEEPFIELD_EMBEDDER"),
                      env_options())
    env._said_ignored = True  # the parent warned about ignored DEEPFIELD_EMBED_* already
    return create_app(env.store(), llm_config=_llm_config(env.store_path))


def _llm_config(root: Path) -> Any:
    from ..llm.config import load_llm_config

    return load_llm_config(root).with_env(os.environ)


@app.command("serve")
@click.argument("store", required=False)
@click.option("--store", "store_option", default=None, metavar="STORE",
              help="The store, as the STORE argument: a folder or s3://BUCKET/PREFIX (several "
              "servers may serve one bucket store: docs/SCALE.md).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to listen on (writes need users from other hosts).")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535),
              help="Port (0: a free one, printed at start).")
@click.option("--workers", default=None, type=click.IntRange(1, 64),
              help="Server processes sharing the port, so searches use every CPU (on Linux "
              "the kernel spreads connections over them, and a worker holding more than its "
              "share of keep-alive clients asks one to reconnect). Default: "
              f"one per CPU, at most {MAX_AUTO_WORKERS}.")
@log_level_option
@tls_options
@json_option
@click.pass_context
def serve_cmd(ctx: click.Context, store: str | None, store_option: str | None, host: str,
              port: int,
              workers: int | None,
              log_level: str, tls_cert: Path | None, tls_key: Path | None,
              as_json: bool) -> None:
    """Serve every field of STORE over HTTP (the memoryfield spec's routes, plus deepfield's).

    Each field is under /FIELD/: GET / (index.md), /memoryfield.zip, /PAGE.md, /search?q=,
    PUT and DELETE of pages; deepfield's own routes under /FIELD/_/; OpenAPI at
    /openapi.json; the memory console for people at /ui/ (see `deepfield ui`). Writes need
    an HTTP Basic login when [server.users] has users (see `deepfield passwd`); without
    users only loopback clients may write.
    """
    from ..server import create_app

    tls = _tls(tls_cert, tls_key)
    env = _store_settings(ctx, store or store_option)
    opened = env.store()
    if workers is None:
        # Measured (docs/BENCHMARKS.md, HTTP server load): 8 clients on 2 CPUs, p95 ~55 ms
        # with one process, ~38 ms with two.
        workers = max(1, min(MAX_AUTO_WORKERS, os.cpu_count() or 1))
    sock = _bind(host, port, workers=workers)
    url = _url(sock, host, tls=tls)
    users = opened.config.server.users
    info: dict[str, Any] = {
        "url": url, "store": env.where(absolute=True), "fields": opened.field_names(),
        "auth": bool(users), "private": opened.config.server.private,
        "writes": "login" if users else "loopback only", "workers": workers, "tls": bool(tls),
        "console": f"{url}ui/",
    }
    if as_json:
        print_json(info)
    else:
        click.echo(f"serving {info['store']} at {url} ({len(info['fields'])} fields; "
                   f"writes: {info['writes']}; OpenAPI at {url}openapi.json; "
                   f"console at {url}ui/)", err=True)
    if not users and host not in ("127.0.0.1", "localhost", "::1"):
        warn("no users configured: other hosts can read but not write "
             "(add one with `deepfield passwd USER`)")
    _warn_clear_logins(users, host, tls)
    sys.stdout.flush()
    if workers > 1:
        opened.close()
        os.environ["DEEPFIELD_STORE"] = env.store_url or str(env.store_path.resolve())
        if env.embedder_name:
            os.environ["DEEPFIELD_EMBEDDER"] = env.embedder_name
        _serve("deepfield.cli.commands_serve:worker_app", sock, log_level, workers, tls)
    else:
        _serve(create_app(opened, llm_config=_llm_config(env.store_path)), sock, log_level,
               tls=tls)


@app.command("mcp")
@click.argument("store", required=False)
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio",
              show_default=True, help="stdio (spawned by the agent) or streamable HTTP.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP interface.")
@click.option("--port", default=DEFAULT_MCP_PORT, show_default=True,
              type=click.IntRange(0, 65535), help="HTTP port (0: a free one).")
@click.option("--path", "mcp_path", default="/mcp", show_default=True, help="HTTP endpoint path.")
@log_level_option
@tls_options
@json_option
@click.pass_context
def mcp_cmd(ctx: click.Context, store: str | None, transport: str, host: str, port: int,
            mcp_path: str, log_level: str, tls_cert: Path | None, tls_key: Path | None,
            as_json: bool) -> None:
    """Serve STORE to agents over MCP: tools to search, read, write, remember, research and
    build context, and every page as a memoryfield:// resource.

    With --transport http, users in [server.users] must log in with HTTP Basic; without
    users the server only listens on loopback. A relative STORE is taken inside
    $CLAUDE_PROJECT_DIR when that is set (Claude Code sets it for a project's servers).
    """
    import logging

    from ..server.auth import Auth, is_loopback
    from ..server.mcp_server import BasicAuthMiddleware, create_mcp_server
    from ..server.service import Service

    if transport == "stdio":
        # `deepfield mcp --port 9000` would otherwise wait on stdin for an agent, silently.
        given = [f"--{name.replace('mcp_', '').replace('_', '-')}"
                 for name in ("host", "port", "mcp_path", "tls_cert", "tls_key")
                 if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
        if given:
            raise click.UsageError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} "
                                   "only for --transport http (the default, stdio, talks over "
                                   "stdin and stdout)")
    tls = _tls(tls_cert, tls_key)
    # `--path mcp` means /mcp (the router asserted on a path without its leading slash).
    mcp_path = "/" + mcp_path.lstrip("/")
    env = _store_settings(ctx, project_store(store, os.environ))
    opened = env.store()
    users = opened.config.server.users
    if transport == "http" and not users and not (host == "localhost" or is_loopback(host)):
        raise ConfigError(
            f"refusing to serve MCP on {host} without users: its tools can write",
            "add a user with `deepfield passwd USER`, or listen on 127.0.0.1",
        )
    # stdio carries the protocol: logs go to stderr, never stdout.
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr)
    service = Service(opened, _llm_config(env.store_path))
    server = create_mcp_server(opened, service=service)
    try:
        service.start_backfill()
        if transport == "stdio":
            server.run("stdio")
            return
        asgi: Any = server.streamable_http_app(streamable_http_path=mcp_path, host=host)
        # Logins are read again when deepfield.toml changes (`deepfield passwd` while it runs).
        asgi = BasicAuthMiddleware(asgi, Auth.for_store(opened.root))
        sock = _bind(host, port)
        url = _url(sock, host, mcp_path, tls)
        if as_json:
            print_json({"url": url, "store": env.where(absolute=True), "transport": "http",
                        "auth": bool(users), "tls": bool(tls)})
        else:
            click.echo(f"MCP (streamable HTTP) for {env.where(absolute=True)} at {url}",
                       err=True)
        _warn_clear_logins(users, host, tls)
        sys.stdout.flush()
        _serve(asgi, sock, log_level, tls=tls)
    finally:
        service.close()  # its per-field connections and background sync thread


@app.command("passwd")
@click.argument("user")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.option("--print", "print_only", is_flag=True,
              help="Only print the hash (to paste into [server.users]); change nothing.")
@click.option("--remove", is_flag=True, help="Remove USER's login instead (no password asked).")
@json_option
@click.pass_context
def passwd_cmd(ctx: click.Context, user: str, password_stdin: bool, print_only: bool,
               remove: bool, as_json: bool) -> None:
    """Set USER's password for `deepfield serve` / `deepfield mcp` (salted scrypt hash in the
    store's deepfield.toml, [server.users]), or --remove USER. Prompts unless --password-stdin.
    A store in a bucket (--store s3://…) is edited in the bucket.

    Servers already running pick up the change within 2 seconds (a bucket store's replicas
    within a few): once a store has a user, every write needs a login.
    """
    from ..server.auth import check_user_name, hash_password, save_user, with_user

    check_user_name(user)
    if remove and print_only:
        raise click.BadParameter("--remove changes the store; leave out --print",
                                 param_hint="--remove")
    env = settings(ctx)
    scheme = None if print_only else env.scheme()  # before the password, as below
    if scheme not in (None, "s3"):
        raise ConfigError(f"passwd edits the deepfield.toml of a folder or s3:// store, not "
                          f"of a {scheme}:// store", "add the user to that store's "
                          "deepfield.toml where the store keeps it ([server.users], the hash "
                          "from `deepfield passwd USER --print`)")
    if not print_only and scheme is None and not store_exists(env.store_path):
        raise StoreNotFoundError(f"no store at {env.store_path}")  # before the password
    hashed: str | None = None
    if not remove:
        hashed = hash_password(_password(password_stdin))
    saved: str | None = None
    if not print_only:
        if env.store_url is not None:
            from ..bucket.store import edit_bucket_config

            saved = edit_bucket_config(
                env.store_url, lambda text: with_user(text, user, hashed,
                                                      f"{env.store_url}/deepfield.toml"))
        else:
            saved = str(save_user(env.store_path, user, hashed))
    if as_json:
        out: dict[str, Any] = {"user": user, "saved": saved}
        if remove:
            out["removed"] = True
        else:
            out["hash"] = hashed
        print_json(out)
    elif remove:
        click.echo(f"login of {user} removed from {saved}")
    elif saved:
        click.echo(f"password for {user} saved in {saved}")
    else:
        click.echo(f'{user} = "{hashed}"')


def _password(from_stdin: bool) -> str:
    if from_stdin:
        raw = sys.stdin.buffer.readline()
        try:
            password = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            raise click.BadParameter("the password on standard input is not UTF-8 text",
                                     param_hint="--password-stdin") from None
    else:
        try:
            password = click.prompt("password", hide_input=True, confirmation_prompt=True,
                                    err=True)
        except click.Abort:
            if sys.stdin.isatty():
                raise  # Ctrl-C or Ctrl-D at the prompt: the user gave up
            # Piped in without --password-stdin: the prompt wants it twice and met the end
            # of the input ("aborted", exit 130, said nothing of why).
            raise click.UsageError(
                "standard input ended before the password was given (and repeated); "
                "to pipe it in, add --password-stdin") from None
    if not password:
        raise click.BadParameter("the password is empty")
    return password
