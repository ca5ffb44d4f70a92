"""Drives `warden mcp-proxy` in front of the reference MCP filesystem server with the Python
MCP client library, and prints what the client saw as one JSON object (tests/mcp_proxy.rs
checks it).

Usage: client.py stdio WARDEN POLICY STATE SERVER_JS FOLDER   (the client starts the proxy)
       client.py stdio-url WARDEN POLICY STATE SERVER_URL FOLDER
                                 (the client starts the proxy, which reaches the server over HTTP)
       client.py http URL FOLDER                              (the proxy is listening at URL)
"""

import asyncio
import json
import sys

from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def is_error(result):
    # `is_error` in the 2.x library, `isError` in 1.x.
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


def transport():
    if sys.argv[1] == "http":
        url, folder = sys.argv[2:4]
        return streamable_http_client(url), folder
    warden, policy, state, server, folder = sys.argv[2:7]
    if sys.argv[1] == "stdio-url":
        server_args = ["--server-url", server]
    else:
        server_args = ["--", "node", server, folder]
    params = StdioServerParameters(
        command=warden,
        args=["mcp-proxy", "--policy", policy, "--state", state, *server_args],
    )
    return stdio_client(params), folder


async def main():
    client, folder = transport()
    seen = {"logs": []}

    async def on_log(params):
        # Server notifications the proxy passed on (the HTTP test server logs each read).
        seen["logs"].append(str(getattr(params, "data", params)))

    async with client as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write, logging_callback=on_log) as session:
            await session.initialize()
            tools = await session.list_tools()
            seen["tools"] = sorted(t.name for t in tools.tools)

            # Before any content came in, a write is allowed.
            r = await session.call_tool("write_file", {"path": f"{folder}/out.txt", "content": "hello"})
            seen["first_write"] = {"is_error": is_error(r), "text": text_of(r)}

            # A tool the policy denies: refused by the proxy, never run.
            r = await session.call_tool("move_file", {"source": f"{folder}/out.txt", "destination": f"{folder}/moved.txt"})
            seen["move"] = {"is_error": is_error(r), "text": text_of(r)}

            # A request that is not a tool call, refused: a JSON-RPC error the library raises.
            try:
                await session.read_resource("file:///etc/passwd")
                seen["etc"] = {"raised": False}
            except MCPError as e:
                seen["etc"] = {"raised": True, "code": e.error.code, "message": e.error.message}

            # An allowed read: its content comes back, and taints the session.
            r = await session.call_tool("read_text_file", {"path": f"{folder}/notes.txt"})
            seen["read"] = {"is_error": is_error(r), "text": text_of(r)}

            # So the next write is refused by the taint rule.
            r = await session.call_tool("write_file", {"path": f"{folder}/out2.txt", "content": "again"})
            seen["second_write"] = {"is_error": is_error(r), "text": text_of(r)}

            # A result the policy refuses: replaced before the client sees it.
            r = await session.call_tool("read_text_file", {"path": f"{folder}/key.pem"})
            seen["key"] = {"is_error": is_error(r), "text": text_of(r)}
    print(json.dumps(seen))


asyncio.run(main())
