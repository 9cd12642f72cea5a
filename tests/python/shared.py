"""What the Python scenarios share: a plugin "rebuilt" the way cargo replaces one (the same bytes
under a new GNU build id, written to a new file and renamed over the old: the host loads it as a new
generation), and what a client saw (log messages, tool list changes)."""

import os
from itertools import count

import mcp_types as types

NOTE = b"\x04\0\0\0\x14\0\0\0\x03\0\0\0GNU\0"
_builds = count(1000)


def rebuild(path: str) -> None:
    data = bytearray(open(path, "rb").read())
    at = data.find(NOTE, 0, 4096)
    assert at >= 0, "no GNU build id note in the first 4 KiB"
    at += len(NOTE)
    data[at : at + 4] = next(_builds).to_bytes(4, "little")
    staged = path + ".new"
    with open(staged, "wb") as f:
        f.write(data)
    os.chmod(staged, 0o755)
    os.rename(staged, path)


class Seen:
    """Log messages and `tools/list_changed` notifications a client received."""

    def __init__(self) -> None:
        self.logs: list[str] = []
        self.list_changed = 0

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(str(params.data))

    async def message(self, message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.list_changed += 1
