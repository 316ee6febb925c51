"""Liveliness: a voice whose pitch barely moves gets a calmer mouth than one whose pitch moves
widely, whatever the microphone's level, and a session starts at the model's own size."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.config import FPS, SAMPLE_RATE, SAMPLES_PER_FRAME
from engine.families.motion.liveliness import RATE, SPAN, Liveliness, LivelinessConfig, pitch

CONFIG = LivelinessConfig()


def voice(f0: np.ndarray, level: float = 0.1) -> np.ndarray:
    """A buzz with harmonics at pitch f0 (Hz, one value per 48 kHz sample) in 4 Hz syllables."""
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    buzz = sum(np.sin(k * phase) / k for k in range(1, 11))
    t = np.arange(len(f0)) / SAMPLE_RATE
    syllables = np.clip(np.sin(2 * np.pi * 4 * t) * 2, 0, 1)
    return (buzz * syllables * level * 32767 / 2).astype(np.int16)


def gains(pcm: np.ndarray, config: LivelinessConfig = CONFIG, chunk: int = 2) -> np.ndarray:
    lively = Liveliness(config)
    state = lively.new_state()
    frames = len(pcm) // SAMPLES_PER_FRAME // chunk * chunk
    size = chunk * SAMPLES_PER_FRAME
    starts = range(0, frames * SAMPLES_PER_FRAME, size)
    return np.concatenate([lively.gains(pcm[i: i + size], chunk, state) for i in starts])


def seconds(s: float) -> np.ndarray:
    return np.arange(int(s * SAMPLE_RATE)) / SAMPLE_RATE


def test_pitch_reads_a_low_and_a_high_voice_without_octave_errors():
    for f0 in (90.0, 120.0, 220.0, 330.0):
        t = np.arange(SPAN) / RATE
        buzz = sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 11)) * 0.05
        found = pitch(buzz[None, :])[0]
        assert abs(found / f0 - 1) < 0.02, (f0, found)
    assert np.isnan(pitch(np.random.default_rng(0).standard_normal((1, SPAN)) * 0.05)[0])  # noise has none


def test_a_flat_voice_gets_a_calmer_mouth_than_a_lively_one():
    t = seconds(8)
    flat = voice(np.full(len(t), 120.0))
    # intonation: the pitch glides over 10 semitones and back every 2 s
    lively = voice(120 * 2 ** (5 * (1 + np.sin(2 * np.pi * t / 2)) / 12))
    g_flat, g_lively = gains(flat)[-FPS:], gains(lively)[-FPS:]
    assert np.allclose(g_flat, CONFIG.limits[0]), g_flat.mean()
    assert g_lively.min() > 1.2, g_lively.min()


def test_the_microphone_level_does_not_change_the_gain():
    t = seconds(6)
    f0 = 150 * 2 ** (3 * np.sin(2 * np.pi * t / 1.5) / 12)
    loud, quiet = gains(voice(f0, 0.3)), gains(voice(f0, 0.01))  # 30 dB apart
    assert np.abs(loud - quiet).max() < 0.1  # the syllables' quiet edges are voiced in one only
    assert abs(loud[-2 * FPS:].mean() - quiet[-2 * FPS:].mean()) < 0.02


def test_a_session_starts_at_the_models_own_size_and_silence_keeps_it():
    assert np.all(gains(np.zeros(3 * SAMPLE_RATE, np.int16)) == 1.0)
    off = replace(CONFIG, power=0.0)
    assert np.all(gains(voice(np.full(len(seconds(2)), 120.0)), off) == 1.0)


def test_chunks_give_the_same_gains_as_one_call(jfk_pcm48):
    words = jfk_pcm48[: 4 * SAMPLE_RATE]
    whole = gains(words, chunk=len(words) // SAMPLES_PER_FRAME)
    assert np.allclose(gains(words, chunk=2), whole[: len(whole) // 2 * 2], atol=1e-6)
    assert whole.min() >= CONFIG.limits[0] and whole.max() <= CONFIG.limits[1]
