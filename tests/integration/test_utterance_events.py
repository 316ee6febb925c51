"""Every utterance id the server gives out has the one sequence of docs/api.md ("Utterances"):
started (once it plays), interrupted (if cut), then always speak_ended and playback_finished."""

import asyncio
import json

import aiohttp
import pytest

from avatar_client import AvatarViewer
from testkit.agent_push import pieces, push_paced, watched_agent

pytestmark = pytest.mark.integration
SEQUENCE = ("speak_started", "playback_started", "interrupted", "speak_ended", "playback_finished")
LONG = "This is a long answer that keeps going for a while. " * 5


def sequence(events: list[dict], utterance_id: str) -> list[tuple]:
    """An utterance's events, as (type, the fields that say how it went)."""
    return [(e["type"], e.get("played_ms", e.get("position_ms")), e.get("interrupted"))
            for e in events if e["type"] in SEQUENCE and e["utterance_id"] == utterance_id]


def played(ms: int | None = None) -> list[tuple]:
    return [("speak_started", None, None), ("playback_started", None, None), ("speak_ended", None, False),
            ("playback_finished", ms, False)]


def cut(ms: int, began: bool) -> list[tuple]:
    start = [("speak_started", None, None), ("playback_started", None, None)] if began else []
    return [*start, ("interrupted", ms, None), ("speak_ended", None, True), ("playback_finished", ms, True)]


async def test_played_cut_and_never_started_utterances_end_the_same_documented_way(server):
    viewer = AvatarViewer(server.url)
    await viewer.connect()
    events = await viewer.record_events()
    try:
        await viewer.wait_frames(10)
        _, short = await viewer.post("speak", {"text": "Hello there."})
        ended = await viewer.wait_event("speak_ended", 20)
        finished = await viewer.wait_event("playback_finished", 5)
        assert sequence(events, short["utterance_id"]) == played(finished["position_ms"]) and \
            finished["position_ms"] > 400 and ended["utterance_id"] == short["utterance_id"], events
        _, long = await viewer.post("speak", {"text": LONG})
        _, queued = await viewer.post("speak", {"text": "Queued behind it."})
        await viewer.wait_event("playback_started", 15, after=ended["t"])
        await asyncio.sleep(0.5)
        status, body = await viewer.post("interrupt")
        assert status == 202 and body == {"interrupted": sorted([long["utterance_id"], queued["utterance_id"]])}
        await viewer.wait_event("playback_finished", 5, after=finished["t"] + 1e-3)
        await asyncio.sleep(0.3)  # the queued one's events come in the same breath
        said = next(e["played_ms"] for e in events if e["type"] == "interrupted"
                    and e["utterance_id"] == long["utterance_id"])
        assert said > 0 and sequence(events, long["utterance_id"]) == cut(said, began=True), events
        assert sequence(events, queued["utterance_id"]) == cut(0, began=False), events
    finally:
        await viewer.close()


async def test_a_socket_speak_is_answered_with_its_id_and_a_session_end_finishes_every_sequence(server, jfk_pcm16):
    async with watched_agent(server.url) as (viewer, agent), aiohttp.ClientSession() as http:
        ws = await http.ws_connect(f"{server.url}/v1/sessions/{viewer.session_id}/events")
        await ws.send_json({"type": "speak", "text": LONG})
        while (reply := json.loads((await ws.receive(timeout=10)).data))["type"] != "utterance":
            pass  # first_frame, stats
        assert reply["session_id"] == viewer.session_id and isinstance(reply["t"], float), reply
        spoken = reply["utterance_id"]
        started = await viewer.wait_event("speak_started", 15)
        assert started["utterance_id"] == spoken
        voice = await agent.open_audio(16000)
        await push_paced(voice, pieces(jfk_pcm16[: 16000 * 2], 16000, (200,)), 16000, speed=8.0)
        pushed = json.loads((await voice.ws.receive(timeout=5)).data)
        assert pushed["type"] == "utterance" and pushed["session_id"] == viewer.session_id, pushed
        async with http.delete(f"{server.url}/v1/sessions/{viewer.session_id}") as res:
            assert res.status == 204
        told = [json.loads(m.data) async for m in voice.ws if m.type == aiohttp.WSMsgType.TEXT]
        assert voice.ws.closed
        assert sequence(told, pushed["utterance_id"])[-1] == ("playback_finished", 0, True), told
        mine = [json.loads(m.data) async for m in ws if m.type == aiohttp.WSMsgType.TEXT]  # until it closes
    # the second events socket was read to its close: the session's last events are all in it
    said = next(e["played_ms"] for e in mine if e["type"] == "interrupted" and e["utterance_id"] == spoken)
    assert sequence(mine, spoken) == cut(said, began=True), mine
    assert sequence(mine, pushed["utterance_id"]) == cut(0, began=False), mine
