"""A receive-only WHEP player (aiortc): POST an SDP offer, play what comes, DELETE to leave."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import numpy as np
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

from testkit.frames import FrameLog


class WhepViewer:
    def __init__(self, base_url: str, path: str, pictures: bool = True):
        """`pictures`: keep every fifth picture as RGB (a benchmark's many players need not)."""
        self.base_url, self.path, self.pictures = base_url.rstrip("/"), path, pictures
        self.pc = RTCPeerConnection()
        self.video = FrameLog()  # every video frame received, with its media time
        self.audio_frames = 0
        self.last: np.ndarray | None = None  # the latest picture, RGB
        self.location = ""
        self._tasks: list[asyncio.Task] = []

    async def connect(self) -> None:
        self.pc.addTransceiver("video", direction="recvonly")
        self.pc.addTransceiver("audio", direction="recvonly")
        self.pc.on("track", lambda track: self._tasks.append(asyncio.ensure_future(self._play(track))))
        await self.pc.setLocalDescription(await self.pc.createOffer())
        async with aiohttp.ClientSession() as http:
            async with http.post(self.base_url + self.path, data=self.pc.localDescription.sdp,
                                 headers={"Content-Type": "application/sdp"}) as res:
                if res.status != 201:
                    raise RuntimeError(f"{res.status}: {await res.text()}")
                self.location, answer = res.headers["Location"], await res.text()
        await self.pc.setRemoteDescription(RTCSessionDescription(answer, "answer"))

    async def _play(self, track) -> None:
        try:
            while True:
                frame = await track.recv()
                if track.kind == "video":
                    self.video.add(frame)
                    if self.pictures and self.frames % 5 == 0:
                        self.last = frame.to_ndarray(format="rgb24")
                else:
                    self.audio_frames += 1
        except MediaStreamError:
            pass

    @property
    def frames(self) -> int:
        return self.video.count

    async def fps(self, seconds: float) -> float:
        """Frames per second of media time over what arrived in about `seconds` (testkit/frames.py);
        0 when fewer than two frames came."""
        before = self.video.count
        await asyncio.sleep(seconds)
        return self.video.rate_since(before)

    async def wait_frames(self, count: int, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while self.frames < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"received {self.frames} of {count} frames")
            await asyncio.sleep(0.05)

    async def close(self, leave: bool = True) -> int | None:
        status = None
        if leave and self.location:
            async with aiohttp.ClientSession() as http:
                async with http.delete(self.base_url + self.location) as res:
                    status = res.status
        for task in self._tasks:
            task.cancel()
        await self.pc.close()
        return status
