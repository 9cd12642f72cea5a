"""taskhost's MCP Tasks of the 2025-11-25 era with the tasks client of the official Python SDK
(`mcp` 1.30, `session.experimental`), over stdio and over HTTP.

Usage: legacy_tasks.py TASKHOST DIR URL TOKEN
DIR holds the tasks and bash plugins (libtaskhost_plugin_tasks.so, libtaskhost_plugin_bash.so) for
the stdio host; URL is a running host's MCP endpoint, TOKEN a principal's token there.

Each transport prints `ok <transport>` or raises. Checks: the server's `tasks` capability and bash's
`execution.taskSupport`; a task created with call_tool_as_task is polled with get_task to
`completed`, its result read with get_task_result (a non-zero exit is `isError`), and listed with
list_tasks; cancel_task answers `cancelled`; an unknown id is `-32602`; a plain call_tool is a plain
result.
"""

import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult

TASKHOST, DIR, URL, TOKEN = sys.argv[1:5]


async def scenario(session: ClientSession) -> None:
    init = await session.initialize()
    assert init.protocolVersion == "2025-11-25", init
    assert init.capabilities.tasks is not None, init.capabilities
    tools = await session.list_tools()
    bash = next(t for t in tools.tools if t.name == "bash")
    assert bash.execution is not None and bash.execution.taskSupport == "optional", bash

    created = await session.experimental.call_tool_as_task(
        "bash", {"command": "echo from python; exit 3"}, ttl=60000
    )
    task_id = created.task.taskId
    assert created.task.status == "working", created
    with anyio.fail_after(30):
        while True:
            status = await session.experimental.get_task(task_id)
            if status.status != "working":
                break
            await anyio.sleep(0.05)
    assert status.status == "completed", status
    result = await session.experimental.get_task_result(task_id, CallToolResult)
    assert result.isError, result
    assert result.content[0].text.startswith("from python\n"), result
    listed = await session.experimental.list_tasks()
    assert any(t.taskId == task_id for t in listed.tasks), listed

    running = await session.experimental.call_tool_as_task("bash", {"command": "exec sleep 1000"})
    cancelled = await session.experimental.cancel_task(running.task.taskId)
    assert cancelled.status == "cancelled", cancelled

    try:
        await session.experimental.get_task("bash-999")
        raise AssertionError("an unknown task was answered")
    except McpError as e:
        assert e.error.code == -32602, e.error

    plain = await session.call_tool("bash", {"command": "echo plain"})
    assert plain.content[0].text.startswith("plain\n"), plain


async def over_stdio() -> None:
    server = StdioServerParameters(
        command=TASKHOST,
        args=[
            "serve",
            "--plugin",
            os.path.join(DIR, "libtaskhost_plugin_tasks.so"),
            "--plugin",
            os.path.join(DIR, "libtaskhost_plugin_bash.so"),
        ],
        env={**os.environ, "RUST_LOG": "warn"},
    )
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await scenario(session)
    print("ok stdio", flush=True)


async def over_http() -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with streamablehttp_client(URL, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await scenario(session)
    print("ok http", flush=True)


async def main() -> None:
    await over_stdio()
    await over_http()


anyio.run(main)
