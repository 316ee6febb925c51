"""Broadcast: a speaking session published to Debian's nginx-rtmp on loopback and read back
with PyAV as a player would: H.264 + AAC, 25 fps constant, a keyframe every 2 s, audio and
video on one clock, the mouth moving with the sound; stopping, and an ingest that restarts."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

import aiohttp
import av
import numpy as np
import pytest

from avatar_client import AvatarViewer
from testkit.frames import FrameLog
from testkit.rtmp import NginxRtmp
from testkit.server import ServerProcess
from tests.mouth import OPEN, OPEN_SHARE, dark_pixels

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server():
    """A server whose operator allows broadcasts to this machine's loopback ingests."""
    with ServerProcess(env={"AVATAR_BROADCAST_TARGETS": "127.0.0.1"}) as proc:
        yield proc


@dataclass
class Played:
    """What a player read from the ingest: codecs, video frames and audio, with their times."""

    codecs: tuple[str, str] = ("", "")
    header: bool = False  # the H.264 parameter sets came in the stream header (FLV's sequence header)
    video: list[tuple[float, bool, int]] = field(default_factory=list)  # (pts s, keyframe, mouth's dark pixels)
    audio: list[tuple[float, np.ndarray]] = field(default_factory=list)  # (pts s, mono samples at int16 scale)


def play(url: str, seconds: float, played: Played, ready: threading.Event, wait_s: float = 20) -> None:
    """Read the stream from its first packet (the player waits up to `wait_s` for the publisher)."""
    ready.set()
    with av.open(url, timeout=(wait_s, 3)) as c:
        video, audio = c.streams.video[0], c.streams.audio[0]
        played.codecs = (video.codec_context.name, audio.codec_context.name)
        played.header = bool(video.codec_context.extradata)
        try:
            _read(c, video, audio, time.monotonic() + seconds, played)
        except av.error.ExitError:  # nothing for 3 s: the publisher has gone (nginx keeps players open)
            if not played.video:
                raise


def _read(c, video, audio, until: float, played: Played) -> None:
    for packet in c.demux(video, audio):
        for frame in packet.decode():
            t = float(frame.pts * frame.time_base)
            if isinstance(frame, av.VideoFrame):
                played.video.append((t, frame.key_frame, dark_pixels(frame.to_ndarray(format="rgb24"))))
            else:  # AAC decodes to floats in [-1, 1]
                played.audio.append((t, frame.to_ndarray().reshape(-1) * 32768.0))
        if time.monotonic() > until:
            return


async def broadcast(http: aiohttp.ClientSession, url: str, session_id: str, target: object) -> tuple[int, dict]:
    async with http.post(f"{url}/v1/sessions/{session_id}/broadcast", json={"url": target}) as res:
        return res.status, await res.json()


async def playing(url: str) -> AvatarViewer:
    """A session with its viewer playing and recording its events."""
    viewer = AvatarViewer(url)
    await viewer.connect()
    await viewer.record_events()
    await viewer.wait_frames(25)
    return viewer


def loudness(played: Played, t: float) -> float:
    """RMS of the audio within the 40 ms from `t`."""
    pcm = [p for at, p in played.audio if t - 0.03 <= at < t + 0.04]
    return float(np.sqrt(np.mean(np.concatenate(pcm).astype(np.float64) ** 2))) if pcm else 0.0


async def test_a_speaking_session_is_published_to_rtmp_and_plays_back(server):
    with NginxRtmp() as ingest:
        viewer = AvatarViewer(server.url)
        await viewer.connect()
        events = await viewer.record_events()
        played, ready = Played(), threading.Event()
        player = asyncio.ensure_future(asyncio.to_thread(play, ingest.url("talk"), 9.0, played, ready))
        try:
            await viewer.wait_frames(25)
            await asyncio.to_thread(ready.wait, 5)
            async with aiohttp.ClientSession() as http:
                status, body = await broadcast(http, server.url, viewer.session_id, ingest.url("talk"))
                assert status == 202 and body["target"] == f"rtmp://127.0.0.1:{ingest.port}/live", body
                assert (await broadcast(http, server.url, viewer.session_id, ingest.url("b")))[0] == 409
                await viewer.wait_event("broadcast_started", 10)
                await asyncio.sleep(1.0)
                await viewer.post("speak", {"text": "Hello there. This is the avatar speaking live to an ingest."})
                await player
        finally:
            player.cancel()
            await viewer.close()
    assert played.codecs == ("h264", "aac") and played.header, played.codecs
    times = np.array([t for t, _, _ in played.video])
    assert len(times) >= 8 * 25 and np.allclose(np.diff(times), 0.04, atol=0.002), "not a constant 25 fps"
    keys = [i for i, (_, key, _) in enumerate(played.video) if key]
    assert keys[0] == 0 and np.all(np.diff(keys) == 50), f"keyframes at {keys}: every 2 s, none between"
    assert abs(played.audio[0][0] - times[0]) <= 0.04, f"audio starts at {played.audio[0][0]}, video at {times[0]}"
    speaking = [mouth for t, _, mouth in played.video if loudness(played, t) > 1000]
    silent = [mouth for t, _, mouth in played.video if loudness(played, t) < 30]
    assert len(speaking) > 25 and len(silent) > 25, (len(speaking), len(silent))
    assert np.mean([m > OPEN for m in speaking]) > OPEN_SHARE > np.mean([m > OPEN for m in silent]), \
        "the broadcast mouth does not move with the broadcast sound"
    assert not any(e["type"] == "broadcast_error" for e in events), events


async def test_an_ingest_that_restarts_is_published_to_again_and_a_broadcast_stops(server):
    ingest = NginxRtmp()
    ingest.start()
    viewer = await playing(server.url)
    try:
        async with aiohttp.ClientSession() as http:
            for bad in ("ftp://example.com/x", "rtmp:///live/key", 42):
                assert (await broadcast(http, server.url, viewer.session_id, bad))[0] == 400, bad
            assert (await broadcast(http, server.url, viewer.session_id, ingest.url()))[0] == 202
            first = await viewer.wait_event("broadcast_started", 10)
            ingest.stop()
            error = await viewer.wait_event("broadcast_error", 10, after=first["t"])
            assert error["reason"] and error["retry_in_s"] >= 1, error
            ingest.start()  # the same address again: the next try succeeds
            await viewer.wait_event("broadcast_started", 30, after=error["t"])
            url = f"{server.url}/v1/sessions/{viewer.session_id}/broadcast"
            async with http.delete(url) as res:
                assert res.status == 204
            stopped = await viewer.wait_event("broadcast_stopped", 10)
            # a local ingest keeps up: at most a second of pictures lost to a full pipe, on a busy machine
            assert isinstance(stopped["dropped_ticks"], int) and 0 <= stopped["dropped_ticks"] <= 25, stopped
            async with http.delete(url) as res:
                assert res.status == 404 and (await res.json())["error"]["code"] == "no_broadcast"
    finally:
        ingest.stop()
        await viewer.close()


class WhipIngest:
    """A small WHIP endpoint (aiohttp + aiortc): takes one publisher, plays what it sends."""

    def __init__(self) -> None:
        self.refuse = True  # the first offers get 503, as an ingest that is not up yet
        self.video, self.audio = FrameLog(), FrameLog()
        self.last = None
        self.codecs: list[str] = []
        self.deleted = asyncio.Event()
        self.pcs: list = []

    async def start(self) -> str:
        from aiohttp import web

        app = web.Application()
        app.router.add_post("/whip", self._offer)
        app.router.add_delete("/whip/{id}", self._delete)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/whip"

    async def _offer(self, request):
        from aiohttp import web
        from aiortc import RTCPeerConnection, RTCSessionDescription

        if self.refuse:
            return web.Response(status=503, text="not ready")
        pc = RTCPeerConnection()
        self.pcs.append(pc)
        pc.on("track", lambda track: asyncio.ensure_future(self._play(track)))
        await pc.setRemoteDescription(RTCSessionDescription(await request.text(), "offer"))
        await pc.setLocalDescription(await pc.createAnswer())
        self.codecs = [line for line in pc.localDescription.sdp.splitlines() if line.startswith("a=rtpmap")]
        return web.Response(status=201, text=pc.localDescription.sdp, content_type="application/sdp",
                            headers={"Location": f"/whip/{len(self.pcs)}"})

    async def _delete(self, request):
        from aiohttp import web

        self.deleted.set()
        await self.pcs[int(request.match_info["id"]) - 1].close()
        return web.Response(status=200)

    async def _play(self, track) -> None:
        from aiortc.mediastreams import MediaStreamError

        try:
            while True:
                frame = await track.recv()
                if track.kind == "video":
                    self.video.add(frame)
                    self.last = frame.to_ndarray(format="rgb24")
                else:
                    self.audio.add(frame)
        except MediaStreamError:
            pass

    async def stop(self) -> None:
        for pc in self.pcs:
            await pc.close()
        await self.runner.cleanup()


async def test_a_session_is_published_to_a_whip_ingest_with_h264_and_opus(server):
    from engine.families.video.tracking import track_landmarks

    ingest = WhipIngest()
    url = await ingest.start()
    viewer = await playing(server.url)
    try:
        async with aiohttp.ClientSession() as http:
            assert (await broadcast(http, server.url, viewer.session_id, url))[0] == 202
            error = await viewer.wait_event("broadcast_error", 10)
            assert (error["reason"], error["status"]) == ("refused", 503), error
            ingest.refuse = False
            await viewer.wait_event("broadcast_started", 15, after=error["t"])
            await ingest.video.rate(25)  # past the start
            # Three seconds of media: its timestamps show any tick the publisher skipped.
            fps, audio_per_s = await asyncio.gather(ingest.video.rate(75), ingest.audio.rate(150))
            assert fps >= 23 and audio_per_s >= 40, (fps, audio_per_s)  # 25 pictures, 50 Opus frames a second
            assert any("H264" in c for c in ingest.codecs) and any("opus" in c for c in ingest.codecs), ingest.codecs
            assert np.isfinite(track_landmarks([ingest.last])[0, 0, 0]), "no face in what the ingest got"
            async with http.delete(f"{server.url}/v1/sessions/{viewer.session_id}/broadcast") as res:
                assert res.status == 204
            await asyncio.wait_for(ingest.deleted.wait(), 5)  # the publisher ended its WHIP resource
            await viewer.wait_event("broadcast_stopped", 5)
    finally:
        await viewer.close()
        await ingest.stop()


async def test_avatar_render_streams_a_render_live_at_real_time_pace():
    import sys

    from testkit.server import ROOT, SHARED_DATA

    with NginxRtmp() as ingest:
        played, ready = Played(), threading.Event()
        player = asyncio.ensure_future(asyncio.to_thread(play, ingest.url("render"), 40.0, played, ready, 90))
        await asyncio.to_thread(ready.wait, 5)
        started = time.monotonic()
        render = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "engine.batch.render", "--audio", str(SHARED_DATA / "jfk.flac"),
            "--out", ingest.url("render"), cwd=ROOT, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(render.communicate(), 120)
        elapsed = time.monotonic() - started
        assert render.returncode == 0, err.decode()[-2000:]
        await asyncio.wait_for(player, 20)  # the stream ends with the render
    assert played.codecs == ("h264", "aac"), played.codecs
    times = np.array([t for t, _, _ in played.video])
    assert abs(len(times) - 276) <= 3 and np.allclose(np.diff(times), 0.04, atol=0.002), len(times)
    assert elapsed >= 10.5, f"11 s of speech went out in {elapsed:.1f} s: not at real-time pace"
