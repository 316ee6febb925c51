"""An agent's pushed speech moves the mouth as the batch render of the same recording does.

Real speech (jfk.flac at 16 kHz) goes over the agent socket at real-time pace, in 20 ms,
100 ms and uneven messages, to a real server; a real aiortc client records what it gets,
and mediapipe measures its mouth (testkit/lipsync.py). The same recording through
`avatar-render` is the bar: the mouth the client saw must be the file's mouth, frame by
frame, and follow the loudness it heard about as well as the file's follows the file's.

Not the same to the last digit: a session draws its own random seed (the file's is 0, the
best of six on this recording: rendered with seeds 0-5 the file reads 0.763 / 0.705 / 0.745 /
0.717 / 0.741 / 0.732), the client's frames went through H.264 and Opus, and a stock aiortc
receiver holds its audio 80 ms back (its jitter buffer's prefetch), so it hears the sound
40-60 ms after the frame it belongs to (docs/conversation.md, "Agent audio and the batch
render").
"""

import asyncio
import subprocess
import time

import numpy as np
import pytest

from testkit.agent_push import pieces, push_paced, watched_agent
from testkit.audio import write_wav
from testkit.lipsync import CELL_S, Sync, file_sync, mouth_follows_sound, opening, played_at, same_motion
from testkit.server import ARTIFACTS, ROOT

pytestmark = pytest.mark.integration
RATE = 16000
UNEVEN_MS = (20, 60, 10, 120, 40, 30, 80, 20, 100, 40)  # as an agent's TTS hands them over


SEEDS = 0.13  # how far below the file's seed-0 figure another seed, the codecs and the receiver
# may read: 0.658-0.734 against the file's 0.761 in 19 pushes (20 ms, 100 ms, uneven, jittered),
# and 0.641 once in a full suite's run (frame by frame 0.848: the same mouth, heard 40 ms late);
# the file itself reads down to 0.705 with another seed
SAME = 0.8  # the client's mouth against the file's, frame by frame: 0.844-0.967 in those pushes; an
# 80 ms hole of silence once a second, which shifts everything after it, reads 0.28


@pytest.fixture(scope="module")
def batch(jfk_pcm16) -> tuple[Sync, np.ndarray]:
    """The recording through avatar-render, measured on the file."""
    wav, out = write_wav(ARTIFACTS / "jfk16.wav", jfk_pcm16, RATE), ARTIFACTS / "jfk16-render.mp4"
    subprocess.run([str(ROOT / ".venv/bin/avatar-render"), "--audio", str(wav), "--out", str(out)],
                   check=True, capture_output=True, timeout=300)
    return file_sync(str(out))


@pytest.mark.parametrize("pattern", [(20,), (100,), UNEVEN_MS], ids=["20ms", "100ms", "uneven"])
async def test_pushed_speech_moves_the_mouth_as_the_batch_render_does(server, jfk_pcm16, batch, pattern):
    async with watched_agent(server.url) as (viewer, agent):
        voice = await agent.open_audio(RATE)
        await push_paced(voice, pieces(jfk_pcm16, RATE, pattern), RATE)
        await voice.end()
        started = await viewer.wait_event("speak_started", 10)
        ended = await viewer.wait_event("speak_ended", 20)
        await asyncio.sleep(0.5)
        shift = time.monotonic() - time.time()  # received media is stamped on the monotonic clock
        start, end = started["t"] + shift - 0.5, ended["t"] + shift + 0.5
        got = viewer.received
        times = played_at([t for t, _ in got.video], got.video_time)
        shown = (times >= start - 0.1) & (times < end)
        mouth = await asyncio.to_thread(opening, [f for (_, f), keep in zip(got.video, shown) if keep])
        audio = list(zip(played_at([t for t, _ in got.audio], got.audio_time), [p for _, p in got.audio]))
        live = mouth_follows_sound(times[shown], mouth, audio, start, end)
        file, file_mouth = batch
        alike = same_motion(mouth, file_mouth)
        print(f"\n{pattern}: live {live}; file {file}; frame by frame {alike:.3f}")
        assert end - start > len(jfk_pcm16) / RATE, "the whole recording was played"
        assert alike >= SAME, f"the client's mouth is not the file's ({alike:.3f})"
        assert abs(live.lag_ms) <= 80, f"live {live}, file {file}"
        assert live.best >= file.best - SEEDS, f"live {live}, file {file}"
        await voice.close()


def test_the_measure_finds_a_known_lag():
    """A mouth that copies the level two cells late reads two cells' lag at a correlation of 1."""
    from testkit.lipsync import correlate

    level = np.random.default_rng(0).normal(size=300)
    mouth = np.roll(level, 2)
    sync = correlate(mouth, level)
    assert sync.lag_ms == 2 * round(CELL_S * 1000) and sync.best > 0.99
