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
from testkit.rtmp import NginxRtmp
from tests.integration.test_session import OPEN
from tests.mouth import dark_pixels

pytestmark = pytest.mark.integration


@dataclass
class Played:
    """What a player read from the ingest: codecs, video frames and audio, with their times."""

    codecs: tuple[str, str] = ("", "")
    video: list[tuple[float, bool, int]] = field(default_factory=list)  # (pts s, keyframe, mouth's dark pixels)
    audio: list[tuple[float, np.ndarray]] = field(default_factory=list)  # (pts s, mono samples at int16 scale)


def play(url: str, seconds: float, played: Played, ready: threading.Event) -> None:
    """Read the stream from its first packet (the player waits for the publisher)."""
    ready.set()
    with av.open(url, timeout=20) as c:
        video, audio = c.streams.video[0], c.streams.audio[0]
        played.codecs = (video.codec_context.name, audio.codec_context.name)
        start = time.monotonic()
        for packet in c.demux(video, audio):
            for frame in packet.decode():
                t = float(frame.pts * frame.time_base)
                if isinstance(frame, av.VideoFrame):
                    played.video.append((t, frame.key_frame, dark_pixels(frame.to_ndarray(format="rgb24"))))
                else:  # AAC decodes to floats in [-1, 1]
                    played.audio.append((t, frame.to_ndarray().reshape(-1) * 32768.0))
            if time.monotonic() - start > seconds:
                return


async def broadcast(http: aiohttp.ClientSession, url: str, session_id: str, target: object) -> tuple[int, dict]:
    async with http.post(f"{url}/v1/sessions/{session_id}/broadcast", json={"url": target}) as res:
        return res.status, await res.json()


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
    assert played.codecs == ("h264", "aac"), played.codecs
    times = np.array([t for t, _, _ in played.video])
    assert len(times) >= 8 * 25 and np.allclose(np.diff(times), 0.04, atol=0.002), "not a constant 25 fps"
    keys = [i for i, (_, key, _) in enumerate(played.video) if key]
    assert keys[0] == 0 and np.all(np.diff(keys) == 50), f"keyframes at {keys}: every 2 s, none between"
    assert abs(played.audio[0][0] - times[0]) <= 0.04, f"audio starts at {played.audio[0][0]}, video at {times[0]}"
    speaking = [mouth for t, _, mouth in played.video if loudness(played, t) > 1000]
    silent = [mouth for t, _, mouth in played.video if loudness(played, t) < 30]
    assert len(speaking) > 25 and len(silent) > 25, (len(speaking), len(silent))
    assert np.mean([m > OPEN for m in speaking]) > 0.3 > np.mean([m > OPEN for m in silent]), \
        "the broadcast mouth does not move with the broadcast sound"
    assert not any(e["type"] == "broadcast_error" for e in events), events


async def test_an_ingest_that_restarts_is_published_to_again_and_a_broadcast_stops(server):
    ingest = NginxRtmp()
    ingest.start()
    viewer = AvatarViewer(server.url)
    await viewer.connect()
    await viewer.record_events()
    try:
        await viewer.wait_frames(25)
        async with aiohttp.ClientSession() as http:
            assert (await broadcast(http, server.url, viewer.session_id, "http://example.com/x"))[0] == 400
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
            await viewer.wait_event("broadcast_stopped", 10)
            async with http.delete(url) as res:
                assert res.status == 404 and (await res.json())["error"]["code"] == "no_broadcast"
    finally:
        ingest.stop()
        await viewer.close()
