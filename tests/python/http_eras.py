"""taskhost over Streamable HTTP with the official MCP Python SDK, in both protocol eras, one token.

Usage: http_eras.py URL TOKEN BASH
URL is the host's /mcp endpoint; TOKEN a principal's bearer token; BASH the bash plugin file the host
loaded (writable: a "rebuild" is the same bytes under a new GNU build id, renamed into place).

Each scenario prints `ok <name>` or raises. Checks:
- modern (2026-07-28, stateless over HTTP): a background task starts; subscribed with
  listen(tools_list_changed=True), the change after the plugin file is replaced arrives on the stream;
  the task's completion notice rides on a later tool result;
- legacy (a session over HTTP, same token): the task the modern client started is listed and read
  (one owner); a change arrives as notifications/tools/list_changed and a completion notice as a
  logging message;
- a client without the token is refused (the SDK raises).
"""

import sys

import anyio
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from shared import Seen, rebuild

URL, TOKEN, BASH = sys.argv[1], sys.argv[2], sys.argv[3]


def rebuild_bash() -> None:
    rebuild(BASH)


def transport(token: str | None = TOKEN):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return streamable_http_client(URL, http_client=create_mcp_http_client(headers=headers))


async def modern() -> str:
    async with Client(transport(), mode="auto") as client:
        assert client.protocol_version == "2026-07-28", client.protocol_version
        started = await client.call_tool("bash", {"command": "echo shared", "run_in_background": True})
        task = started.content[0].text.removeprefix("started background task ")
        async with client.listen(tools_list_changed=True) as sub:
            rebuild_bash()
            with anyio.fail_after(20):
                event = await sub.__anext__()
            assert type(event).__name__ == "ToolsListChanged", event
        # The notice rides on the owner's next answer: the start's own when the task settled first.
        def told(result) -> bool:
            return any(task in c.text and "finished" in c.text for c in result.content[1:])

        with anyio.fail_after(20):
            while not told(started) and not told(await client.call_tool("task_list", {})):
                await anyio.sleep(0.05)
    print("ok modern", flush=True)
    return task


async def legacy(task: str) -> None:
    seen = Seen()
    async with Client(
        transport(), mode="legacy", logging_callback=seen.log, message_handler=seen.message
    ) as client:
        assert client.protocol_version != "2026-07-28", client.protocol_version
        listed = await client.call_tool("task_list", {})
        assert task in listed.content[0].text, listed
        read = await client.call_tool("task_output", {"task_id": task})
        assert read.content[0].text.startswith("shared\n"), read
        rebuild_bash()
        with anyio.fail_after(20):
            while seen.list_changed == 0:
                await anyio.sleep(0.05)
        started = await client.call_tool("bash", {"command": "echo hi", "run_in_background": True})
        second = started.content[0].text.removeprefix("started background task ")
        with anyio.fail_after(20):
            while not any(second in line and "finished" in line for line in seen.logs):
                await anyio.sleep(0.05)
    print("ok legacy", flush=True)


async def refused() -> None:
    try:
        async with Client(transport(None), mode="auto") as client:
            await client.list_tools()
    except Exception as e:  # noqa: BLE001 - any refusal will do; what matters is that nothing was served
        print(f"ok refused ({type(e).__name__})", flush=True)
        return
    raise AssertionError("a client without a token was served")


async def main() -> None:
    task = await modern()
    await legacy(task)
    await refused()


anyio.run(main)
