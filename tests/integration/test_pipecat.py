"""pipecat: a pipecat pipeline (pipecat's own PipelineWorker and WorkerRunner, in the agent's
environment .venv-pipecat) whose output is AvatarService, driving a session of the real server,
watched by a real aiortc viewer. See tests/pipecat/drive.py for the pipelines."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from avatar_client import AvatarViewer
from tests.integration.test_session import frames_between, rms
from tests.mouth import OPEN, OPEN_SHARE, dark_pixels

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
PIPECAT_PYTHON = ROOT / ".venv-pipecat" / "bin" / "python"


@pytest.fixture(scope="module")
def speech_24k(jfk_pcm48, tmp_path_factory) -> Path:
    """Real speech as pipecat's TTS services emit it: PCM16 mono at 24 kHz."""
    from scipy.signal import resample_poly

    pcm = np.clip(resample_poly(jfk_pcm48.astype(np.float32), 1, 2), -32768, 32767).astype("<i2")
    path = tmp_path_factory.mktemp("pipecat") / "jfk-24k.raw"
    path.write_bytes(pcm.tobytes())
    return path


async def drive(url: str, session_id: str, speech: Path, scenario: str) -> dict[str, float]:
    """Runs the pipecat pipeline to its end; when (time.monotonic) each of its events came."""
    assert PIPECAT_PYTHON.exists(), "no .venv-pipecat: the test command (make test) installs it"
    proc = await asyncio.create_subprocess_exec(
        str(PIPECAT_PYTHON), str(ROOT / "tests" / "pipecat" / "drive.py"), url, session_id, str(speech), scenario,
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, err.decode()[-3000:]
    shift = time.monotonic() - time.time()
    events = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    sys.stderr.write(err.decode()[-2000:])
    return {e["event"]: e["t"] + shift for e in events}


async def test_a_pipecat_pipeline_speaks_through_the_avatar(server, speech_24k):
    viewer = AvatarViewer(server.url)
    await viewer.connect()
    events = await viewer.record_events()
    try:
        await viewer.wait_frames(25)
        seen = await drive(server.url, viewer.session_id, speech_24k, "speak")
        assert seen["bot_started"] < seen["bot_stopped"], seen
        finished = next(e for e in events if e["type"] == "playback_finished")
        spoken_ms = speech_24k.stat().st_size / 48  # 24 kHz PCM16: 48 bytes a millisecond
        assert finished["interrupted"] is False and abs(finished["position_ms"] - spoken_ms) <= 200, finished
        started, stopped = seen["bot_started"], seen["bot_stopped"]
        assert rms(viewer, started + 0.5, stopped - 0.5) > 300, "the viewer did not hear the pipeline's speech"
        counts = [dark_pixels(f) for f in frames_between(viewer, started + 0.3, stopped - 0.3)]
        assert sum(c > OPEN for c in counts) > OPEN_SHARE * len(counts), "the mouth did not follow the pipeline"
    finally:
        await viewer.close()


@pytest.mark.parametrize("scenario", ["interrupt", "user_started"])
async def test_an_interruption_or_the_user_speaking_stops_the_avatar_within_300_ms(server, speech_24k, scenario):
    viewer = AvatarViewer(server.url)
    await viewer.connect()
    events = await viewer.record_events()
    try:
        await viewer.wait_frames(25)
        seen = await drive(server.url, viewer.session_id, speech_24k, scenario)
        cut = seen["interrupt"]
        assert seen["bot_started"] < cut < seen["bot_stopped"], seen
        assert rms(viewer, cut - 1.2, cut - 0.2) > 300, "no speech before the interruption?"
        assert rms(viewer, cut + 0.3, cut + 1.3) < 30, "the avatar spoke on after the InterruptionFrame"
        finished = next(e for e in events if e["type"] == "playback_finished")
        assert finished["interrupted"] is True, finished
    finally:
        await viewer.close()
