"""Bad input gets a clear 4xx in the api.md error shape; never a 5xx."""

import json
import subprocess
import sys

import aiohttp
import pytest

pytestmark = pytest.mark.integration

GOOD_HEADER = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"


@pytest.mark.parametrize(
    "body,content_type,code",
    [
        ("{not json", "application/json", "bad_json"),
        ("[1, 2]", "application/json", "bad_json"),
        ("{}", "application/json", "bad_sdp"),
        ('{"sdp": 42}', "application/json", "bad_sdp"),
        ('{"sdp": ""}', "application/json", "bad_sdp"),
        ('{"sdp": "hello there"}', "application/json", "bad_sdp"),
        ('{"sdp": "v=0\\r\\nm=video 9 UDP/TLS/RTP/SAVPF 96\\r\\n"}', "application/json", "bad_sdp"),
        ('{"sdp": "v=0\\r\\nm=audio 9 RTP/AVP 0\\r\\n"}', "application/json", "bad_sdp"),
        (json.dumps({"sdp": GOOD_HEADER + "m=video 9 UDP/TLS/RTP/SAVPF 96\r\n", "type": "answer"}),
         "application/json", "bad_sdp"),
        (json.dumps({"sdp": GOOD_HEADER + "m=video 9 UDP/TLS/RTP/SAVPF 96\r\n" + "a=x\r\n" * 40000}),
         "application/json", "body_too_large"),
        ("", "application/json", "bad_json"),
    ],
)
async def test_malformed_session_requests_get_400(server, body, content_type, code):
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{server.url}/v1/sessions", data=body, headers={"Content-Type": content_type}) as res:
            payload = await res.json()
    assert res.status == (413 if code == "body_too_large" else 400), payload
    assert payload["error"]["code"] == code and payload["error"]["message"]


async def test_unknown_mode_and_avatar_are_refused(server):
    sdp = GOOD_HEADER + "m=video 9 UDP/TLS/RTP/SAVPF 96\r\n"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{server.url}/v1/sessions", json={"sdp": sdp, "mode": "dance"}) as res:
            assert res.status == 400 and (await res.json())["error"]["code"] == "bad_mode"
        async with http.post(f"{server.url}/v1/sessions", json={"sdp": sdp, "avatar": "nobody"}) as res:
            assert res.status == 422 and (await res.json())["error"]["code"] == "unknown_avatar"


@pytest.mark.parametrize("method,path", [
    ("POST", "/v1/sessions/nope/speak"),
    ("POST", "/v1/sessions/nope/interrupt"),
    ("DELETE", "/v1/sessions/nope"),
    ("GET", "/v1/sessions/nope/events"),
])
async def test_unknown_session_ids_get_404(server, method, path):
    async with aiohttp.ClientSession() as http:
        async with http.request(method, server.url + path, json={"text": "hi"}) as res:
            payload = await res.json()
    assert res.status == 404 and payload["error"]["code"] == "unknown_session"


async def test_bad_speak_bodies_get_400_and_the_session_lives_on(server):
    from avatar_client import AvatarViewer

    viewer = AvatarViewer(server.url)
    await viewer.connect()
    try:
        for payload in ({}, {"text": ""}, {"text": 5}, {"text": "   "}):
            status, body = await viewer.post("speak", payload)
            assert status == 400 and body["error"]["code"] == "bad_text"
        status, body = await viewer.post("speak", {"text": "x" * 6000})
        assert status == 413
        status, body = await viewer.post("speak", {"text": "Still here."})
        assert status == 202
    finally:
        assert await viewer.close() == 204


async def test_health_and_page(server):
    async with aiohttp.ClientSession() as http:
        async with http.get(server.url + "/healthz") as res:
            assert res.status == 200 and (await res.json())["status"] == "ok"
        async with http.get(server.url + "/") as res:
            page = await res.text()
            assert res.status == 200
            for testid in ("connect", "video", "speak-text", "speak", "interrupt"):
                assert f'data-testid="{testid}"' in page
        async with http.get(server.url + "/web/avatar-client.js") as res:
            assert res.status == 200 and "class AvatarClient" in await res.text()
        for escape in ("/static/../server/app.py", "/web/../server/app.py", "/web/%2e%2e/server/app.py"):
            async with http.get(server.url + escape) as res:
                assert res.status in (403, 404), escape


def test_server_process_never_imports_torch():
    code = (
        "import sys, server.app, server.__main__, server.engines.client;"
        "from server.config import ServerConfig; server.app.create_app(ServerConfig());"
        "assert 'torch' not in sys.modules, 'torch imported';"
        "assert 'engine.core.pipeline' not in sys.modules, 'model code imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
