"""AgentClient: how an LLM agent speaks through an avatar session (no torch, no WebRTC).

    async with AgentClient("http://127.0.0.1:8080", session_id) as agent:
        await agent.speak("Hello!")                 # text, spoken by the server's voice
        async with agent.audio(rate=16000) as voice:  # or your own TTS's PCM16 mono
            await voice.push(pcm_bytes)
            await voice.end()
        async for event in agent.events():          # speak_started, interrupted, ...
            ...
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import numpy as np

IDLE_REUSE_S = 5.0
"""An idle pooled connection is reused for this long at most: the server closes idle ones
after 10 s, and a request written onto one as it closes would fail (POSTs are not retried)."""


def http_session(headers: dict[str, str] | None = None) -> aiohttp.ClientSession:
    """An HTTP client for this server."""
    return aiohttp.ClientSession(headers=headers, connector=aiohttp.TCPConnector(keepalive_timeout=IDLE_REUSE_S))


class AgentError(Exception):
    """The server refused a request (its error code and message)."""

    def __init__(self, status: int, body: dict):
        error = body.get("error", {}) if isinstance(body, dict) else {}
        super().__init__(f"{status} {error.get('code', '')}: {error.get('message', body)}")
        self.status, self.code = status, error.get("code")


class AudioStream:
    """The session's agent audio socket: push PCM16 mono, end or interrupt the utterance;
    `messages` are the server's answers: `utterance`, `playback_started`,
    `playback_finished {position_ms, interrupted}` (for this socket's audio) and `error`."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self.ws = ws

    async def push(self, pcm: bytes | np.ndarray) -> None:
        data = pcm.astype("<i2").tobytes() if isinstance(pcm, np.ndarray) else pcm
        await self.ws.send_bytes(data)

    async def end(self) -> None:
        """No more audio for this utterance (it plays out, then speak_ended)."""
        await self.ws.send_json({"type": "speak_end"})

    async def interrupt(self) -> None:
        """Stop this session's speech now (LiveKit's clear_buffer)."""
        await self.ws.send_json({"type": "interrupt"})

    async def messages(self) -> AsyncIterator[dict]:
        async for msg in self.ws:
            if msg.type == aiohttp.WSMsgType.TEXT:
                yield json.loads(msg.data)

    async def close(self) -> None:
        await self.ws.close()

    async def __aenter__(self) -> AudioStream:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


class AgentClient:
    """Speak text or audio into an existing session and read its events."""

    def __init__(self, base_url: str, session_id: str, token: str | None = None):
        self.base_url, self.session_id = base_url.rstrip("/"), session_id
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = http_session(headers)

    def _url(self, path: str) -> str:
        return f"{self.base_url}/v1/sessions/{self.session_id}/{path}"

    async def _post(self, path: str, payload: dict | None = None) -> dict:
        async with self._http.post(self._url(path), json=payload) as res:
            body = await res.json(content_type=None)
            if res.status >= 400:
                raise AgentError(res.status, body)
            return body

    async def speak(self, text: str) -> str:
        """Speak text with the server's voice; returns the utterance id."""
        return (await self._post("speak", {"text": text}))["utterance_id"]

    async def interrupt(self) -> None:
        await self._post("interrupt")

    async def open_audio(self, rate: int = 16000) -> AudioStream:
        return AudioStream(await self._http.ws_connect(self._url(f"audio?rate={rate}")))

    def audio(self, rate: int = 16000):
        """`async with agent.audio(16000) as voice:` a pushed-audio socket."""
        return _Opening(self.open_audio(rate))

    async def events(self) -> AsyncIterator[dict]:
        async with self._http.ws_connect(self._url("events")) as ws:
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    yield json.loads(msg.data)

    async def close(self) -> None:
        await self._http.close()

    async def __aenter__(self) -> AgentClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


class _Opening:
    def __init__(self, coro):
        self._coro = coro

    async def __aenter__(self) -> AudioStream:
        self._stream = await self._coro
        return self._stream

    async def __aexit__(self, *exc) -> None:
        await self._stream.close()
