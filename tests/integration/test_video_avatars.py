"""Video avatars over HTTP: a clip of a real person becomes their avatar, prepared with
progress, kept across a restart, streamed at 512x512; unusable clips get a 422 that
says why."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import cv2
import numpy as np
import pytest
import skimage.data

from avatar_client import AvatarViewer
from engine.families.portrait.avatar import DEFAULT_AVATAR
from testkit.server import ServerProcess
from tests.video import CREMA, nearest_clip_frame_error, person_clip, prepared_crop
from training.motion.real_faces import read_clip
from training.video.clips import write_clip

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    return person_clip(tmp_path_factory.mktemp("clips") / "person.mp4")


async def upload(url: str, path: Path, name: str | None = None) -> tuple[int, dict]:
    form = aiohttp.FormData()
    form.add_field("video", path.read_bytes(), filename=name or path.name, content_type="video/mp4")
    async with aiohttp.ClientSession() as http:
        async with http.post(url + "/v1/avatars", data=form) as res:
            return res.status, await res.json()


async def status(url: str, avatar_id: str) -> dict:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{url}/v1/avatars/{avatar_id}") as res:
            assert res.status == 200
            return await res.json()


async def wait_ready(url: str, avatar_id: str, timeout: float = 120) -> list[float]:
    progress, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = await status(url, avatar_id)
        assert body["status"] != "failed", body
        if body["status"] == "ready":
            return progress
        progress.append(body["progress"])
        await asyncio.sleep(0.2)
    raise TimeoutError(f"avatar {avatar_id} not ready: {body}")


async def test_a_clip_becomes_a_video_avatar_that_streams_and_survives_a_restart(clip, tmp_path):
    env = {"AVATAR_AVATARS_DIR": str(tmp_path)}
    with ServerProcess(env=env) as server:
        code, body = await upload(server.url, clip)
        assert code == 202 and body["status"] == "preparing", body
        avatar_id = body["avatar_id"]
        progress = await wait_ready(server.url, avatar_id)
        assert progress == sorted(progress) and all(0 <= p < 1 for p in progress)
        described = await status(server.url, avatar_id)
        assert described["kind"] == "video" and described["status"] == "ready"
        assert not list(tmp_path.glob("*.upload")), "the uploaded clip is removed once prepared"
        code, again = await upload(server.url, clip, name="same-clip-again.mp4")
        assert code == 200 and again["status"] == "ready", again  # found by its content: not redone
        assert again["avatar_id"] != avatar_id, "each upload is its own avatar"
        async with aiohttp.ClientSession() as http:
            async with http.delete(f"{server.url}/v1/avatars/{again['avatar_id']}") as res:
                assert res.status == 204  # and deleting it leaves the first one's
        code, third = await upload(server.url, clip, name="and-again.mp4")
        assert code == 200 and third["status"] == "ready", third
        async with aiohttp.ClientSession() as http:
            async with http.delete(f"{server.url}/v1/avatars/{avatar_id}") as res:
                assert res.status == 204  # the first one goes; the third keeps its own file
        code, fourth = await upload(server.url, clip, name="once-more.mp4")
        assert code == 200 and fourth["status"] == "ready", "prepared again although a copy is ready"
        avatar_id = third["avatar_id"]
    with ServerProcess(env=env) as server:  # a restart: the prepared avatar is still there
        async with aiohttp.ClientSession() as http:
            async with http.get(server.url + "/v1/avatars") as res:
                listed = {a["avatar_id"]: a for a in await res.json()}
        assert listed[avatar_id]["kind"] == "video" and listed[avatar_id]["status"] == "ready"
        viewer = AvatarViewer(server.url, avatar=avatar_id)
        await viewer.connect()
        try:
            await viewer.wait_frames(50)
            frame = viewer.received.video[-1][1]
            assert frame.shape == (512, 512, 3)
            default = cv2.cvtColor(cv2.imread(str(DEFAULT_AVATAR)),
                                   cv2.COLOR_BGR2RGB)
            crop = prepared_crop(tmp_path, avatar_id)
            # the person of the clip in its own framing, not the default portrait
            ours, other = nearest_clip_frame_error(frame, clip, crop), nearest_clip_frame_error(default, clip, crop)
            assert ours < 8 and ours < 0.25 * other, (ours, other)
        finally:
            assert await viewer.close() == 204


def _faces(seconds: float = 11.0) -> list[np.ndarray]:
    frames, _ = read_clip(CREMA[0])
    return [frames[i % len(frames)] for i in range(int(seconds * 25))]


def _too_short(path: Path) -> None:
    write_clip(_faces(4.0), path)


def _no_face(path: Path) -> None:
    coffee = cv2.resize(skimage.data.coffee(), (480, 360))
    write_clip((np.roll(coffee, i, axis=1) for i in range(275)), path)


def _two_faces(path: Path) -> None:
    write_clip((np.hstack([f, f[:, ::-1]]) for f in _faces()), path)


def _small_face(path: Path) -> None:
    canvas = np.zeros((1080, 1920, 3), np.uint8)

    def shrink(f: np.ndarray) -> np.ndarray:
        out = canvas.copy()
        out[400:580, 800:1040] = cv2.resize(f, (240, 180), interpolation=cv2.INTER_AREA)  # a 60-pixel face
        return out
    write_clip((shrink(f) for f in _faces()), path)


def _not_a_video(path: Path) -> None:
    path.write_bytes(b"this is a text file pretending to be a clip\n" * 100)


def _sound_only(path: Path) -> None:
    import av

    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("aac", rate=48_000, layout="mono")
        for i in range(0, 48_000 * 11, 1024):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.int16), "s16", "mono")
            frame.sample_rate, frame.pts = 48_000, i
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))


@pytest.mark.parametrize("make,code", [
    (_too_short, "too_short"), (_no_face, "no_face"), (_two_faces, "several_faces"),
    (_small_face, "face_too_small"), (_not_a_video, "unreadable"), (_sound_only, "no_video"),
])
async def test_unusable_clips_get_a_422_that_says_why(server, tmp_path, make, code):
    path = tmp_path / "clip.mp4"
    make(path)
    got, body = await upload(server.url, path)
    assert got == 422 and body["error"]["code"] == code, body
    assert len(body["error"]["message"]) > 20


async def test_an_avatar_being_prepared_refuses_sessions_and_deleting_it_leaves_nothing(tmp_path):
    long_clip = tmp_path / "long.mp4"
    frames, pcm = read_clip(CREMA[0])
    write_clip((frames[i % len(frames)] for i in range(60 * 25)), long_clip)  # a minute: prepared for a while
    with ServerProcess(env={"AVATAR_AVATARS_DIR": str(tmp_path / "avatars")}) as server:
        code, body = await upload(server.url, long_clip)
        assert code == 202, body
        viewer = AvatarViewer(server.url, avatar=body["avatar_id"])
        with pytest.raises(RuntimeError, match="409.*avatar_not_ready"):
            await viewer.connect()  # a session cannot start on an avatar still being prepared
        await viewer.close(delete=False)
        async with aiohttp.ClientSession() as http:
            async with http.delete(f"{server.url}/v1/avatars/{body['avatar_id']}") as res:
                assert res.status == 204
            async with http.get(f"{server.url}/v1/avatars/{body['avatar_id']}") as res:
                assert res.status == 404
        await asyncio.sleep(1)
        assert sorted(p.name for p in (tmp_path / "avatars").iterdir()) == []


async def test_a_damaged_or_old_prepared_file_is_dropped_at_start_not_served(tmp_path):
    (tmp_path / "0123456789abcdef.clip.npz").write_bytes(b"not a zip file")
    np.savez(tmp_path / "fedcba9876543210.clip.npz", crop=np.zeros(5))  # no format: an older version's
    with ServerProcess(env={"AVATAR_AVATARS_DIR": str(tmp_path)}) as server:
        async with aiohttp.ClientSession() as http:
            async with http.get(server.url + "/v1/avatars") as res:
                ids = [a["avatar_id"] for a in await res.json()]
    assert ids == ["default"]
    assert not list(tmp_path.glob("*.clip.npz"))


async def test_the_same_clip_uploaded_twice_at_once_is_two_avatars_with_their_own_files(tmp_path):
    clip = person_clip(tmp_path / "twice.mp4", seed=7)
    folder = tmp_path / "avatars"
    with ServerProcess(env={"AVATAR_AVATARS_DIR": str(folder)}) as server:
        (a, first), (b, second) = await asyncio.gather(upload(server.url, clip), upload(server.url, clip))
        assert a == b == 202 and first["avatar_id"] != second["avatar_id"], (first, second)
        for body in (first, second):
            await wait_ready(server.url, body["avatar_id"])
        assert sorted(p.name for p in folder.iterdir()) == sorted(
            f"{body['avatar_id']}.clip.npz" for body in (first, second))
