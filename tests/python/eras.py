"""taskhost with the official MCP Python SDK, in both protocol eras.

Usage: eras.py TASKHOST DIR
DIR holds copies of the tasks and bash plugins (libtaskhost_plugin_tasks.so, libtaskhost_plugin_bash.so),
writable by this script: a "rebuild" of bash is the same bytes under a new GNU build id, renamed into place.

Each scenario prints `ok <name>` or raises. Checks:
- modern (2026-07-28, server/discover) subscribed with listen(tools_list_changed=True): the change after a
  plugin file is replaced arrives on the stream; a completion notice arrives as a logging message (the
  client opted in with log_level);
- legacy (initialize): the change arrives as notifications/tools/list_changed; the notice as a logging message;
- modern, not subscribed: no tools/list_changed reaches it after a replace;
- modern, leaving with its listen stream open: the host ends the session at the client's EOF (its
  stderr, with RUST_LOG=info, says "session ended" before the SDK would stop it with a signal, which it
  does 2 s after closing stdin).
"""

import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from shared import Seen, rebuild

TASKHOST, DIR = sys.argv[1], sys.argv[2]
TASKS = os.path.join(DIR, "libtaskhost_plugin_tasks.so")
BASH = os.path.join(DIR, "libtaskhost_plugin_bash.so")


def rebuild_bash() -> None:
    rebuild(BASH)


def server(log: str = "warn") -> StdioServerParameters:
    return StdioServerParameters(
        command=TASKHOST,
        args=["serve", "--plugin", TASKS, "--plugin", BASH],
        env={**os.environ, "RUST_LOG": log},
    )


async def notice_arrives(client: Client, seen: Seen) -> None:
    result = await client.call_tool("bash", {"command": "echo hi", "run_in_background": True})
    text = result.content[0].text
    assert text.startswith("started background task "), text
    task = text.removeprefix("started background task ")
    with anyio.fail_after(10):
        while not any(task in line and "finished" in line for line in seen.logs):
            await anyio.sleep(0.05)


async def modern_subscribed() -> None:
    seen = Seen()
    async with Client(server(), mode="auto", log_level="info", logging_callback=seen.log) as client:
        assert client.protocol_version == "2026-07-28", client.protocol_version
        async with client.listen(tools_list_changed=True) as sub:
            rebuild_bash()
            with anyio.fail_after(10):
                event = await sub.__anext__()
            assert type(event).__name__ == "ToolsListChanged", event
        await notice_arrives(client, seen)
    print("ok modern_subscribed", flush=True)


async def legacy() -> None:
    seen = Seen()
    async with Client(
        server(), mode="legacy", logging_callback=seen.log, message_handler=seen.message
    ) as client:
        assert client.protocol_version != "2026-07-28", client.protocol_version
        rebuild_bash()
        with anyio.fail_after(10):
            while seen.list_changed == 0:
                await anyio.sleep(0.05)
        await notice_arrives(client, seen)
    print("ok legacy", flush=True)


async def modern_unsubscribed() -> None:
    seen = Seen()
    async with Client(server(), mode="auto", message_handler=seen.message) as client:
        assert client.protocol_version == "2026-07-28", client.protocol_version
        await client.list_tools()
        rebuild_bash()
        await anyio.sleep(3)
        # The host reloaded (the tool list is served by generation 2) but told this client nothing.
        resource = await client.read_resource("taskhost://plugins")
        assert '"generation":2' in resource.contents[0].text, resource
        assert seen.list_changed == 0, seen.list_changed
    print("ok modern_unsubscribed", flush=True)


async def modern_leaves_listening() -> None:
    async with Client(server("taskhost=info"), mode="auto") as client:
        assert client.protocol_version == "2026-07-28", client.protocol_version
        async with client.listen(tools_list_changed=True):
            await client.list_tools()
            print("leaving with a listen stream open", file=sys.stderr, flush=True)
            raise Leave()


class Leave(Exception):
    pass


async def main() -> None:
    await modern_subscribed()
    await legacy()
    await modern_unsubscribed()
    try:
        await modern_leaves_listening()
    except* Leave:
        pass
    print("ok modern_leaves_listening", flush=True)


anyio.run(main)
