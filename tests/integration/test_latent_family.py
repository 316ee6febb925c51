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
