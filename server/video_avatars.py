"""Preparing video avatars: each clip in its own helper process, watched from the event loop.

The helper (`python -m engine.runtime.prepare`) writes one JSON line per step.
The first, `checked`, comes within seconds (stream, length, a face in sampled frames),
so an unusable clip is refused with its reason before the upload is answered; the rest
is progress, read in the background for `GET /v1/avatars/{id}`. The helper runs at a
lower priority than live sessions, and is killed with its avatar's DELETE or the server.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from engine.threads import single_threaded_env
from server.child import next_message
from server.errors import ApiError

log = logging.getLogger(__name__)
CHECK_TIMEOUT_S = 60.0  # the quick check of a clip; past it the clip is refused as unreadable
NICE = 10


@dataclass
class Preparation:
    avatar_id: str
    clip: Path  # the uploaded file; deleted once the helper is done with it
    status: str = "preparing"
    progress: float = 0.0
    stage: str = "checking the clip"
    reason: str = ""
    done: asyncio.Event = field(default_factory=asyncio.Event)
    process: asyncio.subprocess.Process | None = None
    task: asyncio.Task | None = None

    def describe(self) -> dict:
        out: dict = {"avatar_id": self.avatar_id, "kind": "video", "status": self.status}
        if self.status == "preparing":
            out.update(progress=round(self.progress, 3), stage=self.stage)
        if self.status == "failed":
            out["reason"] = self.reason
        return out


async def start(prep: Preparation, folder: Path, size: int) -> None:
    """Start the helper and wait for its quick check: 422 (and nothing left behind) if the clip fails it."""
    nice = ["nice", "-n", str(NICE)] if shutil.which("nice") else []  # (preexec_fn is unsafe with threads)
    prep.process = await asyncio.create_subprocess_exec(
        *nice, sys.executable, "-m", "engine.runtime.prepare", str(prep.clip), "--folder", str(folder),
        "--size", str(size), "--id", prep.avatar_id, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env=_helper_env())
    try:
        first = await asyncio.wait_for(next_message(prep.process), CHECK_TIMEOUT_S)
    except TimeoutError:
        first = {"error": "unreadable", "reason": "the clip could not be read in time"}
    if not first.get("checked"):
        await stop(prep)
        raise ApiError(422, str(first.get("error", "bad_video")),
                       str(first.get("reason", "the clip could not be read as a video")))
    prep.stage = "tracking the face"
    prep.task = asyncio.create_task(_follow(prep))


async def _follow(prep: Preparation) -> None:
    """Read the helper's progress; once it has exited, clean up and only then say how it ended."""
    assert prep.process is not None
    outcome, reason = "failed", "the preparation was stopped"
    try:
        while message := await next_message(prep.process):
            if "progress" in message:
                prep.progress, prep.stage = min(float(message["progress"]), 0.999), str(message.get("stage", ""))
            elif "avatar_id" in message:
                outcome, reason = "ready", ""
            elif "error" in message:
                reason = str(message.get("reason", message["error"]))
        if await prep.process.wait() != 0 and outcome == "ready":
            outcome, reason = "failed", "the preparation stopped unexpectedly"
    finally:
        prep.clip.unlink(missing_ok=True)
        prep.status, prep.reason = outcome, reason
        prep.progress = 1.0 if outcome == "ready" else prep.progress
        prep.done.set()
        log.info("video avatar %s %s %s", prep.avatar_id, outcome, reason)


async def stop(prep: Preparation) -> None:
    """Kill the helper (if it still runs) and remove what it was working on."""
    if prep.process is not None and prep.process.returncode is None:
        prep.process.kill()
        await prep.process.wait()
    if prep.task is not None:
        await asyncio.gather(prep.task, return_exceptions=True)
    prep.clip.unlink(missing_ok=True)


def _helper_env() -> dict[str, str]:
    return single_threaded_env(dict(os.environ))  # the mesh and numpy stay on one core; sessions keep the other
