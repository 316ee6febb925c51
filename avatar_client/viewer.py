"""AvatarViewer: a real aiortc peer that opens a session and records what it receives."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import aiohttp
import numpy as np
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from av import AudioFrame

from .agent import http_session
from .jitter import tolerate_loss

if TYPE_CHECKING:
    from aiortc.contrib.media import MediaPlayer

EVENTS_KEPT = 5000


class ClockedMicrophone(MediaStreamTrack):
    """An audio track passed through, noting when its media time 0 left (time.time()): the
    player paces the file in real time, so its sample at t seconds leaves at `started + t`."""

    kind = "audio"

    def __init__(self, source: MediaStreamTrack):
        super().__init__()
        self.source = source
        self.started: float | None = None

    async def recv(self) -> AudioFrame:
        frame = await self.source.recv()
        assert isinstance(frame, AudioFrame)
        if self.started is None and frame.time is not None:
            self.started = time.time() - frame.time
        return frame

    def stop(self) -> None:
        super().stop()
        self.source.stop()  # the player's reading thread ends with its track


@dataclass
class Received:
    video: list[tuple[float, np.ndarray]] = field(default_factory=list)  # (arrival, RGB frame)
    audio: list[tuple[float, np.ndarray]] = field(default_factory=list)  # (arrival, 48 kHz mono int16)
    first_frame_at: float | None = None
    # each frame's media time (its RTP timestamp in seconds, from an arbitrary start), in step
    # with `video` and `audio`: where a player with a jitter buffer puts it
    video_time: list[float] = field(default_factory=list)
    audio_time: list[float] = field(default_factory=list)


class AvatarViewer:
    """Connects like a browser would; keeps the last `keep_frames` video frames.

    Its RTCP receiver reports go out from the event loop it runs on: block that loop for
    6 s and the server takes the viewer for gone (`peer_gone`). Work on frames in a thread."""

    def __init__(self, base_url: str, keep_frames: int = 2000, avatar: str = "default", mode: str = "tts",
                 microphone: str | None = None):
        """`microphone`: an audio file played into the session as the user's voice (mirror/chat)."""
        self.base_url, self.keep, self.avatar, self.mode = base_url.rstrip("/"), keep_frames, avatar, mode
        self.microphone = microphone
        self.pc = RTCPeerConnection()
        self.received = Received()
        self.session_id: str | None = None
        self.offer_sent_at = 0.0
        self.video_count = 0
        self._tasks: list[asyncio.Task] = []
        self._http = http_session()
        self._player: MediaPlayer | None = None
        self.mic: ClockedMicrophone | None = None  # the microphone file, as it is sent
        self.seen: list[dict] = []

    async def connect(self) -> dict:
        tolerate_loss(self.pc.addTransceiver("video", direction="recvonly").receiver)
        if self.microphone:
            from aiortc.contrib.media import MediaPlayer

            self._player = MediaPlayer(self.microphone)
            assert self._player.audio is not None, f"{self.microphone} holds no audio"
            self.mic = ClockedMicrophone(self._player.audio)
            self.pc.addTransceiver(self.mic, direction="sendrecv")
        else:
            self.pc.addTransceiver("audio", direction="recvonly")
        self.pc.on("track", self._on_track)
        await self.pc.setLocalDescription(await self.pc.createOffer())
        self.offer_sent_at = time.monotonic()
        body = {"sdp": self.pc.localDescription.sdp, "type": "offer", "avatar": self.avatar, "mode": self.mode}
        async with self._http.post(f"{self.base_url}/v1/sessions", json=body) as res:
            answer = await res.json()
            if res.status != 201:
                raise RuntimeError(f"session refused: {res.status} {answer}")
        self.session_id = answer["session_id"]
        await self.pc.setRemoteDescription(RTCSessionDescription(answer["sdp"], answer["type"]))
        return answer

    def _on_track(self, track) -> None:
        self._tasks.append(asyncio.ensure_future(self._read(track)))

    async def _read(self, track) -> None:
        try:
            while True:
                frame = await track.recv()
                now = time.monotonic()
                if track.kind == "video":
                    self._video(now, frame.to_ndarray(format="rgb24"), float(frame.pts * frame.time_base))
                else:
                    pcm = frame.to_ndarray().reshape(-1, len(frame.layout.channels))[:, 0]
                    self.received.audio.append((now, pcm.astype(np.int16)))
                    self.received.audio_time.append(float(frame.pts * frame.time_base))
        except MediaStreamError:
            pass

    def _video(self, now: float, rgb: np.ndarray, media_time: float) -> None:
        if self.received.first_frame_at is None:
            self.received.first_frame_at = now
        self.video_count += 1
        got = self.received
        got.video.append((now, rgb))
        got.video_time.append(media_time)
        for kept, limit in ((got.video, self.keep), (got.video_time, self.keep), (got.audio, self.keep * 2),
                            (got.audio_time, self.keep * 2)):
            del kept[:-limit]

    @property
    def ttff_ms(self) -> float | None:
        first = self.received.first_frame_at
        return None if first is None else (first - self.offer_sent_at) * 1000

    async def wait_frames(self, count: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while self.video_count < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"received {self.video_count} of {count} frames")
            await asyncio.sleep(0.02)

    async def post(self, action: str, payload: dict | None = None) -> tuple[int, dict]:
        url = f"{self.base_url}/v1/sessions/{self.session_id}/{action}"
        async with self._http.post(url, json=payload) as res:
            return res.status, await res.json(content_type=None)

    async def events(self) -> aiohttp.ClientWebSocketResponse:
        return await self._http.ws_connect(f"{self.base_url}/v1/sessions/{self.session_id}/events")

    async def record_events(self) -> list[dict]:
        """Collect the session's events in the background (the last EVENTS_KEPT of them)."""
        ws = await self.events()

        async def read() -> None:
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    self.seen.append(json.loads(msg.data))
                    del self.seen[:-EVENTS_KEPT]

        self._tasks.append(asyncio.ensure_future(read()))
        return self.seen

    async def wait_event(self, kind: str, timeout: float = 10.0, after: float = 0.0) -> dict:
        """The first recorded event of `kind` with server time `t` >= `after`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.seen:
                if event["type"] == kind and event["t"] >= after:
                    return event
            await asyncio.sleep(0.02)
        raise TimeoutError(f"no {kind} event; got {[e['type'] for e in self.seen]}")

    async def wait_played(self, timeout: float = 30.0, after: float = 0.0) -> dict:
        """The first `speak_ended` from `after` on of an utterance played to its end (cut ones
        end with `speak_ended` too, `interrupted` true)."""
        while (ended := await self.wait_event("speak_ended", timeout, after))["interrupted"]:
            after = ended["t"] + 1e-6
        return ended

    async def sent_fps(self, reports: int = 3) -> float:
        """Frames per second the server sent this viewer over its next `reports` stats events
        (needs record_events): what the viewer is given, however fast this process decodes."""
        after = time.time()  # events carry the server's wall-clock time
        for _ in range(reports):
            after = (await self.wait_event("stats", 10, after=after))["t"] + 1e-3
        stats = [e for e in self.seen if e["type"] == "stats"][-reports:]
        return sum(e["fps"] for e in stats) / len(stats)

    async def close(self, delete: bool = True) -> int | None:
        status = None
        if delete and self.session_id:
            async with self._http.delete(f"{self.base_url}/v1/sessions/{self.session_id}") as res:
                status = res.status
        for task in self._tasks:
            task.cancel()
        await self.pc.close()
        await self._http.close()
        return status
