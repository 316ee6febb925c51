"""A live session of the latent family: a tiny random model (its folder in the published layout)
generates every frame on this CPU, through the real server and a real aiortc viewer."""

import asyncio
import time

import aiohttp
import numpy as np
import pytest

from avatar_client import AvatarViewer
from testkit.server import ServerProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from engine.families.latent.config import TINY_AUDIO, TINY_DIT, TINY_STREAM, TINY_VAE
    from engine.families.latent.models import write_random_model

    return write_random_model(tmp_path_factory.mktemp("latent"), TINY_DIT, TINY_VAE, TINY_AUDIO, TINY_STREAM)


@pytest.fixture(scope="module")
def latent_server(tiny_model):
    env = {"AVATAR_FAMILY": "latent", "AVATAR_MODEL_DIR": str(tiny_model), "AVATAR_WORKERS": "1"}
    with ServerProcess(env=env) as proc:
        yield proc


async def watch_generated_frames(url: str) -> AvatarViewer:
    """A viewer past the first chunk, whose engine makes 25 new frames a second that change."""
    viewer = AvatarViewer(url)
    await viewer.connect()
    await viewer.record_events()
    await viewer.wait_frames(25, timeout=60)
    await asyncio.sleep(2)  # past the first chunk: every frame now comes out of the VAE
    after = time.time()  # events carry the server's wall-clock time
    for _ in range(3):  # the stats of 3 one-second periods: 24-26 each, by where the ticks fall
        after = (await viewer.wait_event("stats", 10, after=after))["t"] + 1e-3
    fresh = np.mean([e["fresh_fps"] for e in viewer.seen if e["type"] == "stats"][-3:])
    assert fresh >= 24.5, f"the engine made {fresh:.2f} new frames a second"
    recent = [rgb for t, rgb in viewer.received.video if t > time.monotonic() - 1]
    changed = [np.abs(a.astype(int) - b).mean() > 1 for a, b in zip(recent, recent[1:])]
    assert len(recent) >= 20 and np.mean(changed) > 0.8, "the generated picture changes frame to frame"
    return viewer


async def test_generated_frames_stream_at_25_fps_and_speech_can_be_interrupted(latent_server):
    viewer = await watch_generated_frames(latent_server.url)
    try:
        _, body = await viewer.post("speak", {"text": "This is a long answer that keeps going. " * 4})
        await viewer.wait_event("playback_started", 30)
        await asyncio.sleep(1.0)
        status, _ = await viewer.post("interrupt")
        interrupted_at = time.monotonic()
        assert status == 202
        event = await viewer.wait_event("interrupted", 5)
        assert event["utterance_id"] == body["utterance_id"]
        await asyncio.sleep(1.5)
        late = [p for t, p in viewer.received.audio if interrupted_at + 0.5 <= t <= interrupted_at + 1.5]
        assert late and np.sqrt(np.mean(np.concatenate(late).astype(float) ** 2)) < 30, "speech went on"
    finally:
        assert await viewer.close() == 204



def test_a_model_folder_with_an_unreadable_checkpoint_stops_the_server_with_the_reason(tmp_path):
    import subprocess
    import sys

    from engine.families.latent.config import DIT_DIR, TINY_AUDIO, TINY_DIT, TINY_STREAM, TINY_VAE
    from engine.families.latent.models import write_random_model
    from testkit.server import ROOT, free_port

    folder = write_random_model(tmp_path, TINY_DIT, TINY_VAE, TINY_AUDIO, TINY_STREAM)
    broken = folder / DIT_DIR / "diffusion_pytorch_model.safetensors"
    broken.write_bytes(b"not a checkpoint")
    run = subprocess.run([sys.executable, "-m", "server", "--family", "latent", "--model-dir", str(folder),
                          "--port", str(free_port())], cwd=ROOT, capture_output=True, text=True, timeout=240)
    last = run.stderr.strip().splitlines()[-1]
    assert run.returncode == 1 and last.startswith("avatar-server: engine worker failed to start"), run.stderr[-2000:]
    assert str(broken) in last and "not a readable checkpoint" in last
    assert "leaked shared_memory" not in run.stderr


async def test_a_clip_is_refused_before_it_is_read(latent_server):
    form = aiohttp.FormData()
    form.add_field("video", b"\x00" * 4096, filename="me.mp4", content_type="video/mp4")
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{latent_server.url}/v1/avatars") as res:
            before = await res.json()
        async with http.post(f"{latent_server.url}/v1/avatars", data=form) as res:
            body = await res.json()
            assert res.status == 422 and body["error"]["code"] == "unsupported_avatar", body
        async with http.get(f"{latent_server.url}/v1/avatars") as res:
            assert await res.json() == before  # nothing was kept


async def test_ray_actors_run_the_latent_family_unchanged(tiny_model):
    from testkit.ray_head import RayHead

    with RayHead(cpus=2) as head:
        env = {"AVATAR_ENGINE": "ray", "AVATAR_RAY_ADDRESS": head.address, "AVATAR_WORKERS": "1",
               "AVATAR_FAMILY": "latent", "AVATAR_MODEL_DIR": str(tiny_model)}
        with ServerProcess(env=env) as server:
            viewer = await watch_generated_frames(server.url)
            assert await viewer.close() == 204



def address_frame() -> np.ndarray:
    """A 1280x720 frame of a public-domain weekly address (RGB): the speaker before a flag
    on his right and a mirror and lamp on his left."""
    import cv2

    from testkit.server import SHARED_DATA

    clip = cv2.VideoCapture(str(SHARED_DATA / "real-talking" / "obama-weekly-address" / "sentence_1.mp4"))
    clip.set(cv2.CAP_PROP_POS_FRAMES, 50)
    ok, bgr = clip.read()
    clip.release()
    assert ok and bgr.shape == (720, 1280, 3)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def dit_ranks(server: ServerProcess) -> list:
    import psutil

    return [p for p in psutil.Process(server.proc.pid).children(recursive=True)
            if "engine.families.latent.parallel" in " ".join(p.cmdline())]


def holds_the_photos_surroundings(frames: list[np.ndarray], photo: np.ndarray) -> None:
    assert frames[-1].shape == (720, 1280, 3)
    # His crop (2.3 face heights) is the photo's full height, so the 16:9 frame is the
    # photo itself: outside the head's square, the stream shows the photo
    flag, lamp = (slice(None), slice(0, 100)), (slice(None), slice(1180, 1280))
    for part in (flag, lamp):
        assert np.abs(frames[-1][part].astype(int) - photo[part]).mean() < 12
    head = np.array([f[:, 300:800].astype(np.float32) for f in frames])
    assert np.abs(np.diff(head, axis=0)).mean() > 3 * np.abs(np.diff(
        np.array([f[flag].astype(np.float32) for f in frames]), axis=0)).mean() + 0.5, \
        "the head is generated; its surroundings hold still"


async def test_a_wide_stream_shows_the_generated_head_in_the_photos_own_surroundings(tiny_model, tmp_path):
    """Also with the DiT split over two ranks (CPU processes here, GPUs on a GPU machine)."""
    import cv2
    import psutil

    from engine.families.portrait.scene import scene_path

    env = {"AVATAR_FAMILY": "latent", "AVATAR_MODEL_DIR": str(tiny_model), "AVATAR_WORKERS": "1",
           "AVATAR_FRAME": "1280x720", "AVATAR_AVATARS_DIR": str(tmp_path), "AVATAR_DIT_GPUS": "2"}
    photo = address_frame()
    form = aiohttp.FormData()
    form.add_field("image", cv2.imencode(".png", cv2.cvtColor(photo, cv2.COLOR_RGB2BGR))[1].tobytes(),
                   filename="address.png")
    with ServerProcess(env=env) as server:
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{server.url}/v1/avatars", data=form) as res:
                body = await res.json()
                assert res.status == 201, body
                avatar = body["avatar_id"]
        assert scene_path(tmp_path / f"{avatar}.png").exists()
        helpers = dit_ranks(server)
        assert len(helpers) == 1, "the worker's DiT runs on a second rank"
        viewer = AvatarViewer(server.url, avatar=avatar, keep_frames=25)
        await viewer.connect()
        try:
            await viewer.wait_frames(50, timeout=60)
            # Off the event loop: seconds of numpy on 1280x720 frames would stop this viewer's
            # receiver reports, and the server rightly ends a session whose viewer went silent
            await asyncio.to_thread(holds_the_photos_surroundings, [rgb for _, rgb in viewer.received.video], photo)
        finally:
            assert await viewer.close() == 204
        async with aiohttp.ClientSession() as http:
            async with http.delete(f"{server.url}/v1/avatars/{avatar}") as res:
                assert res.status == 204
        assert list(tmp_path.glob(f"{avatar}*")) == [], "the photo, its landmarks and its scene all go"
    _, alive = psutil.wait_procs(helpers, timeout=15)
    assert not alive, "the DiT's second rank ends with its worker"
