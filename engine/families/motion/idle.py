"""Procedural idle and listening motion: blinks, breathing, head sway, small brow lifts.

Seeded per session and driven by a random stream that never repeats, so silence does
not look looped. Speech loudness adds small nods and brow lifts. It makes the idle
channels of the motion model's training targets, and the idle life of the interim
fallback; the trained model generates its own at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.config import FPS
from engine.core import motion
from engine.core.module import Module

BLINK_CURVE = np.array([0.45, 0.95, 1.0, 0.7, 0.35, 0.1], np.float32)
AXES = ("head_yaw", "head_pitch", "head_roll", "brow")


@dataclass(frozen=True)
class IdleMotionConfig:
    blink_mean_s: float = 3.6
    """Mean time between blinks (exponential, with a 1.2 s minimum)."""
    sway: tuple[float, ...] = (0.035, 0.02, 0.02, 0.15)
    """Stationary std-dev of yaw, pitch, roll (radians) and brow."""
    sway_time_s: float = 1.6
    """Correlation time of the sway (Ornstein-Uhlenbeck)."""
    breath_s: float = 4.2
    """Mean breathing period."""



@dataclass
class IdleState:
    rng: np.random.Generator
    sway: np.ndarray  # Ornstein-Uhlenbeck head sway, per axis
    phase: np.ndarray  # breathing phase
    blink_in: np.ndarray  # frames to the next blink
    blink_at: np.ndarray  # frame inside the current blink, -1 between blinks
    nod: np.ndarray  # smoothed speech emphasis

class IdleMotionModule(Module):
    """Adds life to any motion track: blinks, breath, sway; see the module docstring."""

    name = "idle_motion"

    def __init__(self, config: IdleMotionConfig = IdleMotionConfig()):
        super().__init__()
        self.config = config
        self._theta = 1.0 / (config.sway_time_s * FPS)
        self._sigma = np.array(config.sway, np.float32) * np.sqrt(2 * self._theta)
        self._axes = [motion.INDEX[a] for a in AXES]

    def initial_state(self, seed: int) -> IdleState:
        rng = np.random.default_rng(seed)
        return IdleState(rng, sway=np.zeros(len(AXES), np.float32), phase=np.array([rng.uniform(0, 2 * np.pi)]),
                         blink_in=np.array([int(rng.uniform(0.5, 2.5) * FPS)]), blink_at=np.array([-1]),
                         nod=np.zeros(1, np.float32))

    def __call__(self, track: np.ndarray, loudness: np.ndarray, state: IdleState) -> np.ndarray:
        """Add idle motion to `track` (frames, DIM) in place; `loudness` is 0..1 per frame."""
        for i in range(len(track)):
            self._sway(track[i], state, float(loudness[i]))
            self._blink(track[i], state)
            state.phase[0] += 2 * np.pi / (self.config.breath_s * FPS) * state.rng.uniform(0.8, 1.2)
            track[i, motion.INDEX["breath"]] = np.sin(state.phase[0])
        return track

    def _sway(self, frame: np.ndarray, state: IdleState, loud: float) -> None:
        sway = state.sway
        sway += -self._theta * sway + self._sigma * state.rng.standard_normal(len(AXES)).astype(np.float32)
        state.nod[0] += 0.25 * (loud - state.nod[0])  # speech emphasis: small nods and brow lifts
        frame[self._axes] += sway
        frame[motion.INDEX["head_pitch"]] += 0.025 * state.nod[0]
        frame[motion.INDEX["brow"]] += 0.25 * state.nod[0]

    def _blink(self, frame: np.ndarray, state: IdleState) -> None:
        if state.blink_at[0] >= 0:
            value = BLINK_CURVE[state.blink_at[0]]
            frame[motion.INDEX["blink_l"]] = frame[motion.INDEX["blink_r"]] = value
            state.blink_at[0] += 1
            if state.blink_at[0] >= len(BLINK_CURVE):
                state.blink_at[0] = -1
            return
        state.blink_in[0] -= 1
        if state.blink_in[0] <= 0:
            state.blink_at[0] = 0
            gap = 1.2 + state.rng.exponential(self.config.blink_mean_s - 1.2)
            state.blink_in[0] = int(gap * FPS)
