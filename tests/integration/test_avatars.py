"""Avatar upload over HTTP: good portraits become avatars; bad files get a clear 4xx."""

import asyncio
import io
import time

import aiohttp
import cv2
import numpy as np
import pytest
import skimage.data

from avatar_client import AvatarViewer
from testkit.lipsync import opening
from testkit.server import ROOT

pytestmark = pytest.mark.integration


def encode(rgb: np.ndarray, ext: str = ".jpg") -> bytes:
    return cv2.imencode(ext, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))[1].tobytes()


async def upload(url: str, data: bytes, name: str = "photo.jpg") -> tuple[int, dict]:
    form = aiohttp.FormData()
    form.add_field("image", io.BytesIO(data), filename=name)
    async with aiohttp.ClientSession() as http:
        async with http.post(url + "/v1/avatars", data=form) as res:
            return res.status, await res.json()


async def plays(url: str, avatar: str, frames: int = 10) -> None:
    """A session with this avatar streams its frames, and ends when deleted."""
    viewer = AvatarViewer(url, avatar=avatar)
    await viewer.connect()
    try:
        await viewer.wait_frames(frames)
    finally:
        assert await viewer.close() == 204


async def test_portrait_upload_is_listed_and_usable(server):
    photo = skimage.data.astronaut()[20:, 30:]  # a different crop: a new avatar
    status, body = await upload(server.url, encode(photo))
    assert status == 201, body
    async with aiohttp.ClientSession() as http:
        async with http.get(server.url + "/v1/avatars") as res:
            ids = [a["avatar_id"] for a in await res.json()]
    assert "default" in ids and body["avatar_id"] in ids
    await plays(server.url, body["avatar_id"])


@pytest.mark.parametrize("data,status,code", [
    (encode(skimage.data.coffee()), 422, "no_face"),
    (b"this is not an image at all", 415, "bad_image"),
    (b"", 400, "bad_image"),
    (encode(np.zeros((64, 64, 3), np.uint8), ".png"), 422, "image_too_small"),
    (b"\xff\xd8\xff" + b"\x00" * (11 * 2**20), 413, "image_too_large"),
])
async def test_bad_uploads_are_refused_clearly(server, data, status, code):
    got, body = await upload(server.url, data)
    assert got == status, body
    assert body["error"]["code"] == code and len(body["error"]["message"]) > 10


async def test_the_same_photo_uploaded_twice_is_two_avatars_each_deleted_alone(server):
    """Two people uploading the same photo get two ids: one DELETE removes one of them."""
    photo = encode(skimage.data.astronaut()[10:, 5:])
    (a, first), (b, second) = [await upload(server.url, photo) for _ in range(2)]
    assert a == b == 201 and first["avatar_id"] != second["avatar_id"], (first, second)
    async with aiohttp.ClientSession() as http:
        async with http.delete(f"{server.url}/v1/avatars/{first['avatar_id']}") as res:
            assert res.status == 204
        async with http.get(f"{server.url}/v1/avatars/{second['avatar_id']}") as res:
            assert res.status == 200 and (await res.json())["status"] == "ready"
    await plays(server.url, second["avatar_id"])


@pytest.mark.parametrize("form", [
    aiohttp.FormData({"name": "me"}),  # an HTML form without enctype="multipart/form-data"
    aiohttp.FormData({"name": "me"}, default_to_multipart=True),  # multipart, but no file in it
])
async def test_a_form_without_a_file_is_told_to_send_one(server, form):
    async with aiohttp.ClientSession() as http:
        async with http.post(server.url + "/v1/avatars", data=form) as res:
            body = await res.json()
            assert res.status == 400 and body["error"]["code"] == "bad_upload", body
    assert "'image'" in body["error"]["message"] and "'video'" in body["error"]["message"], body


async def test_truncated_jpeg_is_refused(server):
    data = encode(skimage.data.astronaut())
    got, body = await upload(server.url, data[: len(data) // 3])
    assert 400 <= got < 500, body


VIEWER = """
import asyncio, sys
from avatar_client import AvatarViewer
async def main():
    viewer = AvatarViewer(sys.argv[1])
    await viewer.connect()
    await viewer.wait_frames(10)
    print("watching", flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
"""


async def test_session_of_a_killed_viewer_ends_by_itself(server):
    """A viewer killed without goodbye (no DELETE, no DTLS close) stops holding a worker."""
    import asyncio
    import signal
    import sys

    from testkit.server import ROOT

    async def sessions() -> int:
        async with aiohttp.ClientSession() as http:
            async with http.get(server.url + "/healthz") as res:
                return (await res.json())["sessions"]

    before = await sessions()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", VIEWER, server.url, cwd=ROOT,
                                                stdout=asyncio.subprocess.PIPE)
    assert (await asyncio.wait_for(proc.stdout.readline(), 30)).strip() == b"watching"
    assert await sessions() == before + 1
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    for _ in range(30):  # ICE alone would take ~30 s; receiver reports stop at once
        await asyncio.sleep(0.5)
        if await sessions() == before:
            break
    assert await sessions() == before


SENTENCE = "Bob bought a big map. Papa, pass me a warm apple pie, please, and open the window wide."


async def mouth_spread(url: str, avatar: str) -> tuple[float, float]:
    """The std of the mouth's opening (eye distances, mediapipe at the client) over 2 s of
    silence, then while it says SENTENCE through /speak."""
    viewer = AvatarViewer(url, avatar=avatar)
    await viewer.connect()
    await viewer.record_events()
    try:
        await viewer.wait_frames(25)
        quiet_from = time.monotonic()
        await asyncio.sleep(2.0)
        status, _ = await viewer.post("speak", {"text": SENTENCE})
        assert status == 202
        started = await viewer.wait_event("speak_started", 15)
        ended = await viewer.wait_event("speak_ended", 30)
        shift = time.monotonic() - time.time()
        video = list(viewer.received.video)
        quiet = [f for t, f in video if quiet_from <= t < quiet_from + 2.0]
        said = [f for t, f in video if started["t"] + shift <= t < ended["t"] + shift]
        idle, speaking = await asyncio.to_thread(lambda: (np.nanstd(opening(quiet)), np.nanstd(opening(said))))
        return float(idle), float(speaking)
    finally:
        await viewer.close()


async def test_an_uploaded_closed_lip_photo_talks_as_the_default_does(server):
    """A closed-lip official portrait, the face small in a tall frame: before its lips parted to
    the default's rest gap it read 0.0076 eye distances of spread saying jfk.flac, a fifth of the
    default's (issue 59's judge: 0.0066 on its closed-lip upload)."""
    status, body = await upload(server.url, (ROOT / "tests/fixtures/portraits/small-face-large-frame.jpg").read_bytes())
    assert status == 201, body
    idle, speaking = await mouth_spread(server.url, body["avatar_id"])
    _, default = await mouth_spread(server.url, "default")
    print(f"\nphoto: idle {idle:.4f}, speaking {speaking:.4f}; default speaking {default:.4f}")
    assert speaking > 0.02 and speaking > 1.5 * idle
    assert speaking >= 0.6 * default
