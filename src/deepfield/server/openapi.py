"""The OpenAPI 3.1 description of the HTTP server, served at ``/openapi.json``.

Written by hand (the routes are few and their status codes are the point); tests check that
every route of the app appears here.
"""

from __future__ import annotations

from typing import Any

_FIELD = {"name": "field", "in": "path", "required": True,
          "description": "Field name (a sub-folder of the store).",
          "schema": {"type": "string", "pattern": "^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$"}}
_PAGE = {"name": "filename", "in": "path", "required": True,
         "description": "Page filename: lowercase ASCII letters, digits and hyphens, then `.md`.",
         "schema": {"type": "string", "pattern": "^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\\.md$"}}
_MD = {"text/markdown": {"schema": {"type": "string"}}}
_ERR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}


def _q(name: str, description: str, schema: dict[str, Any],
       required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "description": description,
            "schema": schema}


def _int(default: int, low: int, high: int) -> dict[str, Any]:
    """An integer query parameter's schema, with the range the server enforces (400 outside)."""
    return {"type": "integer", "default": default, "minimum": low, "maximum": high}


def _err(description: str) -> dict[str, Any]:
    return {"description": description, "content": _ERR}


def _json(description: str, ref: str | None = None) -> dict[str, Any]:
    schema = {"$ref": f"#/components/schemas/{ref}"} if ref else {"type": "object"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_REMOTE = _err("A remote the store stands on (a bucket, a model endpoint) failed.")
_READ_ERRORS = {"401": _err("Login needed (private store)."),
                "403": _err("A private store without users, read from another host; or a "
                            "loopback request naming another host (DNS rebinding)."),
                "404": _err("No such field or page."),
                "502": _REMOTE}
_BAD_FIELD = {"400": _err("The field name is not a spec name.")}
_NOT_MODIFIED = {"304": {"description": "Not modified: the `If-None-Match` ETag (or, without "
                                        "one, `If-Modified-Since`) still holds."}}
_MODEL_DOWN = {"503": _err("The embedding model is unavailable.")}
_WARNING = {"X-Deepfield-Warning": {
    "description": "The page is stored, with warnings (e.g. its index could not be updated: "
                   "the next search indexes it); the JSON `warnings`, joined by ` | `.",
    "schema": {"type": "string"}}}
_WRITE_ERRORS = {
    "400": _err("Invalid page name (not a spec name, a NUL, over 255 bytes), or empty body."),
    "401": _err("No or wrong HTTP Basic credentials (with a `WWW-Authenticate` challenge)."),
    "403": _err("No users configured and the client is not on loopback."),
    "404": _err("No such field (or page, for DELETE)."),
    "405": _err("`listing.md` is generated and cannot be written."),
    "502": _REMOTE,
}


def openapi_document(version: str) -> dict[str, Any]:
    """The whole document."""
    paths: dict[str, Any] = {
        "/": {"get": {
            "summary": "List the fields of the store", "operationId": "listFields",
            "responses": {"200": _json("The fields, with their URLs."),
                          "401": _READ_ERRORS["401"], "403": _READ_ERRORS["403"]},
        }},
        "/{field}/": {"get": {
            "summary": "The field's introduction (index.md)", "operationId": "getIntro",
            "parameters": [_FIELD],
            "responses": {"200": {"description": "index.md (a short generated one if absent).",
                                  "content": _MD}, **_NOT_MODIFIED, **_BAD_FIELD,
                          **_READ_ERRORS},
        }},
        "/{field}/memoryfield.zip": {"get": {
            "summary": "The whole field as a memoryfield zip", "operationId": "getZip",
            "description": "Pages, index.md, listing.md (no archive/, no index files). "
                           "The ETag is the sha256 of the zip.",
            "parameters": [_FIELD],
            "responses": {"200": {"description": "The zip.", "content": {
                "application/zip": {"schema": {"type": "string", "format": "binary"}}}},
                **_NOT_MODIFIED, **_BAD_FIELD, **_READ_ERRORS},
        }},
        "/{field}/search": {"get": {
            "summary": "Ranked search (the spec's JSON shape)", "operationId": "search",
            "description": "Results are ordered by descending relevance; each has `filename` "
                           "and `frontmatter` plus deepfield's extra keys. Keyword-only "
                           "fields add case-insensitive substring matches over filename, "
                           "title and summary after the BM25 results.",
            "parameters": [
                _FIELD, _q("q", "Search terms.", {"type": "string"}, True),
                _q("mode", "bm25, vector or hybrid (default: hybrid when the field has an "
                   "embedding model, else bm25).",
                   {"type": "string", "enum": ["bm25", "vector", "hybrid"]}),
                _q("unit", "One result per page (stub) or per matching line, with the text of its "
                   "chunk.",
                   {"type": "string", "enum": ["page", "chunk"], "default": "page"}),
                _q("k", "Number of results.",
                   {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}),
            ],
            "responses": {"200": _json("Results.", "SearchResponse"),
                          "400": _err("Bad mode, unit or k, or a query over 2,000 "
                                      "characters."), **_READ_ERRORS,
                          **_MODEL_DOWN},
        }},
        "/{field}/{filename}": {
            "get": {
                "summary": "One page, as stored", "operationId": "getPage",
                "parameters": [_FIELD, _PAGE],
                "responses": {"200": {"description": "The page; ETag is its sha256.",
                                      "content": _MD}, **_NOT_MODIFIED,
                              "400": _err("Not a page filename."), **_READ_ERRORS},
            },
            "put": {
                "summary": "Create or replace a page", "operationId": "putPage",
                "description": "The body is the complete UTF-8 page. Missing frontmatter "
                               "(title, uuid, created, updated) is filled in; a body without "
                               "`uuid` keeps the stored one. A page over 8 KB is stored whole "
                               "(the file is the page sent: no split into parts). The index "
                               "and listing.md are updated before "
                               "the response. Needs a login when users are configured, else "
                               "only loopback clients may write. `If-Match` is honoured, "
                               "and `If-None-Match: *` makes the PUT create-only.",
                "security": [{"basic": []}],
                "parameters": [_FIELD, _PAGE],
                "requestBody": {"required": True, "content": _MD},
                "responses": {
                    "201": {**_json("Created.", "WriteResult"), "headers": _WARNING},
                    "204": {"description": "Replaced.", "headers": _WARNING},
                    **_WRITE_ERRORS,
                    "409": _err("The body's uuid differs from the stored page's, or belongs "
                                "to another page."),
                    "412": _err("If-Match did not match, or If-None-Match: * and the page "
                                "exists."),
                    "413": _err("Body too large."),
                    "415": _err("Body is not valid UTF-8."),
                },
            },
            "delete": {
                "summary": "Remove a page (moved into the field's archive/)",
                "operationId": "deletePage", "security": [{"basic": []}],
                "description": "`If-Match` (the page's ETag) is honoured: a page changed "
                               "since is not deleted (412, with its current ETag).",
                "parameters": [_FIELD, _PAGE],
                "responses": {"204": {"description": "Archived; its index entries are gone."},
                              **_WRITE_ERRORS,
                              "405": _err("index.md or listing.md: not pages (replace the "
                                          "introduction with PUT)."),
                              "412": _err("If-Match did not match (or If-None-Match did): "
                                          "the page is kept.")},
            },
        },
        "/{field}/_/pages": {"get": {
            "summary": "The catalogue as JSON (deepfield)", "operationId": "listPages",
            "parameters": [_FIELD],
            "responses": {"200": _json("Every page with title, summary, uuid."),
                          **_BAD_FIELD, **_READ_ERRORS},
        }},
        "/{field}/_/read/{page}": {"get": {
            "summary": "Progressive reading: outline, full or one section (deepfield)",
            "operationId": "readPage",
            "parameters": [
                _FIELD,
                {"name": "page", "in": "path", "required": True, "schema": {"type": "string"},
                 "description": "Filename, stem or uuid (prefix) of the page."},
                _q("view", "What to return (left out: outline, or section when `section` "
                   "is given).", {"type": "string", "enum": ["outline", "full", "section"]}),
                _q("section", "Heading (or `Parent > Child`) to read; implies view=section.",
                   {"type": "string"}),
                _q("depth", "Outline heading depth.", _int(2, 1, 6)),
                _q("sentences", "Sentences per outline entry.", _int(1, 0, 20)),
            ],
            "responses": {"200": _json("The page view (`text` is ready to read)."),
                          "400": _err("Bad view, a view the section contradicts, or depth "
                                      "or sentences out of range."), **_READ_ERRORS},
        }},
        "/{field}/_/context": {"get": {
            "summary": "A context block for a task, within a token budget (deepfield)",
            "operationId": "buildContext",
            "parameters": [_FIELD, _q("task", "The task (needed at level deep).",
                                      {"type": "string"}),
                           _q("level", "How much domain material.", {"type": "string",
                              "enum": ["light", "medium", "deep"], "default": "deep"}),
                           _q("budget", "Token budget.", _int(2000, 100, 100_000))],
            "responses": {"200": _json("The context (`text`) and what it cites."),
                          "400": _err("No task at level deep, an unknown level, or a "
                                      "budget out of range."),
                          "501": _err("Not available in this build."), **_READ_ERRORS,
                          **_MODEL_DOWN},
        }},
        "/{field}/_/research": {"get": {
            "summary": "Multi-round research with citations (deepfield)",
            "operationId": "research",
            "parameters": [_FIELD, _q("q", "The question.", {"type": "string"}, True),
                           _q("rounds", "Most search rounds.", _int(3, 1, 10)),
                           _q("budget", "Token budget of the findings.",
                              _int(1000, 50, 100_000))],
            "responses": {"200": _json("Findings with citations."),
                          "400": _err("No `q`, or rounds or budget out of range (a budget "
                                      "the memory fence leaves no room in included)."),
                          "501": _err("Not available in this build."), **_READ_ERRORS,
                          **_MODEL_DOWN},
        }},
        "/{field}/_/remember": {"post": {
            "summary": "Memorize a text: notes, a transcript, a document (deepfield)",
            "operationId": "remember", "security": [{"basic": []}],
            "parameters": [_FIELD, _q("format", "Input format (default: detected).",
                                      {"type": "string"})],
            "requestBody": {"required": True, "content": {"text/plain": {
                "schema": {"type": "string"}}}},
            "responses": {"201": _json("The pages written or updated."),
                          "200": _json("Already remembered: nothing changed."),
                          **_WRITE_ERRORS,
                          "400": _err("Empty body, an unknown format, or a body the format "
                                      "cannot read."),
                          "413": _err("Body too large."),
                          "415": _err("Body is not valid UTF-8."),
                          "501": _err("Not available in this build.")},
        }},
        "/ui/": {"get": {
            "summary": "The memory console (HTML pages for people; see docs/CONSOLE.md)",
            "operationId": "console",
            "responses": {"200": {"description": "The console's start page.",
                                  "content": {"text/html": {"schema": {"type": "string"}}}},
                          "401": _READ_ERRORS["401"], "403": _READ_ERRORS["403"]},
        }},
        "/openapi.json": {"get": {
            "summary": "This document", "operationId": "openapi",
            "responses": {"200": _json("OpenAPI 3.1.")},
        }},
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "deepfield memoryfield server", "version": version,
            "description": "Every field of a deepfield store over HTTP, following the "
                           "memoryfield spec's HTTP transport, plus deepfield's own routes "
                           "under `/{field}/_/`. Errors are JSON: "
                           "`{\"error\": {\"type\", \"message\", \"hint\"}}`.",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error"], "properties": {
                    "error": {"type": "object", "properties": {
                        "type": {"type": "string"}, "message": {"type": "string"},
                        "hint": {"type": "string"}}}}},
                "SearchResult": {"type": "object", "required": ["filename", "frontmatter"],
                                 "properties": {
                                     "filename": {"type": "string"},
                                     "frontmatter": {"type": ["object", "null"]},
                                     "score": {"type": "number"},
                                     "title": {"type": "string"},
                                     "summary": {"type": ["string", "null"]},
                                     "snippet": {"type": "string"},
                                     "heading": {"type": "string"},
                                     "field": {"type": "string"},
                                     "uuid": {"type": ["string", "null"]},
                                     "snippet_line": {"type": "integer"},
                                     "line_start": {"type": "integer"},
                                     "line_end": {"type": "integer"},
                                     "matches": {"type": "integer"},
                                     "relative_dates": {"type": "array"},
                                     "text": {"type": "string",
                                              "description": "unit=chunk: the chunk."},
                                     "match": {"type": "string", "description":
                                               "`substring`: the spec's fallback match."}}},
                "SearchResponse": {"type": "object", "required": ["results"], "properties": {
                    "results": {"type": "array",
                                "items": {"$ref": "#/components/schemas/SearchResult"}},
                    "count": {"type": "integer"}, "mode": {"type": "string"},
                    "took_ms": {"type": "number"}, "warnings": {"type": "array"},
                    "field": {"type": "string"}, "query": {"type": "string"},
                    "unit": {"type": "string"}, "k": {"type": "integer"},
                    "pending_vectors": {"type": "integer"},
                    "filters": {"type": ["object", "null"], "description":
                                "The kind/category/concept filters applied (the Python API "
                                "and CLI take them), or null."},
                    "confidence": {"type": "object", "description":
                                   "How well the results answer the query: level, reason, "
                                   "signals."}}},
                "WriteResult": {"type": "object", "properties": {
                    "field": {"type": "string"},
                    "pages": {"type": "array", "items": {"type": "object", "properties": {
                        "filename": {"type": "string"}, "uuid": {"type": ["string", "null"]},
                        "title": {"type": ["string", "null"]}, "action": {"type": "string"},
                        "bytes": {"type": "integer"},
                        "previous": {"type": ["string", "null"]}}}},
                    "split": {"type": "boolean"},
                    "warnings": {"type": "array", "items": {"type": "string"}}}},
            },
        },
    }
