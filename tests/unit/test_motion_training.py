"""The motion model's data recipe, training and evaluation scripts run (a few steps only in CI)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.core import motion
from engine.families.motion.dit import MotionDiT
from training.motion.recipe import jaw_target
from training.motion.visemes import Segment, frames_of, from_arpabet, from_ipa, mouth_curves

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def test_visemes_close_the_lips_for_p_b_m_and_open_them_for_open_vowels():
    segments = [Segment("sil", 0, 0.2), *from_ipa("m", 0.2, 0.28), *from_ipa("ɑː", 0.28, 0.5),
                *from_arpabet("P", 0.5, 0.56), *from_arpabet("AA1", 0.56, 0.8), Segment("sil", 0.8, 1.2)]
    jaw = mouth_curves(segments, 30)[:, motion.INDEX["jaw_open"]]
    for s in segments:
        frames = jaw[int(s.start * 25 + 0.5): max(int(s.end * 25 + 0.5), int(s.start * 25 + 0.5) + 1)]
        if s.viseme == "BMP":
            assert frames.min() == 0.0
        if s.viseme == "AA":
            assert frames.max() > 0.5
    assert jaw[:3].max() < 0.05 and jaw[-3:].max() < 0.05


def test_jaw_target_follows_viseme_and_emphasis_and_shuts_for_p_b_m():
    """Tone bursts over room noise stand in for phones at known levels."""
    layout = [("sil", 0.4, None), ("AA", 0.4, -10), ("BMP", 0.08, -30), ("AA", 0.32, -22), ("IY", 0.32, -10),
              ("sil", 0.48, None)]
    rng, rate, parts, segments, t = np.random.default_rng(0), 48_000, [], [], 0.0
    for viseme, seconds, db in layout:
        n = int(seconds * rate)
        tone = np.sin(2 * np.pi * 220 * np.arange(n) / rate) * np.sqrt(2) * 10 ** ((db or -200) / 20)
        parts.append(tone + rng.standard_normal(n) * 10 ** (-60 / 20))
        segments.append(Segment(viseme, t, t + seconds))
        t += seconds
    pcm = np.concatenate(parts)
    frames = int(t * 25)

    def jaw(gain: float) -> np.ndarray:
        shaped = mouth_curves(segments, frames)[:, motion.INDEX["jaw_open"]]
        return jaw_target(shaped, (pcm * gain * 32767).astype(np.int16), frames)

    track = jaw(1.0)
    peak = {i: track[frames_of(s, frames)[1:-1]].max() for i, s in enumerate(segments)}
    assert track[:5].max() < 0.02 and track[-5:].max() < 0.02, "silence keeps the mouth shut"
    assert peak[1] > 1.3 * peak[3] > 0, "a loud ah opens wider than a quiet one"
    assert peak[1] > 1.3 * peak[4] > 0, "a loud ah opens wider than an equally loud ee"
    assert track[frames_of(segments[2], frames)].min() == 0, "the lips meet for the p/b/m"
    np.testing.assert_allclose(jaw(0.1), track, atol=0.01, err_msg="the input gain does not change the jaw")


def test_recipe_train_and_evaluate_run_end_to_end(tmp_path):
    data, weights = tmp_path / "data", tmp_path / "w.safetensors"
    run = lambda *args: subprocess.run([sys.executable, "-m", *args], cwd=ROOT,  # noqa: E731
                                       capture_output=True, text=True, timeout=600)
    made = run("training.motion.recipe", "--out", str(data), "--scale", "0.005")
    assert made.returncode == 0, made.stderr
    assert all(name in made.stdout for name in ("piper:", "espeak-ng:", "flite:", "held out"))
    train = np.load(data / "train.npz")
    assert len(train["features"]) == len(train["motion"]) == train["starts"][-1] > 500
    assert {v.split("-")[0] for v in train["voices"]} == {"piper", "espeak", "flite"}
    again = run("training.motion.recipe", "--out", str(tmp_path / "again"), "--scale", "0.005")
    assert again.returncode == 0, again.stderr
    repeat = np.load(tmp_path / "again" / "train.npz")
    for name in ("features", "motion", "segments"):
        assert np.array_equal(train[name], repeat[name]), f"the recipe is reproducible ({name})"
    trained = run("training.motion.train", "--data", str(data), "--out", str(weights), "--steps", "5")
    assert trained.returncode == 0, trained.stderr
    assert json.loads(trained.stdout.splitlines()[-1])["steps"] == 5
    model = MotionDiT(weights)
    window = model.sample(motion.zeros(10), np.arange(10) < 8, np.zeros((10, model.config.audio_dim), np.float32),
                          np.random.default_rng(0).standard_normal((10, motion.DIM)).astype(np.float32),
                          np.array([1.0, 0.5, 0.0], np.float32))
    assert np.isfinite(window).all()
    evaluated = run("training.motion.evaluate", "--data", str(data), "--weights", str(weights), "--limit", "1")
    assert evaluated.returncode == 0, evaluated.stderr
    result = json.loads(evaluated.stdout)
    assert {"closure", "open_vowel", "loudness_corr", "reference_corr", "boundary_jump"} <= set(result["dit"]["jfk"])
