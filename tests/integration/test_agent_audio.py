"""The agent audio socket with real speech: rendering starts on the first chunk; interrupt silences."""

import asyncio
import json
import time

import aiohttp
import numpy as np
import pytest

from avatar_client import AvatarViewer
from testkit.agent_push import pieces, push_paced, watched_agent
from tests.integration.test_session import rms
from tests.mouth import OPEN, OPEN_SHARE, dark_pixels

pytestmark = pytest.mark.integration
CHUNK_MS = 40


def collect(voice) -> tuple[list[dict], asyncio.Task]:
    """The audio socket's own messages, as they come."""
    seen: list[dict] = []

    async def read() -> None:
        async for message in voice.messages():
            seen.append(message)

    return seen, asyncio.ensure_future(read())


async def finished_on_both(lists: tuple[list[dict], ...], utterance_id: str, timeout: float = 5.0) -> None:
    """Until every list (the events socket's, the agent socket's) holds the utterance's playback_finished."""
    deadline = time.monotonic() + timeout
    while not all(any(e["type"] == "playback_finished" and e.get("utterance_id") == utterance_id for e in events)
                  for events in lists):
        assert time.monotonic() < deadline, f"no playback_finished of {utterance_id} on both sockets"
        await asyncio.sleep(0.02)


def playback(events: list[dict], utterance_id: str) -> list[tuple]:
    return [(e["type"], e.get("position_ms"), e.get("interrupted")) for e in events
            if e["type"].startswith("playback_") and e["utterance_id"] == utterance_id]


async def test_pushed_speech_starts_at_once_and_moves_the_mouth(server, jfk_pcm16):
    async with watched_agent(server.url) as (viewer, agent):
        voice = await agent.open_audio(16000)
        replies, reader = collect(voice)
        first_chunk = time.time()
        pusher = asyncio.ensure_future(push_paced(voice, pieces(jfk_pcm16, 16000, (CHUNK_MS,)), 16000))
        started = await viewer.wait_event("speak_started", 5)
        latency_ms = (started["t"] - first_chunk) * 1000
        assert not pusher.done(), "speak_started must not wait for the end of the audio"
        assert latency_ms < 300, f"speak_started {latency_ms:.0f} ms after the first chunk"
        await asyncio.sleep(3.0)
        shift = time.monotonic() - time.time()
        frames = [rgb for t, rgb in viewer.received.video if t >= started["t"] + shift]
        counts = [dark_pixels(f) for f in frames]
        assert sum(c > OPEN for c in counts) > OPEN_SHARE * len(counts), "the mouth did not follow the pushed speech"
        await pusher
        await voice.end()
        ended = await viewer.wait_event("speak_ended", 10)
        assert ended["utterance_id"] == started["utterance_id"]
        await finished_on_both((viewer.seen, replies), started["utterance_id"])
        # LiveKit's meaning: started at the first frame, finished at the last, where it got to
        pushed_ms = len(jfk_pcm16) / 16
        for events in (viewer.seen, replies):  # the events socket, and the agent's own
            [begun, (finished, position, cut)] = playback(events, started["utterance_id"])
            assert begun == ("playback_started", None, None) and (finished, cut) == ("playback_finished", False)
            assert abs(position - pushed_ms) <= 200, f"played {position} ms of {pushed_ms:.0f} ms"
        await voice.close()
        reader.cancel()


async def test_interrupt_on_the_socket_silences_the_client(server, jfk_pcm16):
    async with watched_agent(server.url) as (viewer, agent):
        voice = await agent.open_audio(16000)
        replies, reader = collect(voice)
        ahead = pieces(jfk_pcm16[: 16000 * 8], 16000, (CHUNK_MS,))
        await push_paced(voice, ahead, 16000, speed=4.0)  # agents often push ahead
        started = await viewer.wait_event("speak_started", 5)
        await asyncio.sleep(1.0)
        await voice.ws.send_json({"type": "clear_buffer"})  # LiveKit's name for interrupt
        sent = time.monotonic()
        event = await viewer.wait_event("interrupted", 5)
        spoken_ms = (event["t"] - started["t"]) * 1000
        assert abs(event["played_ms"] - spoken_ms) < 200, (event["played_ms"], spoken_ms)
        await finished_on_both((viewer.seen, replies), started["utterance_id"])
        for events in (viewer.seen, replies):
            assert playback(events, started["utterance_id"]) == [
                ("playback_started", None, None), ("playback_finished", event["played_ms"], True)], events
        await asyncio.sleep(1.5)
        assert rms(viewer, sent - 1.5, sent - 0.2) > 300, "no speech before the interrupt?"
        assert rms(viewer, sent + 0.4, sent + 1.4) < 30, "audio went on after the interrupt"
        assert [e["interrupted"] for e in viewer.seen if e["type"] == "speak_ended"
                and e["utterance_id"] == started["utterance_id"]] == [True], "an interrupted utterance ends as cut"
        await voice.close()
        reader.cancel()


async def test_agent_socket_refuses_bad_input_clearly(server):
    viewer = AvatarViewer(server.url)
    await viewer.connect()
    try:
        async with aiohttp.ClientSession() as http:
            base = f"{server.url}/v1/sessions/{viewer.session_id}/audio"
            for query in ("?rate=abc", "?rate=4000", "?rate=96000"):
                async with http.get(base + query) as res:
                    assert res.status == 400 and (await res.json())["error"]["code"] == "bad_rate"
            async with http.get(f"{server.url}/v1/sessions/nope/audio") as res:
                assert res.status == 404
            async with http.ws_connect(base + "?rate=16000") as ws:
                await ws.send_bytes(b"\x00\x01\x02")
                reply = json.loads((await ws.receive()).data)
                assert reply["type"] == "error" and reply["code"] == "bad_audio"
                await ws.send_str("hello")
                reply = json.loads((await ws.receive()).data)
                assert reply["type"] == "error" and reply["code"] == "bad_message"
                await ws.send_bytes(np.zeros(320, np.int16).tobytes())
                reply = json.loads((await ws.receive()).data)
                assert reply["type"] == "utterance"  # the session still works
    finally:
        await viewer.close()


async def test_clear_buffer_on_the_events_socket_interrupts_spoken_text(server):
    viewer = AvatarViewer(server.url)
    await viewer.connect()
    await viewer.record_events()
    try:
        await viewer.wait_frames(25)
        status, body = await viewer.post("speak", {"text": "This sentence is long enough to be cut in the middle."})
        assert status == 202, body
        started = await viewer.wait_event("speak_started", 10)
        await asyncio.sleep(0.6)
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(f"{server.url}/v1/sessions/{viewer.session_id}/events") as ws:
                await ws.send_json({"type": "clear_buffer"})
                finished = await viewer.wait_event("playback_finished", 5)
        assert finished["utterance_id"] == body["utterance_id"] == started["utterance_id"]
        assert finished["interrupted"] is True and 400 <= finished["position_ms"] <= 2000, finished
    finally:
        await viewer.close()
