"""Mouth level: whatever size the model opens a recording's mouth, its running peak is held
to the target, shut frames do not count, and the state never grows."""

from __future__ import annotations

import numpy as np

from engine.families.motion.mouth_level import MouthLevel, MouthLevelConfig

CONFIG = MouthLevelConfig()


def syllables(peak: float, frames: int = 500, seed: int = 0) -> np.ndarray:
    """A jaw beyond shut that opens and shuts in syllables of varied size up to about `peak`."""
    rng = np.random.default_rng(seed)
    t = np.arange(frames)
    shape = np.clip(np.sin(2 * np.pi * t / 6), 0, None)  # 4 syllables a second at 25 fps
    return (shape * peak * rng.uniform(0.5, 1.0, frames // 6 + 1)[t // 6]).astype(np.float32)


def gains(opening: np.ndarray, config: MouthLevelConfig = CONFIG, chunk: int = 2) -> np.ndarray:
    level = MouthLevel(config)
    state = level.new_state()
    return np.concatenate([level.gains(opening[i: i + chunk], state) for i in range(0, len(opening), chunk)])


def test_a_wide_and_a_narrow_model_mouth_end_at_the_same_peak():
    wide, narrow = syllables(0.8), syllables(0.35, seed=1)
    held = [np.percentile((x * gains(x))[-250:], 95) for x in (wide, narrow)]
    assert abs(held[0] - held[1]) < 0.1 * CONFIG.target, held
    assert np.percentile(wide[-250:], 95) > 1.8 * np.percentile(narrow[-250:], 95)  # they did differ


def test_a_mouth_that_barely_opens_widens_by_at_most_target_over_floor():
    g = gains(syllables(0.05))
    assert np.allclose(g, CONFIG.target / CONFIG.floor)


def test_shut_frames_and_silence_do_not_move_the_level():
    talk = syllables(0.8, 250)
    with_silence = np.concatenate([talk, np.zeros(1000, np.float32), talk[:50]])
    g = gains(with_silence)
    assert np.allclose(g[250:1250], g[249])  # a long silence keeps the level the talk set
    assert np.allclose(gains(np.zeros(100, np.float32)), CONFIG.target / CONFIG.floor)


def test_chunks_give_the_same_gains_as_one_call_and_off_is_one():
    x = syllables(0.6, 300)
    assert np.allclose(gains(x, chunk=2), gains(x, chunk=300))
    assert np.all(gains(x, MouthLevelConfig(target=0.0)) == 1.0)


def test_the_state_is_a_fixed_ring():
    level = MouthLevel(CONFIG)
    state = level.new_state()
    for seed in range(20):
        level.gains(syllables(0.6, 500, seed), state)
    assert state.openings.shape == (CONFIG.memory,) and int(state.heard[0]) > CONFIG.memory
