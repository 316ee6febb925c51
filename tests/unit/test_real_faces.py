"""Real faces as training targets: the rig fit, the recording channel, and the scripts end to end."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.core import motion
from engine.families.portrait.avatar import DEFAULT_AVATAR, cache_path
from engine.families.portrait.rig import CLOSE_OVERLAP, CONTROL, READ_PUCKER, READ_UPPER_FOLLOW, FaceRig
from engine.families.portrait.rig_fit import fit_clip, mouth_opening
from training.motion.channel import coded, coloured_noise, degrade, speech_rms, with_noise
from training.motion.real_eval import SYSTEMS

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
J = motion.INDEX["jaw_open"]


def rig_clip(frames: int = 120) -> tuple[np.ndarray, np.ndarray]:
    """Landmarks the rig itself makes for a known track while the head rolls and sways."""
    lm = np.load(cache_path(DEFAULT_AVATAR))[:468].astype(np.float32)
    lm[CONTROL] += FaceRig(lm).closure * 0.5 / CLOSE_OVERLAP  # the default portrait's lips part: just meet
    rig = FaceRig(lm, drawn=1.0, upper_follow=READ_UPPER_FOLLOW, rest_gap=0.0, pucker=READ_PUCKER)  # as rig_fit reads
    t = np.arange(frames) / 25
    track = motion.zeros(frames)
    track[:, J] = np.clip(0.5 * np.sin(2 * np.pi * 1.5 * t), 0, None)
    track[:, motion.INDEX["head_roll"]] = 0.05 * np.sin(2 * np.pi * 0.4 * t)
    out, centre = np.repeat(lm[None], frames, 0), lm.mean(0)
    for i in range(frames):
        out[i, CONTROL] += rig.displacement(track[i])
        a = track[i, motion.INDEX["head_roll"]]
        rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
        out[i] = (out[i] - centre) @ rot.T + centre + [3 * np.sin(i / 9), 0]
    return out, track


def test_rig_fit_recovers_the_jaw_and_the_head_roll_of_a_known_face():
    landmarks, track = rig_clip()
    fitted = fit_clip(landmarks)
    assert np.corrcoef(fitted[:, J], track[:, J])[0, 1] > 0.95
    assert np.abs(fitted[:, J] - track[:, J]).max() < 0.08, "the jaw opens as far as the face did"
    roll = motion.INDEX["head_roll"]
    assert np.abs(fitted[:, roll] - track[:, roll]).max() < 0.01
    assert np.corrcoef(mouth_opening(landmarks), fitted[:, J])[0, 1] > 0.95


def test_recording_channel_keeps_the_timing():
    rng = np.random.default_rng(0)
    t = np.arange(48_000) / 48_000
    bursts = (np.sin(2 * np.pi * 3 * t) > 0.3) * np.sin(2 * np.pi * 440 * t) * 0.5
    for codec, rate in (("mp3", 32_000), ("opus", 12_000)):
        y = coded(bursts.astype(np.float32), codec, rate)
        assert len(y) == len(bursts)
        lags = {lag: np.corrcoef(bursts[:-40], y[lag: len(y) - 40 + lag])[0, 1] for lag in range(0, 40, 4)}
        assert max(lags, key=lags.get) == 0, f"{codec} round trip shifted the audio: {lags}"
    pcm = (bursts * 20000).astype(np.int16)
    for _ in range(5):
        out = degrade(pcm, rng)
        assert out.dtype == np.int16 and len(out) == len(pcm) and np.abs(out).max() > 0


@pytest.mark.parametrize("rate", [0.8, 1.25])
def test_a_clip_played_faster_is_shorter_and_higher_with_its_motion_on_the_new_timeline(rate):
    from training.motion.real_data import played_at

    frames, tone = 100, 200.0
    pcm = (np.sin(2 * np.pi * tone * np.arange(frames * 1920) / 48_000) * 10_000).astype(np.int16)
    track = motion.zeros(frames)
    track[:, J] = np.arange(frames) / frames  # a jaw that opens steadily
    label = np.zeros(frames, np.uint8)
    label[50] = 1
    sound, moved, moved_label = played_at(rate, pcm, track, label)
    assert len(moved) == len(moved_label) == int(frames / rate) and len(sound) == len(moved) * 1920
    spectrum = np.abs(np.fft.rfft(sound[:48_000].astype(np.float64)))  # 1 s: bin k is k Hz
    assert int(np.argmax(spectrum)) == pytest.approx(tone * rate, abs=2)
    assert moved[:, J] == pytest.approx(np.minimum(np.arange(len(moved)) * rate, frames - 1) / frames, abs=1e-6)
    assert abs(int(np.argmax(moved_label)) - 50 / rate) <= 1


def test_noise_is_added_the_asked_many_db_under_the_speech_with_its_colour():
    rng = np.random.default_rng(0)
    t = np.arange(3 * 48_000) / 48_000
    speech = ((np.sin(2 * np.pi * 2 * t) > 0) * np.sin(2 * np.pi * 300 * t) * 8000).astype(np.int16)  # talk, pause
    for slope in (0.0, 1.0, 2.0):
        noise = coloured_noise(48_000, rng, slope)
        power = np.abs(np.fft.rfft(noise)) ** 2  # 1 s of noise: bin k is k Hz
        assert np.sqrt(np.mean(noise**2)) == pytest.approx(1, rel=1e-6)
        assert power[4000:8000].sum() / power[250:500].sum() == pytest.approx(16 ** (1 - slope), rel=0.25)
        noisy = with_noise(speech, noise, 20, rng)
        added = noisy.astype(np.float64) - speech
        assert 20 * np.log10(speech_rms(speech) / np.sqrt(np.mean(added**2))) == pytest.approx(20, abs=0.1)
    assert not np.array_equal(with_noise(speech, noise, 20, rng), with_noise(speech, noise, 20, rng))


def test_real_faces_data_train_and_evaluate_run_end_to_end(tmp_path):
    run = lambda *args: subprocess.run([sys.executable, "-m", *args], cwd=ROOT,  # noqa: E731
                                       capture_output=True, text=True, timeout=600)
    faces, data, weights = tmp_path / "faces", tmp_path / "data", tmp_path / "w.safetensors"
    extracted = run("training.motion.real_faces", "--out", str(faces), "--limit", "1")
    assert extracted.returncode == 0, extracted.stderr
    assert json.loads(extracted.stdout.splitlines()[-1]) == {"clips": 4, "errors": 0}
    built = run("training.motion.real_data", "--faces", str(faces), "--out", str(data), "--copies", "1",
                "--speeds", "1")
    assert built.returncode == 0, built.stderr
    train = np.load(data / "train.npz")
    assert len(train["features"]) == len(train["motion"]) == train["starts"][-1] > 100
    assert train["motion"][:, J].max() > 0.1, "the real mouth opens"
    assert len(train["bilabial"]) == len(train["features"]) and 0 < train["bilabial"].mean() < 0.3, \
        "the force-aligned p/b/m of the sentence label some frames"
    assert {-1, 0, 1} == set(np.unique(train["rounding"])), "its rounded and spread sounds label others"
    assert json.loads(built.stdout.splitlines()[-1])["speeds"] == 1
    assert len(train["starts"]) - 1 == 3, "the clip clean, degraded and re-timed"
    shape = run("training.motion.lip_shape", "--data", str(data), "--out", str(tmp_path / "s.safetensors"),
                "--frames", "200")
    assert shape.returncode == 0, shape.stderr
    assert len(json.loads(shape.stdout)["held_back_auc"]) == 1
    closure = run("training.motion.closure", "--data", str(data), "--out", str(tmp_path / "c.safetensors"),
                  "--steps", "5")
    assert closure.returncode == 0, closure.stderr
    assert json.loads(closure.stdout.splitlines()[-1])["steps"] == 5
    held = np.load(data / "heldout.npz")
    assert set(held["sources"]) == {"grid-other", "obama", "crema-d"}, "whole sources are held out"
    trained = run("training.motion.train", "--data", str(data), "--out", str(weights), "--steps", "5",
                  "--lookahead", "2")
    assert trained.returncode == 0, trained.stderr
    evaluated = run("training.motion.real_eval", "--data", str(data), "--weights", str(weights), "--limit", "1",
                    "--systems", *SYSTEMS, "phones")
    assert evaluated.returncode == 0, evaluated.stderr
    result = json.loads(evaluated.stdout)
    assert result["clips"] == 3
    for system in ("dit", "interim", "loudness"):
        assert {"real_corr", "amplitude", "closure", "open_vowel", "jfk_closure"} <= set(result[system])
    assert result["loudness"]["real_corr"] > 0.2, "the loudness mouth follows real mouths a little"
    assert result["phones"]["real_corr"] > 0.4, "the mouth of the clips' own aligned phones follows them"


def test_forced_alignment_times_phones_not_words():
    """p/b/m closure is scored inside the phone: `align` must not hand back word spans."""
    from training.motion.evaluate import jfk_set

    (_, segments), = jfk_set()
    bilabials = [s for s in segments if s.viseme == "BMP"]
    assert len(bilabials) == 2  # the m of "my" and of "americans"
    assert all(0.03 <= s.end - s.start <= 0.15 for s in bilabials), bilabials
    assert len({s.start for s in segments}) > 0.8 * len(segments)  # phones of a word start apart


def test_reenact_footage_drive_puts_each_clips_own_fitted_mouth_in_its_span():
    from training.video.reenact import footage_mouth

    landmarks, track = rig_clip(60)
    model = motion.zeros(100)
    model[:, J], model[:, motion.INDEX["head_yaw"]] = 0.9, 0.2
    out = footage_mouth(model, [landmarks[:25], landmarks[25:]])  # two held-out clips, then silence
    assert np.corrcoef(out[:60, J], track[:, J])[0, 1] > 0.95, "the footage's mouth, in order"
    assert np.array_equal(out[60:], model[60:]), "after the clips the model's motion plays on"
    others = [i for i in range(motion.DIM) if i not in motion.MOUTH_INDEX]
    assert np.array_equal(out[:, others], model[:, others]), "only the mouth is the footage's"
