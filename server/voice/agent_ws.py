"""The agent audio socket: an LLM agent pushes PCM16 mono and the avatar speaks it.

Binary messages are audio at the `rate` of the URL; rendering starts with the first
chunk (never waits for the end). Text messages: {"type": "speak_end"} ends the
utterance (LiveKit's flush), {"type": "interrupt"} or {"type": "clear_buffer"} cancels
it. Audio pushed after an interrupt or a speak_end starts a new utterance. The socket
tells the agent `utterance` (the id of the audio it started) and, for its own
utterances, `playback_started` and `playback_finished {position_ms, interrupted}` (what
LiveKit's avatar protocol reports), so an agent needs no second socket to pace itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Protocol

import numpy as np
from aiohttp import WSMsgType, web

from media.clock import SAMPLE_RATE
from media.resample import MonoResampler
from server.errors import ApiError, parse_json
from server.events import event
from server.token_bucket import TokenBucket

if TYPE_CHECKING:
    from server.events import EventHub
    from server.voice.utterances import Utterances


class AgentSession(Protocol):
    """What an agent's socket uses of its session: no more."""

    id: str
    hub: EventHub
    utterances: Utterances
    closed: asyncio.Event


MIN_RATE, MAX_RATE = 8000, SAMPLE_RATE
MAX_MESSAGE_S = 5.0  # audio in one binary message; longer ones are refused, not queued
MAX_MESSAGE_BYTES = int(MAX_RATE * 2 * MAX_MESSAGE_S)  # larger frames close the socket (1009)
MAX_MESSAGES_PER_S = 500  # a flood of tiny messages is read at this pace, not resampled at any rate
INTERRUPTS = ("interrupt", "clear_buffer")  # ours, and LiveKit's name for it
PLAYBACK = ("playback_started", "playback_finished")
CLOSE_GRACE_S = 2.0  # a session's end waits this long, at most, for its last events to reach the agent


def parse_rate(request: web.Request) -> int:
    raw = request.query.get("rate", "16000")
    try:
        rate = int(raw)
    except ValueError:
        raise ApiError(400, "bad_rate", f"'rate' must be an integer sample rate, got {raw!r}") from None
    if not MIN_RATE <= rate <= MAX_RATE:
        raise ApiError(400, "bad_rate", f"'rate' must be between {MIN_RATE} and {MAX_RATE}")
    return rate


async def serve_agent_audio(session: AgentSession, request: web.Request, rate: int) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(heartbeat=20, max_msg_size=MAX_MESSAGE_BYTES)
    await ws.prepare(request)
    resample, utterance, budget = MonoResampler(SAMPLE_RATE), None, RateLimit(MAX_MESSAGES_PER_S)
    events, mine = session.hub.subscribe(), set[str]()  # mine: this socket's utterances
    reporter = asyncio.ensure_future(_report_playback(events, ws, mine))
    closer = asyncio.ensure_future(_close_with(session, ws, reporter))
    try:
        async for msg in ws:
            if session.closed.is_set():
                break
            await budget.wait()
            if msg.type == WSMsgType.BINARY:
                utterance = await _audio(session, ws, resample, rate, utterance, msg.data)
                if utterance is not None:
                    if len(mine) > 64:  # finishes lost to a subscriber queue's overflow: never a growing set
                        mine.pop()
                    mine.add(utterance)
            elif msg.type == WSMsgType.TEXT:
                utterance = await _control(session, ws, utterance, msg.data)
    finally:
        closer.cancel()
        reporter.cancel()
        session.hub.unsubscribe(events)
        if utterance is not None:
            session.utterances.end_live(utterance)
    return ws


async def _report_playback(events: asyncio.Queue, ws: web.WebSocketResponse, mine: set[str]) -> None:
    """The playback events of this socket's utterances, as the session's events socket has them."""
    while (message := await events.get()) is not None:
        if message["type"] in PLAYBACK and message["utterance_id"] in mine:
            if message["type"] == "playback_finished":
                mine.discard(message["utterance_id"])  # its last event: the set stays small
            await ws.send_json(message)


async def _close_with(session: AgentSession, ws: web.WebSocketResponse, reporter: asyncio.Future) -> None:
    """The socket ends with its session (deleted, failed or the server stopping), once it
    has told the agent how its utterances finished (the reporter ends with the events)."""
    await session.closed.wait()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(asyncio.shield(reporter), CLOSE_GRACE_S)
    await ws.close(code=1001, message=b"session ended")


class RateLimit:
    """A token bucket of `per_s` messages a second (bursts of as many). Beyond it the
    socket is read more slowly: TCP pushes back on the sender and nothing is lost."""

    def __init__(self, per_s: float):
        self.per_s, self.bucket = per_s, TokenBucket(per_s, time.monotonic())

    async def wait(self) -> None:
        self.bucket.fill(time.monotonic(), self.per_s)
        if self.bucket.tokens < 1:
            await asyncio.sleep((1 - self.bucket.tokens) / self.per_s)
            self.bucket.tokens, self.bucket.at = 1.0, time.monotonic()  # what the sleep earned
        self.bucket.take()


async def _audio(session: AgentSession, ws: web.WebSocketResponse, resample: MonoResampler, rate: int,
                 utterance: str | None, data: bytes) -> str | None:
    """One binary message: PCM16 mono at `rate`, the agent's."""
    if not data:
        return utterance  # an empty message carries no audio
    if len(data) % 2:
        await _refuse(ws, session, "bad_audio", "binary messages are PCM16: an even number of bytes")
        return utterance
    if len(data) > rate * 2 * MAX_MESSAGE_S:
        await _refuse(ws, session, "audio_too_long", f"one message may carry at most {MAX_MESSAGE_S:.0f} s of "
                      "audio; send it in smaller pieces (it was dropped)")
        return utterance
    if utterance is None:
        utterance = session.utterances.open_live()
        await ws.send_json(event(session.id, "utterance", utterance_id=utterance))
    pcm = resample.pcm(np.frombuffer(data, "<i2"), rate)
    if len(pcm) and not await session.utterances.push_audio(utterance, pcm):
        return None  # interrupted meanwhile: the next chunk starts a new utterance
    return utterance


async def _control(session: AgentSession, ws: web.WebSocketResponse, utterance: str | None, data: str) -> str | None:
    try:
        message = parse_json(data)
    except ApiError:
        message = None
    kind = message.get("type") if isinstance(message, dict) else None
    if kind == "speak_end":
        if utterance is not None:
            session.utterances.end_live(utterance)
        return None
    if kind in INTERRUPTS:
        session.utterances.interrupt()
        return None
    await _refuse(ws, session, "bad_message", "text messages are {'type': 'speak_end'} or {'type': 'interrupt'} "
                  "(also called 'clear_buffer')")
    return utterance


async def _refuse(ws: web.WebSocketResponse, session: AgentSession, code: str, message: str) -> None:
    await ws.send_json(event(session.id, "error", code=code, message=message))
