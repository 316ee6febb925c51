"""`avatar-render`: real speech in, a synced H.264 + AAC MP4 out; bad inputs get one clear line."""

import subprocess
import sys

import av
import numpy as np
import pytest

from testkit.audio import decoded
from testkit.server import ARTIFACTS, ROOT, SHARED_DATA
from tests.mouth import OPEN, OPEN_SHARE, dark_pixels

pytestmark = pytest.mark.integration


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.batch.render", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def jfk_mp4():
    out = ARTIFACTS / "jfk.mp4"
    result = run("--audio", SHARED_DATA / "jfk.flac", "--out", out)
    assert result.returncode == 0, result.stderr
    assert "rendering" in result.stderr and "100.0%" in result.stderr  # the progress line
    return out


def test_mp4_has_h264_and_aac_matching_the_input_duration(jfk_mp4):
    with av.open(str(SHARED_DATA / "jfk.flac")) as c:
        source = float(c.duration / 1e6)
    with av.open(str(jfk_mp4)) as c:
        v, a = c.streams.video[0], c.streams.audio[0]
        assert v.codec_context.name == "h264" and a.codec_context.name == "aac"
        assert (v.width, v.height) == (512, 512)
        assert abs(float(v.duration * v.time_base) - source) < 0.1
        assert abs(float(a.duration * a.time_base) - source) < 0.1


def test_written_audio_lines_up_with_the_input_to_a_millisecond(jfk_mp4, jfk_pcm48):
    written = decoded(jfk_mp4).astype(np.float64)
    ref = jfk_pcm48.astype(np.float64)[: 48000 * 4]
    lags = np.correlate(written[: len(ref) + 2400], ref, "valid")  # written may start up to 50 ms late
    early = np.correlate(ref[: len(ref) - 2400], written[: len(ref)], "valid")
    lag = int(np.argmax(lags)) if lags.max() >= early.max() else -int(np.argmax(early))
    assert abs(lag) <= 48, f"audio is off by {lag} samples"


def test_the_video_talks(jfk_mp4):
    with av.open(str(jfk_mp4)) as c:
        counts = [dark_pixels(f.to_ndarray(format="rgb24")) for f in c.decode(video=0)]
    assert len(counts) == 276
    assert sum(c < OPEN for c in counts) > 10, "the mouth never closes (pauses, p/b/m)"
    assert sum(c > OPEN for c in counts) > OPEN_SHARE * len(counts), "the mouth hardly opens"


@pytest.mark.parametrize("name,content", [
    ("empty.wav", b""),
    ("notes.mp3", b"these are not audio samples\n" * 20),
    ("truncated.flac", None),
])
def test_bad_inputs_get_one_line_and_a_nonzero_exit(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content if content is not None else (SHARED_DATA / "jfk.flac").read_bytes()[:20000])
    out = tmp_path / "out.mp4"
    result = run("--audio", path, "--out", out)
    lines = [line for line in result.stderr.replace("\r", "\n").splitlines()
             if line.strip() and not line.startswith("rendering")]
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(lines) == 1 and lines[0].startswith("avatar-render: ")
    assert not out.exists() and not list(tmp_path.glob("*.part"))


def test_a_clip_as_the_avatar_renders_the_person_with_a_progress_line(tmp_path, jfk_pcm48):
    """`--avatar clip.mp4`: prepared once (a progress line), cached by content, and the
    output shows the person of the clip (their own pixels) with a moving mouth."""
    import os

    from engine.families.video.tracking import frames_opening
    from tests.video import nearest_clip_frame_error, person_clip, prepared_crop

    clip = person_clip(tmp_path / "me.mp4")
    out = tmp_path / "talk.mp4"
    env = {**os.environ, "HOME": str(tmp_path)}  # the avatar cache lives under HOME
    args = [sys.executable, "-m", "engine.batch.render", "--audio", str(SHARED_DATA / "jfk.flac"),
            "--avatar", str(clip), "--out", str(out)]
    first = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert first.returncode == 0, first.stderr
    assert "preparing me.mp4" in first.stderr and "100% ready" in first.stderr
    again = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert again.returncode == 0 and "tracking the face" not in again.stderr  # cached by content
    with av.open(str(out)) as c:
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    assert len(frames) == 276 and frames[0].shape == (512, 512, 3)
    folder = tmp_path / ".cache" / "avatar-server" / "avatars"
    (prepared,) = folder.glob("*.clip.npz")
    crop = prepared_crop(folder, prepared.name.split(".")[0])
    assert nearest_clip_frame_error(frames[100], clip, crop) < 8
    assert np.std(frames_opening(frames)) > 0.02, "the mouth does not move"
