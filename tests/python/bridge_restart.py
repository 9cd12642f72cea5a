"""A 2026-07-28 client (the official MCP Python SDK) through `taskhost connect`, across a restart of
its host.

Usage: bridge_restart.py TASKHOST SOCKET
Prints `started <id>`, then waits for a line on stdin (the test SIGKILLs the host and starts another
on the same socket and state), then prints `listed <task_list text>` and `after <a foreground
call's text>`, and `ok`. The client is never reconnected by this script: the bridge does that.
"""

import sys

import anyio
from mcp import Client, StdioServerParameters

TASKHOST, SOCKET = sys.argv[1], sys.argv[2]


async def main() -> None:
    server = StdioServerParameters(command=TASKHOST, args=["connect", f"unix:{SOCKET}"])
    async with Client(server, mode="auto") as client:
        assert client.protocol_version == "2026-07-28", client.protocol_version
        result = await client.call_tool(
            "bash", {"command": "echo one; exec sleep 1000", "run_in_background": True}
        )
        task = result.content[0].text.removeprefix("started background task ")
        print(f"started {task}", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        listed = await client.call_tool("task_list", {})
        print("listed " + " | ".join(c.text for c in listed.content).replace("\n", " / "), flush=True)
        after = await client.call_tool("bash", {"command": "echo after the restart"})
        print("after " + after.content[0].text.replace("\n", " / "), flush=True)
    print("ok", flush=True)


anyio.run(main)
