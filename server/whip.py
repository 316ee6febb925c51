"""WhipBroadcast: a live session published to a WHIP ingest (RFC 9725) through aiortc.

A WHIP publisher is one more viewer that calls out instead of being called: the
session's shared H.264 (server/viewers.py) and its own Opus, on a peer connection whose
offer is POSTed to the ingest; the answer and a `Location` to DELETE come back. A
refused offer or a connection that fails is tried again with backoff, each failure a
`broadcast_error` event, as for RTMP.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

import aiohttp
from aiortc import RTCPeerConnection, RTCSessionDescription

from .broadcast import BACKOFF_S, public
from .link import relay_keyframe_requests
from .playout import Playout
from .signaling import prefer_h264
from .tracks import AvatarAudioTrack
from .viewers import SharedEncoder, SharedVideoTrack

log = logging.getLogger("server.broadcast")
ANSWER_TIMEOUT_S = 10.0


class WhipError(Exception):
    pass


class WhipBroadcast:
    def __init__(self, url: str, playout: Playout, shared: SharedEncoder, emit: Callable[..., Any]):
        self.url, self.playout, self.shared, self._emit = url, playout, shared, emit
        self._task = asyncio.ensure_future(self._run())

    def _report(self, kind: str, **fields: Any) -> None:
        self._emit(kind, target=public(self.url), **fields)

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._report("broadcast_stopped")

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                await self._publish()
                failures = 0  # it was up: the next drop starts the backoff again
            except (WhipError, aiohttp.ClientError, TimeoutError, OSError) as exc:
                wait = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
                failures += 1
                log.warning("WHIP broadcast to %s failed: %s; trying again in %.0f s", public(self.url), exc, wait)
                self._report("broadcast_error", reason=str(exc) or type(exc).__name__, retry_in_s=wait)
                await asyncio.sleep(wait)

    async def _publish(self) -> None:
        """Publish until the connection fails (then the caller tries again) or we are stopped."""
        pc = RTCPeerConnection()
        video, audio = SharedVideoTrack(self.playout, self.shared), AvatarAudioTrack(self.playout)
        location = ""
        try:
            sender = pc.addTransceiver(video, direction="sendonly")
            relay_keyframe_requests(sender.sender, self.shared.want_keyframe)
            prefer_h264(sender)
            pc.addTransceiver(audio, direction="sendonly")
            await pc.setLocalDescription(await pc.createOffer())
            location, answer = await self._offer(pc.localDescription.sdp)
            await pc.setRemoteDescription(RTCSessionDescription(answer, "answer"))
            self.shared.want_keyframe()
            ended = asyncio.Event()

            def state() -> None:
                if pc.connectionState in ("failed", "closed"):
                    ended.set()

            pc.on("connectionstatechange", state)
            self._report("broadcast_started")
            await ended.wait()
            raise WhipError("the WHIP connection failed")
        finally:
            video.stop()
            audio.stop()
            await pc.close()
            if location:
                await self._delete(location)

    async def _offer(self, sdp: str) -> tuple[str, str]:
        timeout = aiohttp.ClientTimeout(total=ANSWER_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            async with http.post(self.url, data=sdp, headers={"Content-Type": "application/sdp"}) as res:
                if res.status != 201:
                    raise WhipError(f"the WHIP ingest answered {res.status}: {(await res.text())[:200]}")
                where = res.headers.get("Location")
                return (urljoin(self.url, where) if where else ""), await res.text()

    async def _delete(self, location: str) -> None:
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
                async with http.delete(location):
                    pass
        except (aiohttp.ClientError, TimeoutError, OSError):
            pass  # the ingest is gone already: nothing to end there
