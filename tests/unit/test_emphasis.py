"""Emphasis: the published jaw opens with the voice's stress, against this voice's own level."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.config import FPS, SAMPLES_PER_FRAME
from engine.core import motion
from engine.families.motion.dit import WEIGHTS, MotionDiT
from engine.families.motion.emphasis import Emphasis, EmphasisConfig, frame_levels
from engine.families.motion.speech_features import feature_module
from engine.stages.context import ContextStage
from engine.stages.motion import MotionStage, SamplerConfig
from tests.unit.test_motion_model import run

CONFIG = EmphasisConfig()


def gains(levels: list[float], config: EmphasisConfig = CONFIG) -> np.ndarray:
    envelope = np.full(1, config.floor_db)
    return Emphasis(config).gains(np.array(levels), envelope)


def test_loud_speech_opens_fully_and_quiet_words_after_it_less():
    loud, quiet = -20.0, -20.0 - CONFIG.headroom_db - CONFIG.range_db
    g = gains([loud] * 5 + [quiet] * 5)
    assert np.allclose(g[:5], 1.0)
    assert np.allclose(g[5:], 1 - CONFIG.weight, atol=0.03)  # the envelope has fallen only 0.8 dB


def test_the_envelope_forgets_a_loud_frame_at_its_decay_rate():
    envelope = np.full(1, CONFIG.floor_db)
    Emphasis().gains(np.array([-10.0] + [-70.0] * FPS), envelope)
    assert np.isclose(envelope[0], -10.0 - CONFIG.decay_db_per_s)


def test_hiss_before_the_first_word_is_not_loud_speech():
    hiss = gains([-55.0] * (10 * FPS))  # ten seconds of room noise at a session's start
    assert hiss.max() < 0.7
    assert gains([-55.0], replace(CONFIG, floor_db=-70.0))[0] == 1.0  # without the floor it would open fully


def test_frame_levels_are_the_rms_level_and_hold_silence_at_the_floor():
    t = np.arange(2 * SAMPLES_PER_FRAME) / 48_000
    tone = (np.sin(2 * np.pi * 440 * t) * 3277).astype(np.int16)  # amplitude 0.1: RMS -23 dBFS
    pcm = np.concatenate([tone, np.zeros(SAMPLES_PER_FRAME, np.int16)])
    assert np.allclose(frame_levels(pcm, 3), [-23.0, -23.0, -70.0], atol=0.1)


def test_the_same_words_said_quietly_after_loudly_open_the_mouth_less(jfk_pcm48):
    """The engine's jaw on 2 s of real speech, then the same 2 s 20 dB quieter, in one stream:
    the quiet copy opens clearly less with emphasis than without."""
    words = jfk_pcm48[: 2 * 48_000]
    quiet = (words.astype(np.float32) * 0.1).astype(np.int16)
    pcm = np.concatenate([words, quiet])
    model, half = MotionDiT(WEIGHTS), 2 * FPS
    ratios = {}
    for weight in (0.0, CONFIG.weight):
        sampler = SamplerConfig(emphasis=replace(CONFIG, weight=weight))
        stages = [ContextStage(feature_module(model.config.audio_dim)), MotionStage(model, sampler)]
        opening = np.clip(run(stages, pcm)[:, motion.INDEX["jaw_open"]] - motion.SHUT, 0, None)
        ratios[weight] = np.percentile(opening[half:], 95) / np.percentile(opening[:half], 95)
    assert ratios[CONFIG.weight] < 0.9 * ratios[0.0], ratios
