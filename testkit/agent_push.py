"""An agent's speech over the audio socket, paced as a live agent sends it, to a watched session."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import numpy as np

from avatar_client import AgentClient, AvatarViewer


@asynccontextmanager
async def watched_agent(url: str) -> AsyncIterator[tuple[AvatarViewer, AgentClient]]:
    """A viewer recording a new session's media and events (its first second of frames
    already in), and an agent client of that session; both closed afterwards."""
    viewer = AvatarViewer(url)
    await viewer.connect()
    await viewer.record_events()
    assert viewer.session_id is not None  # connect() set it, or raised
    agent = AgentClient(url, viewer.session_id)
    try:
        await viewer.wait_frames(25)
        yield viewer, agent
    finally:
        await agent.close()
        await viewer.close()


def pieces(pcm: np.ndarray, rate: int, pattern_ms: tuple[int, ...]) -> list[np.ndarray]:
    """`pcm` cut into messages of these lengths, in turn."""
    out, lo, i = [], 0, 0
    while lo < len(pcm):
        step = rate * pattern_ms[i % len(pattern_ms)] // 1000
        out.append(pcm[lo : lo + step])
        lo, i = lo + step, i + 1
    return out


async def push_paced(voice, parts: list[np.ndarray], rate: int, speed: float = 1.0) -> None:
    """Each message when its audio would have been spoken (`speed` times faster)."""
    start, sent = time.monotonic(), 0
    for part in parts:
        await asyncio.sleep(max(0.0, start + sent / rate / speed - time.monotonic()))
        await voice.push(part)
        sent += len(part)
