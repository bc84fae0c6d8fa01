"""The MCP server: a store's fields as tools and resources for agents (official ``mcp`` SDK).

Tools: ``list_fields``, ``list_pages``, ``search``, ``read`` (outline, full or one section),
``write``, ``remember``, ``research`` and ``context``. Resources: every page as
``memoryfield://{field}/{page}.md`` (plus each field's ``index.md`` and ``listing.md``).

``deepfield mcp`` serves it over stdio (nothing but protocol messages on stdout) or over
streamable HTTP. Over HTTP it binds to loopback unless users are configured, and then every
request needs their HTTP Basic login, since the tools can write.
"""

from __future__ import annotations

import base64
import difflib
import functools
import json
import re
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar
from urllib.parse import quote

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import Resource as MCPResource
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import (
    DeepfieldError,
    PageNotFoundError,
    SectionNotFoundError,
    UnknownFieldError,
)
from ..field import Field, WriteResult
from ..page import INTRO_FILE, LISTING_FILE
from ..search import MODES, UNITS
from ..sessions import parse_session
from ..store import Store
from ..writer import page_to_write
from . import mcp_args as arg
from .auth import Auth, is_loopback
from .hints import restate_context
from .pagefiles import read_view
from .service import Service

P = ParamSpec("P")
R = TypeVar("R")
SCHEME = "memoryfield"
MAX_LISTED_PAGES = 1000
"""Pages listed per field by resources/list (all remain readable through the template), and
the most one list_pages reply holds."""
DEFAULT_PAGES_LISTED = 200
"""Pages a list_pages reply holds unless the agent asks for more (about 15,000 tokens)."""

INSTRUCTIONS = (
    "deepfield long-term memory: fields of Markdown pages. Search first (results are stubs: "
    "title, summary, best snippet), then read the page's outline and only the sections you "
    "need. Write pages you learn; keep a page's uuid to replace it. Use research for "
    "questions that need several searches, context for a ready-made context block."
)


AGENT_HINTS = {
    UnknownFieldError.default_hint: "call list_fields; write or remember with "
                                    "create_field=true starts a field",
    PageNotFoundError.default_hint: "call list_pages, or search for the page",
    SectionNotFoundError.default_hint: "read the page with mode=outline for its headings",
}
"""The CLI's hints an agent cannot follow, said in the tools' terms."""
_FLAG = re.compile(r"--(mode|budget|name|level|depth|section|unit|max-rounds)\b")


def tool_terms(text: str) -> str:
    """``text`` with the CLI's options (``--budget``) named as the tools' arguments."""
    return _FLAG.sub(lambda flag: flag.group(1).replace("-", "_"), text)


def for_agents(exc: DeepfieldError) -> str:
    """The error as a tool error's text: the hint names tools and their arguments (``mode``)
    where the CLI's names commands and options (``deepfield ls``, ``--mode``)."""
    hint = AGENT_HINTS.get(exc.hint) or tool_terms(exc.hint)
    return f"{exc.message} ({hint})" if hint else exc.message


def _tool_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Report deepfield errors to the agent as tool errors it can act on."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except DeepfieldError as exc:
            raise ToolError(for_agents(exc)) from None
        except OSError as exc:  # the machine's refusal (permissions, a full disk): say which
            where = f" ({exc.filename})" if exc.filename else ""
            raise ToolError(f"{exc.strerror or exc}{where}") from None
        except ModuleNotFoundError as exc:
            raise ToolError(f"not available in this build ({exc.name})") from None

    return wrapper


class DeepfieldMCP(MCPServer[Any]):
    """MCPServer whose resource list is the store's pages as they are now."""

    def __init__(self, service: Service, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.service = service

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Any = None) -> Any:
        """The SDK's call, with arguments that fail the tool's schema said in one line per
        argument ("k: Input should be a valid integer") instead of pydantic's report, and
        arguments the tool does not take refused: ignored, a ``field`` sent to ``search``
        (which takes ``fields``) would search every field without a word."""
        self._check_argument_names(name, arguments or {})
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            wrong = "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or 'arguments'}: {error['msg']}"
                for error in cause.errors())
            raise ToolError(f"Error executing tool {name}: bad arguments: {wrong} (see the "
                            "tool's input schema)") from None

    def _check_argument_names(self, name: str, arguments: dict[str, Any]) -> None:
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            return  # the SDK's own "unknown tool" error
        known = list(tool.parameters.get("properties", {}))
        unknown = [key for key in arguments if key not in known]
        if not unknown:
            return
        close = [match for key in unknown
                 for match in difflib.get_close_matches(key, known, n=1, cutoff=0.6)]
        hint = f"did you mean {', '.join(close)}? " if close else ""
        takes = ", ".join(known) or "no arguments"
        raise ToolError(f"Error executing tool {name}: unknown argument"
                        f"{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} ({hint}"
                        f"{name} takes: {takes})")

    async def list_resources(self) -> list[MCPResource]:
        from starlette.concurrency import run_in_threadpool

        listed = await super().list_resources()
        return listed + await run_in_threadpool(self._page_resources)

    def _page_resources(self) -> list[MCPResource]:
        out: list[MCPResource] = []
        for name in self.service.field_names():
            docs = self.service.locked(name, lambda f: f.pages())
            for special in (INTRO_FILE, LISTING_FILE):
                if (self.service.store.root / name / special).is_file():
                    out.append(MCPResource(
                        uri=f"{SCHEME}://{name}/{special}", name=f"{name}/{special}",
                        mime_type="text/markdown",
                        description="The field's introduction" if special == INTRO_FILE
                        else "The field's catalogue of pages"))
            for doc in docs[:MAX_LISTED_PAGES]:
                # Percent-encoded: a page kept under a non-spec name ("Q&A #2.md") was listed
                # with a raw "#", which cut the URI short, so the page could not be read.
                out.append(MCPResource(
                    uri=f"{SCHEME}://{name}/{quote(doc.filename)}",
                    name=f"{name}/{doc.filename}",
                    title=doc.title, description=doc.summary, mime_type="text/markdown"))
        return out


def create_mcp_server(store: Store, *, service: Service | None = None) -> DeepfieldMCP:
    """The MCP server for ``store`` (run it with ``.run()`` or mount its HTTP app)."""
    from .. import __version__

    svc = service or Service(store)
    server = DeepfieldMCP(svc, name="deepfield", version=__version__, instructions=INSTRUCTIONS,
                          log_level="WARNING")

    def field_list(names: list[str] | str | None) -> list[str]:
        chosen = [names] if isinstance(names, str) else names or svc.field_names()
        if not chosen:
            raise UnknownFieldError("the store has no fields yet",
                                    "write or remember with create_field=true to start one")
        return chosen

    def _copy_warnings(field: str) -> dict[str, list[str]]:
        # A bucket that could not be reached: the reply comes from this process's copy.
        # Said only then, so the usual reply stays lean.
        warnings = svc.field(field).copy_warnings()
        return {"warnings": warnings} if warnings else {}

    def writable(field: str, create: bool, precheck: Callable[[], object]) -> bool:
        """Whether this call created ``field`` (so a failure afterwards removes it again)."""
        if create:
            new = field not in svc.field_names()
            if new:
                # What fails before a write would leave an empty field behind: checked first.
                precheck()
            svc.create_field(field)
            return new
        if field not in svc.field_names():
            known = ", ".join(svc.field_names()) or "none yet"
            raise UnknownFieldError(f"no field {field!r} (fields: {known})",
                                    "pass create_field=true to create it")
        return False

    def into_field(field: str, created: bool, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``fn()``; when it fails in a field this call created, the field goes again if it is
        still empty (what fails only later, e.g. an [llm] that cannot be reached)."""
        try:
            return fn()
        except BaseException:
            if created:
                svc.discard_if_empty(field)
            raise

    @server.tool()
    @_tool_errors
    def list_fields() -> dict[str, Any]:
        """List the fields (memories) in the store, with their page counts and introductions."""
        fields = []
        for name in svc.field_names():
            count = svc.locked(name, lambda f: len(f.pages()))
            intro = svc.field(name).intro()
            fields.append({"name": name, "pages": count,
                           "intro": intro[:500] if intro else None})
        warnings = svc.copy_warnings()  # a bucket that is down: this process's copy
        return {"fields": fields, **({"warnings": warnings} if warnings else {})}

    @server.tool()
    @_tool_errors
    def list_pages(field: arg.FieldName, offset: arg.Offset = 0,
                   limit: arg.Limit = DEFAULT_PAGES_LISTED) -> dict[str, Any]:
        """List a field's pages: filename, title, summary and uuid of each, by filename,
        limit at a time (default 200, at most 1000) from offset; total counts them all and
        next_offset, when not null, is the offset of the next ones. search finds pages in a
        large field."""
        docs = svc.locked(field, lambda f: f.pages())
        # A whole large field would be more than an agent can take in one reply (Claude Code
        # refuses a tool result over 25,000 tokens): pages come limit at a time.
        pages = [{"filename": d.filename, "title": d.title, "summary": d.summary,
                  "uuid": d.uuid} for d in docs[offset:offset + limit]]
        following = offset + limit if offset + limit < len(docs) else None
        return {"field": field, "pages": pages, "count": len(pages), "total": len(docs),
                "next_offset": following, **_copy_warnings(field)}

    @server.tool()
    @_tool_errors
    def search(query: arg.Query, fields: arg.FieldNames = None, k: arg.K = 10,
               mode: arg.SearchMode = None, unit: arg.Unit = "page",
               frontmatter: arg.WithFrontmatter = False) -> dict[str, Any]:
        """Search pages. Returns stubs (filename, title, summary, best snippet with its
        heading and lines), best first, and a confidence (high / low / none, why). mode: bm25,
        vector or hybrid (default: hybrid when the store has an embedding model); unit: page
        (one per page) or chunk (with text); frontmatter: also each page's whole frontmatter."""
        if not query.strip():
            raise DeepfieldError("the query is empty", "say what to look for")
        if mode is not None and mode not in MODES:
            raise DeepfieldError(f"unknown mode {mode!r}", "use bm25, vector or hybrid")
        if unit not in UNITS:
            raise DeepfieldError(f"unknown unit {unit!r}", "use page or chunk")
        if not 1 <= k <= 100:  # the same range as GET /search
            raise DeepfieldError(f"k must be 1 to 100, not {k}", "ask for at most 100 results")
        found = svc.search_many(field_list(fields), query, k=k, mode=mode, unit=unit)
        if not frontmatter:  # every key of every page: most of a reply an agent pays for
            for hit in found.get("results", []):
                hit.pop("frontmatter", None)
        return found

    @server.tool()
    @_tool_errors
    def read(field: arg.FieldName, page: arg.Page, mode: arg.ReadMode = None,
             section: arg.Section = None, depth: arg.Depth = 2) -> dict[str, Any]:
        """Read a page progressively: its outline (headings with first sentences; the
        default), the full text, or one section (section=HEADING or 'Parent > Child',
        mode=section or left out). page is a filename, stem or uuid."""
        chosen = read_view(mode, section, "mode")
        if not 1 <= depth <= 6:  # heading levels, as GET /_/read checks
            raise DeepfieldError(f"depth must be 1 to 6, not {depth}",
                                 "send a heading level from 1 to 6 (default 2)")
        view = svc.read(field, page, view=chosen, section=section, depth=depth)
        out: dict[str, Any] = {**view.to_json(), **_copy_warnings(field)}
        return out

    @server.tool()
    @_tool_errors
    def write(field: arg.FieldName, text: arg.Markdown, name: arg.PageName = None,
              create_field: arg.CreateField = False) -> dict[str, Any]:
        """Write a page (Markdown, optional YAML frontmatter). Missing title/uuid/dates are
        filled in; a uuid of an existing page replaces that page; name picks the filename
        (else derived from the title); pages over 8 KB are split. create_field: create the
        field first if the store has none of that name. Returns what was written."""
        created = writable(field, create_field, lambda: page_to_write(text, name))
        return into_field(field, created,
                          lambda: svc.writing(field, lambda f: _write(f, text, name)).to_json())

    @server.tool()
    @_tool_errors
    def remember(field: arg.FieldName, text: arg.Text, format: arg.Format = None,
                 create_field: arg.CreateField = False) -> dict[str, Any]:
        """Memorize a text (notes, a conversation, a document): the memorizer turns it into
        pages or updates existing ones. create_field: create the field first if the store has
        none of that name. Returns the pages written."""
        created = writable(field, create_field,
                           lambda: parse_session(text, format=format or "auto", label="the text"))
        return into_field(field, created, lambda: svc.remember(
            field, text, format=format, source="mcp", label="the text"))

    @server.tool()
    @_tool_errors
    def research(question: arg.Question, fields: arg.FieldNames = None, max_rounds: arg.Rounds = 3,
                 budget: arg.Budget = 1000, trace: arg.Trace = False) -> dict[str, Any]:
        """Research a question over several rounds of search and reading; returns a context
        of quoted evidence within budget tokens, the evidence with citations (field,
        filename, lines), sources and a confidence (high / low / none, why). trace: also
        each round's plan and queries (large)."""
        found = svc.research(field_list(fields), question, max_rounds=max_rounds,
                             budget=budget)
        return found if trace else _untraced(found)

    @server.tool()
    @_tool_errors
    def context(field: arg.FieldName, task: arg.Task = "", budget: arg.Budget = 2000,
                level: arg.Level = "deep", trace: arg.Trace = False) -> dict[str, Any]:
        """Build one context block to put in your prompt, within a token budget (tokens):
        preferences and always-load pages, the field's introduction, domain material of the
        level (light, medium) and, at level deep, research on the task (its sources and
        confidence; trace: the whole research result too, large)."""
        if level == "deep" and not task.strip():  # as GET /_/context: research needs a task
            raise DeepfieldError("level deep researches the task: give the task",
                                 "or ask for level light or medium")
        built = svc.locked(field, lambda f: svc.context(f, task, budget=budget, level=level))
        if not trace and built.get("research"):  # its text is in the block already
            built["research"] = {key: built["research"].get(key)
                                 for key in ("sources", "confidence", "warnings")}
        return restate_context(built, tool_terms)  # its warnings said --budget

    @server.resource(f"{SCHEME}://{{field}}/{{page}}.md", mime_type="text/markdown",
                     name="page", description="A page of a field, as stored")
    def page_resource(field: str, page: str) -> str:
        filename = f"{page}.md"
        try:
            fld = svc.field(field)
        except DeepfieldError:
            known = ", ".join(svc.field_names()) or "none yet"
            raise ResourceNotFoundError(f"no field {field} (fields: {known})") from None
        try:
            # A page kept under a non-spec name ("Kettle_Notes.md") is read, as search
            # lists it and the read tool reads it; a symbolic link still is not.
            path = svc.page_path(fld, filename, existing=True)
            if filename == LISTING_FILE:
                svc.locked(field, lambda f: f.ensure_synced(embed=False))
            return path.read_text(encoding="utf-8", errors="replace")
        except (DeepfieldError, FileNotFoundError, IsADirectoryError):
            raise ResourceNotFoundError(f"no page {filename} in field {field}") from None

    return server


def _untraced(found: dict[str, Any]) -> dict[str, Any]:
    """A research reply without what only debugging needs: the rounds' plans and queries
    (most of a reply, ten times its context), and which queries found each evidence line."""
    found = {key: value for key, value in found.items() if key != "rounds"}
    found["evidence"] = [{key: value for key, value in item.items()
                          if key not in ("queries", "round")}
                         for item in found.get("evidence", [])]
    return found


def _write(field: Field, text: str, name: str | None) -> WriteResult:
    return field.write(text, name=name)


class BasicAuthMiddleware:
    """Every HTTP request needs a valid Basic login (the MCP tools can write); while the store
    has no users, only loopback clients are served."""

    def __init__(self, app: ASGIApp, auth: Auth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers") or []).get(b"authorization", b"")
        client = scope.get("client")
        if self.auth.user(header.decode("latin-1")) is not None or (
                not self.auth.enabled and is_loopback(client[0] if client else None)):
            await self.app(scope, receive, send)  # no users (yet, or any more): loopback only
            return
        # As the HTTP API says it (server/app.py): a store without users serves loopback only,
        # which no login changes (it said "login needed"); a refused login is said so.
        if not self.auth.enabled:
            status, headers = 403, []
            error = {"type": "Forbidden", "message": "this server has no users, so it only "
                     "serves loopback clients", "hint": "add a user with `deepfield passwd "
                     "USER` to serve other hosts"}
        else:
            status = 401
            headers = [(b"www-authenticate", self.auth.challenge()["WWW-Authenticate"].encode())]
            error = {"type": "Unauthorized",
                     "message": "wrong user or password" if header else "login needed",
                     "hint": "send HTTP Basic credentials of a user in [server.users]"}
        await send({"type": "http.response.start", "status": status, "headers": [
            *headers, (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps({"error": error}).encode()})


def basic_header(user: str, password: str) -> str:
    """The ``Authorization`` header value for a Basic login (for clients and tests)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
