"""The server's helper processes (clip preparation, RTMP publishing) speak JSON lines on stdout."""

from __future__ import annotations

import asyncio
import contextlib
import json


async def next_message(process: asyncio.subprocess.Process) -> dict:
    """The helper's next JSON object ({} at its end; a line that is not one is skipped)."""
    assert process.stdout is not None
    while line := await process.stdout.readline():
        with contextlib.suppress(ValueError):
            message = json.loads(line)
            if isinstance(message, dict):
                return message
    return {}
