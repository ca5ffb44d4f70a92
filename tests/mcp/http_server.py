"""An MCP server reachable only over Streamable HTTP, made with the Python MCP library's own
server (`MCPServer`), for tests/mcp_proxy.rs: `warden mcp-proxy --server-url` fronts it.

It offers the few file tools tests/mcp/client.py calls, under one folder, and says what it
reads as a log notification while the call runs (a message the proxy must pass on to the
client although it answers no request).

Usage: http_server.py PORT FOLDER
"""

import pathlib
import sys

from mcp.server.mcpserver import Context, MCPServer

port = int(sys.argv[1])
root = pathlib.Path(sys.argv[2]).resolve()
server = MCPServer("warden-test-files")


def inside(path: str) -> pathlib.Path:
    p = pathlib.Path(path).resolve()
    if p != root and root not in p.parents:
        raise ValueError(f"{path} is outside the served folder")
    return p


@server.tool()
async def read_text_file(path: str, ctx: Context) -> str:
    """Reads a text file."""
    p = inside(path)
    await ctx.info(f"reading {p.name}")
    return p.read_text()


@server.tool()
def write_file(path: str, content: str) -> str:
    """Writes a text file."""
    inside(path).write_text(content)
    return f"Successfully wrote to {path}"


@server.tool()
def move_file(source: str, destination: str) -> str:
    """Moves a file."""
    inside(source).rename(inside(destination))
    return f"Successfully moved {source} to {destination}"


server.run(transport="streamable-http", host="127.0.0.1", port=port)
