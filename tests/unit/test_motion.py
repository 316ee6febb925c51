"""Audio features and the interim audio-to-motion driver on real speech."""

import numpy as np
import pytest

from engine.config import SAMPLES_PER_FRAME
from engine.core import motion
from engine.families.motion.audio_features import AudioFeatureModule
from engine.families.motion.idle import IdleMotionModule
from engine.families.motion.interim import InterimMotionModule

pytestmark = pytest.mark.unit
JAW = motion.INDEX["jaw_open"]


def drive(pcm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    feats, interim = AudioFeatureModule(), InterimMotionModule()
    fs, ms = feats.initial_state(0), interim.initial_state(0)
    frames = len(pcm) // SAMPLES_PER_FRAME
    out, db = [], []
    for i in range(0, frames - 1, 2):  # two-frame chunks, as the server sends them
        f = feats(pcm[i * SAMPLES_PER_FRAME : (i + 2) * SAMPLES_PER_FRAME], 2, fs)
        out.append(interim(f, ms)[0])
        db.append(f[:, 0])
    return np.concatenate(out), np.concatenate(db)


def test_silence_keeps_the_mouth_closed():
    coeffs, _ = drive(np.zeros(48000 * 2, np.int16))
    assert np.abs(coeffs[:, JAW]).max() < 1e-3


def test_real_speech_opens_the_mouth_with_loudness(jfk_pcm48):
    coeffs, db = drive(jfk_pcm48)
    jaw = coeffs[:, JAW]
    assert np.corrcoef(jaw, db)[0, 1] > 0.6
    loud, quiet = db > np.percentile(db, 80), db < np.percentile(db, 20)
    assert jaw[loud].mean() > 0.25 and jaw[quiet].mean() < 0.08


def test_idle_motion_blinks_and_never_repeats_over_a_minute():
    idle = IdleMotionModule()
    state = idle.initial_state(7)
    track = idle(motion.zeros(25 * 60), np.zeros(25 * 60, np.float32), state)
    blinks = (np.diff((track[:, motion.INDEX["blink_l"]] > 0.5).astype(int)) == 1).sum()
    assert 8 <= blinks <= 35
    windows = {track[i : i + 50].tobytes() for i in range(0, len(track) - 50, 25)}
    assert len(windows) == len(range(0, len(track) - 50, 25))
