"""docs/api.md against a running server: each route's refusals carry a documented code with
its documented status, every event a busy session sends has exactly its documented fields,
and every metric is named in the document."""

import asyncio
import json
import socket

import aiohttp
import pytest

from avatar_client import AgentClient, AvatarViewer
from testkit.agent_push import pieces, push_paced
from testkit.contract import Contract, event_problems, read_contract, undocumented_metrics
from testkit.server import ServerProcess

pytestmark = pytest.mark.integration
SDP = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n"


@pytest.fixture(scope="module")
def closed_port() -> int:
    """A loopback port nothing listens on: a broadcast there is refused by TCP."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def contracted(closed_port):
    with ServerProcess(env={"AVATAR_BROADCAST_TARGETS": f"127.0.0.1:{closed_port}"}) as proc:
        yield proc


def requests(session: str, port: int) -> list[tuple[str, str, dict, int, str]]:
    """(method, path, aiohttp arguments, status, code): each route refusing what it should."""
    s = f"/v1/sessions/{session}"
    form = aiohttp.FormData({"name": "me"}, default_to_multipart=True)
    return [
        ("POST", "/v1/sessions", {"data": "{oops"}, 400, "bad_json"),
        ("POST", "/v1/sessions", {"json": {"sdp": "hello"}}, 400, "bad_sdp"),
        ("POST", "/v1/sessions", {"json": {"sdp": SDP, "mode": "karaoke"}}, 400, "bad_mode"),
        ("POST", "/v1/sessions", {"json": {"sdp": SDP, "avatar": "nobody"}}, 422, "unknown_avatar"),
        ("POST", "/v1/sessions/nope/speak", {"json": {"text": "hi"}}, 404, "unknown_session"),
        ("POST", f"{s}/speak", {"json": {"text": " "}}, 400, "bad_text"),
        ("POST", f"{s}/speak", {"json": {"text": "a" * 5001}}, 413, "text_too_long"),
        ("POST", f"{s}/broadcast", {"json": {"url": "ftp://x/y"}}, 400, "bad_url"),
        ("POST", f"{s}/broadcast", {"json": {"url": "rtmp://elsewhere.example/app/key"}}, 403,
         "target_not_allowed"),
        ("DELETE", f"{s}/broadcast", {}, 404, "no_broadcast"),
        ("POST", f"{s}/viewers", {"data": SDP}, 415, "bad_content_type"),
        ("DELETE", f"{s}/viewers/nobody", {}, 404, "unknown_viewer"),
        ("GET", f"{s}/audio?rate=7", {}, 400, "bad_rate"),
        ("POST", "/v1/avatars", {"data": form}, 400, "bad_upload"),
        ("POST", "/v1/avatars", {"data": b"GIF89a"}, 415, "bad_image"),
        ("GET", "/v1/avatars/nobody", {}, 404, "unknown_avatar"),
        ("DELETE", "/v1/avatars/default", {}, 403, "default_avatar"),
        ("PUT", "/v1/avatars", {}, 405, "method_not_allowed"),
        ("GET", "/static/nothing-here.js", {}, 404, "not_found"),
        ("POST", "/v1/sessions", {"data": json.dumps({"sdp": "x" * 300_000})}, 413, "body_too_large"),
    ]


def documented(contract: Contract, status: int, code: str) -> bool:
    return str(status) in contract.codes.get(code, set())


async def test_each_route_refuses_with_a_documented_code_and_status(contracted, closed_port):
    contract = read_contract()
    viewer = AvatarViewer(contracted.url)
    await viewer.connect()
    try:
        async with aiohttp.ClientSession() as http:
            for method, path, kwargs, status, code in requests(viewer.session_id, closed_port):
                async with http.request(method, contracted.url + path, **kwargs) as res:
                    body = await res.json(content_type=None)
                    got = (res.status, body["error"]["code"])
                assert got == (status, code), (method, path, body)
                assert documented(contract, status, code), f"{code} ({status}) is not in docs/api.md"
                assert body["error"]["message"], body
    finally:
        await viewer.close()


async def test_every_event_of_a_busy_session_has_exactly_its_documented_fields(contracted, closed_port, jfk_pcm16):
    """Speech played and cut, a socket speak and a bad message, agent audio, a broadcast that
    fails, stats, and the session's end: every event seen on both sockets is checked."""
    contract = read_contract()
    viewer = AvatarViewer(contracted.url)
    await viewer.connect()
    events = await viewer.record_events()
    agent = AgentClient(contracted.url, viewer.session_id)
    told: list[dict] = []
    try:
        await viewer.wait_frames(10)
        await viewer.post("speak", {"text": "Hello there."})
        await viewer.wait_event("speak_ended", 20)
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(f"{contracted.url}/v1/sessions/{viewer.session_id}/events")
            await ws.send_json({"type": "speak", "text": "This one is cut off before it is finished, surely."})
            await ws.send_json({"type": "dance"})
            await viewer.wait_event("speak_started", 15, after=events[-1]["t"])
            await ws.send_json({"type": "interrupt"})
            await viewer.wait_event("interrupted", 5)
            voice = await agent.open_audio(16000)
            await voice.ws.send_bytes(b"odd")
            await push_paced(voice, pieces(jfk_pcm16[: 16000 * 2], 16000, (200,)), 16000, speed=4.0)
            await voice.ws.send_json({"type": "speak_end"})
            status, _ = await viewer.post("broadcast", {"url": f"rtmp://127.0.0.1:{closed_port}/live/key"})
            assert status == 202
            await viewer.wait_event("broadcast_error", 20)
            await viewer.wait_played(20, after=(await viewer.wait_event("interrupted"))["t"])  # the agent's
            async with http.delete(f"{contracted.url}/v1/sessions/{viewer.session_id}") as res:
                assert res.status == 204
            told = [json.loads(m.data) async for m in voice.ws if m.type == aiohttp.WSMsgType.TEXT]
            mine = [json.loads(m.data) async for m in ws if m.type == aiohttp.WSMsgType.TEXT]
        await asyncio.sleep(0.2)
    finally:
        await agent.close()
        await viewer.close(delete=False)
    seen = events + told + mine
    kinds = {e["type"] for e in seen}
    assert {"first_frame", "utterance", "speak_started", "speak_ended", "interrupted", "playback_started",
            "playback_finished", "transcript", "stats", "error", "broadcast_error", "broadcast_stopped"} <= kinds, kinds
    errors = {e["code"] for e in seen if e["type"] == "error"}
    assert {"bad_message", "bad_audio"} <= errors, errors
    assert next(e for e in seen if e["type"] == "broadcast_error")["reason"] == "connection_refused"
    problems = sorted({p for e in seen for p in event_problems(e, contract)})
    assert problems == [], problems


async def test_every_metric_is_named_in_the_document(contracted):
    async with aiohttp.ClientSession() as http:
        async with http.get(contracted.url + "/metrics") as res:
            page = await res.text()
    contract = read_contract()
    assert "avatar_sessions " in page
    assert undocumented_metrics(page, contract) == []
    assert undocumented_metrics(page + "# TYPE avatar_planted gauge\n", contract) == ["avatar_planted"]
