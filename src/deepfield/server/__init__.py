"""deepfield's servers: the memoryfield HTTP server and the MCP server.

    from deepfield.server import create_app      # an ASGI app: uvicorn.run(create_app(store))
    from deepfield.server.mcp_server import create_mcp_server
"""

from __future__ import annotations

from .app import create_app
from .auth import Auth, hash_password, verify_password
from .service import Service

__all__ = ["Auth", "Service", "create_app", "hash_password", "verify_password"]
