"""AvatarService: this server's avatar as a pipecat pipeline's output (pipecat-ai 1.14).

    pipeline = Pipeline([transport.input(), stt, user_aggregator, llm, tts,
                         AvatarService(base_url="http://127.0.0.1:8080", session_id=session_id),
                         assistant_aggregator])

The viewer watches the session (the demo page, WHEP or our JS client); this service
feeds it the pipeline's speech over the session's agent audio socket:
`TTSAudioRawFrame`s are spoken as they arrive (at their own sample rate), a
`TTSStoppedFrame` ends the utterance, and an `InterruptionFrame` or
`UserStartedSpeakingFrame` stops the avatar at once. The audio is consumed here, not
passed on: the avatar plays it, in sync with its lips. The avatar's own playback comes
back into the pipeline as `BotStartedSpeakingFrame` / `BotStoppedSpeakingFrame`
(upstream, where a transport would send them), so turn-taking knows when the bot talks.

pipecat runs in the agent's environment, not the server's (it needs protobuf 5, the
server's face mesh protobuf 4): this module needs only pipecat, aiohttp and numpy.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import numpy as np
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    CancelFrame,
    EndFrame,
    Frame,
    InterruptionFrame,
    StartFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    UserStartedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.ai_service import AIService
from pipecat.services.settings import ServiceSettings

from avatar_client.agent import http_session


class AvatarService(AIService):
    """See the module docstring."""

    def __init__(self, *, base_url: str, session_id: str, token: str | None = None, **kwargs: Any):
        super().__init__(settings=ServiceSettings(model=None), **kwargs)  # a service without a model
        self._url = f"{base_url.rstrip('/')}/v1/sessions/{session_id}/audio"
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._rate = 0  # the socket's sample rate: the TTS frames'
        self._speaking = False  # audio sent since the last end or interrupt
        self._reader: asyncio.Task | None = None

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        self._http = http_session(self._headers)

    async def stop(self, frame: EndFrame) -> None:
        await super().stop(frame)
        await self._close()

    async def cancel(self, frame: CancelFrame) -> None:
        await super().cancel(frame)
        await self._close()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            await self._speak(frame)
            return  # the avatar plays it
        if isinstance(frame, TTSStoppedFrame) and self._speaking and self._ws:
            self._speaking = False
            await self._ws.send_json({"type": "speak_end"})
        elif isinstance(frame, (InterruptionFrame, UserStartedSpeakingFrame)) and self._ws:
            self._speaking = False
            await self._ws.send_json({"type": "interrupt"})
        await self.push_frame(frame, direction)

    async def _speak(self, frame: TTSAudioRawFrame) -> None:
        pcm = np.frombuffer(frame.audio, "<i2")
        if frame.num_channels > 1:  # the socket takes mono
            pcm = pcm.reshape(-1, frame.num_channels).mean(axis=1).astype("<i2")
        ws = await self._socket(frame.sample_rate)
        self._speaking = True
        await ws.send_bytes(pcm.tobytes())

    async def _socket(self, rate: int) -> aiohttp.ClientWebSocketResponse:
        """The agent audio socket at `rate` (reopened if the TTS changes its rate)."""
        if self._ws is None or self._ws.closed or rate != self._rate:
            await self._close_socket()
            assert self._http is not None, "frames before the pipeline's StartFrame"
            self._ws = await self._http.ws_connect(f"{self._url}?rate={rate}")
            self._rate = rate
            self._reader = asyncio.ensure_future(self._read(self._ws))
        return self._ws

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """The avatar's playback, as a transport would report the bot's speech."""
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            message = json.loads(msg.data)
            if message["type"] == "playback_started":
                await self.push_frame(BotStartedSpeakingFrame(), FrameDirection.UPSTREAM)
            elif message["type"] == "playback_finished":
                await self.push_frame(BotStoppedSpeakingFrame(), FrameDirection.UPSTREAM)
            elif message["type"] == "error":
                await self.push_error(error_msg=f"avatar server: {message.get('code')}: {message.get('message')}")

    async def _close_socket(self) -> None:
        if self._reader:
            self._reader.cancel()
            self._reader = None
        if self._ws is not None:
            await self._ws.close()
            self._ws = None

    async def _close(self) -> None:
        await self._close_socket()
        if self._http is not None:
            await self._http.close()
            self._http = None
