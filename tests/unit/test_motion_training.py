"""The motion model's data recipe, training and evaluation scripts run (a few steps only in CI)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine import motion
from engine.modules.motion_dit import MotionDiT
from training.motion.visemes import Segment, from_arpabet, from_ipa, mouth_curves

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
    trained = run("training.motion.train", "--data", str(data), "--out", str(weights), "--steps", "5")
    assert trained.returncode == 0, trained.stderr
    assert json.loads(trained.stdout.splitlines()[-1])["steps"] == 5
    model = MotionDiT(weights)
    window = model.sample(motion.zeros(10), np.arange(10) < 8, np.zeros((10, 80), np.float32),
                          np.random.default_rng(0).standard_normal((10, motion.DIM)).astype(np.float32),
                          np.array([1.0, 0.5, 0.0], np.float32))
    assert np.isfinite(window).all()
    evaluated = run("training.motion.evaluate", "--data", str(data), "--weights", str(weights), "--limit", "1")
    assert evaluated.returncode == 0, evaluated.stderr
    result = json.loads(evaluated.stdout)
    assert {"closure", "open_vowel", "loudness_corr", "reference_corr", "boundary_jump"} <= set(result["dit"]["jfk"])
