"""The agent audio socket: an LLM agent pushes PCM16 mono and the avatar speaks it.

Binary messages are audio at the `rate` of the URL; rendering starts with the first
chunk (never waits for the end). Text messages: {"type": "speak_end"} ends the
utterance, {"type": "interrupt"} cancels it. Audio pushed after an interrupt or a
speak_end starts a new utterance.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import av
import numpy as np
from aiohttp import WSMsgType, web

from ..errors import ApiError

if TYPE_CHECKING:
    from ..session import Session

MIN_RATE, MAX_RATE = 8000, 48000
OUT_RATE = 48000


def parse_rate(request: web.Request) -> int:
    raw = request.query.get("rate", "16000")
    try:
        rate = int(raw)
    except ValueError:
        raise ApiError(400, "bad_rate", f"'rate' must be an integer sample rate, got {raw!r}") from None
    if not MIN_RATE <= rate <= MAX_RATE:
        raise ApiError(400, "bad_rate", f"'rate' must be between {MIN_RATE} and {MAX_RATE}")
    return rate


class Resampler:
    """Streaming PCM16 mono resampler to 48 kHz (keeps its filter state across chunks)."""

    def __init__(self, rate: int):
        self.rate = rate
        self._resampler = None if rate == OUT_RATE else av.AudioResampler("s16", "mono", OUT_RATE)

    def __call__(self, pcm: np.ndarray) -> np.ndarray:
        if self._resampler is None:
            return pcm
        frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = self.rate
        out = [f.to_ndarray().reshape(-1) for f in self._resampler.resample(frame)]
        return np.concatenate(out) if out else np.zeros(0, np.int16)


async def serve_agent_audio(session: "Session", request: web.Request, rate: int) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(heartbeat=20, max_msg_size=2 * 1024 * 1024)
    await ws.prepare(request)
    resample, utterance = Resampler(rate), None
    try:
        async for msg in ws:
            if session.closed.is_set():
                break
            if msg.type == WSMsgType.BINARY:
                utterance = await _audio(session, ws, resample, utterance, msg.data)
            elif msg.type == WSMsgType.TEXT:
                utterance = await _control(session, ws, utterance, msg.data)
    finally:
        if utterance is not None:
            session.end_live(utterance)
    return ws


async def _audio(session, ws, resample: Resampler, utterance, data: bytes):
    if len(data) % 2:
        await _refuse(ws, session, "bad_audio", "binary messages are PCM16: an even number of bytes")
        return utterance
    if utterance is None:
        utterance = session.open_live()
        await ws.send_json({"type": "utterance", "utterance_id": utterance})
    pcm = resample(np.frombuffer(data, "<i2"))
    if len(pcm) and not await session.push_audio(utterance, pcm):
        return None  # interrupted meanwhile: the next chunk starts a new utterance
    return utterance


async def _control(session, ws, utterance, data: str):
    try:
        kind = json.loads(data).get("type")
    except (ValueError, AttributeError):
        kind = None
    if kind == "speak_end":
        if utterance is not None:
            session.end_live(utterance)
        return None
    if kind == "interrupt":
        session.interrupt()
        return None
    await _refuse(ws, session, "bad_message", "text messages are {'type': 'speak_end'} or {'type': 'interrupt'}")
    return utterance


async def _refuse(ws, session, code: str, message: str) -> None:
    import time

    await ws.send_json({"type": "error", "session_id": session.id, "t": time.time(), "code": code, "message": message})
