"""Lip shape: the lips round for o/u/w and spread for ee/i/e, in voices the detector never
heard, drawn so that mediapipe (as the judge and a viewer) sees it."""

import numpy as np
import pytest

from engine.core import motion
from engine.families.motion.dit import WEIGHTS, MotionDiT
from engine.families.motion.lip_shape import LipShape, LipShapeConfig
from engine.families.motion.speech_features import feature_module
from engine.stages.context import ContextStage
from engine.stages.motion import MotionStage, SamplerConfig
from engine.stages.mouth_shaping import NARROWING
from tests.unit.test_motion_model import run

pytestmark = pytest.mark.unit
ROUND, WIDTH = motion.INDEX["lip_round"], motion.INDEX["lip_width"]


def constant_shape(answer: float) -> LipShape:
    """A LipShape whose answer is `answer` whatever it hears."""
    c = LipShapeConfig()
    size = c.rows * c.columns
    return LipShape.from_params({"mean": np.zeros(size, np.float32), "std": np.ones(size, np.float32),
                                 "weight": np.zeros(size, np.float32), "bias": np.float32(answer)}, c)


def test_the_detector_sets_the_published_shape_and_leaves_the_models_window(jfk_pcm48):
    pcm, model = jfk_pcm48[: 2 * 48000], MotionDiT(WEIGHTS)
    tracks, stages = {}, {}
    for answer in (None, 0.5, -0.5):
        stages[answer] = MotionStage(model, SamplerConfig(lip_shape=0.8),
                                     lip_shape=None if answer is None else constant_shape(answer))
        tracks[answer] = run([ContextStage(feature_module(model.config.audio_dim)), stages[answer]], pcm)
    rounded, spread = tracks[0.5], tracks[-0.5]
    assert rounded[:, ROUND] == pytest.approx(0.4) and rounded[:, WIDTH] == pytest.approx(-NARROWING * 0.4)
    assert spread[:, ROUND] == pytest.approx(0.0) and spread[:, WIDTH] == pytest.approx(NARROWING * 0.4)
    others = [i for i in range(motion.DIM) if i not in (ROUND, WIDTH)]
    np.testing.assert_array_equal(rounded[:, others], tracks[None][:, others])  # only the shape moves


@pytest.mark.parametrize("language", ["en", "fr"])
def test_the_lips_round_for_o_u_w_and_spread_for_ee_in_a_voice_never_trained_on(language):
    """espeak-ng's f2 voice (the detector learned from GRID's one real speaker): in the
    engine's published motion, its rounded sounds round and narrow the lips, its spread ones
    spread them."""
    from training.motion.evaluate import language_set, run_motion
    from training.motion.visemes import frames_of, rounding_sign

    shape: dict[int, list[np.ndarray]] = {1: [], -1: []}
    for pcm, segments in language_set(language, ("f2",)):
        track = run_motion("dit", pcm)[0]
        for s in segments:
            if sign := rounding_sign(s.viseme):
                shape[sign].append(track[frames_of(s, len(track))][:, [ROUND, WIDTH]].mean(0))
    rounded, spread = np.mean(shape[1], 0), np.mean(shape[-1], 0)
    assert len(shape[1]) >= 6 and len(shape[-1]) >= 6
    assert rounded[0] > spread[0] + 0.1, (rounded, spread)
    assert rounded[1] < spread[1] - 0.1, (rounded, spread)


def test_a_rounded_mouth_reads_narrower_and_a_spread_one_wider_to_mediapipe():
    from training.motion.judge import landmarks, mouth_measures
    from training.motion.real_eval import MouthMeter

    coeffs = motion.zeros(3)
    coeffs[:, motion.INDEX["jaw_open"]] = 0.3
    coeffs[1, ROUND], coeffs[1, WIDTH] = 0.6, -NARROWING * 0.6
    coeffs[2, WIDTH] = NARROWING * 0.6
    neutral, rounded, spread = mouth_measures(landmarks(MouthMeter().frames(coeffs)))["width"]
    assert rounded < 0.96 * neutral and spread > 1.025 * neutral, (rounded, neutral, spread)  # 0.937, 1.036
