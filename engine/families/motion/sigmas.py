"""Flow-matching sigma schedules, torch-free so the CPU engine can sample without it."""

from __future__ import annotations

import numpy as np


def flow_sigmas(steps: int, shift: float = 1.0) -> np.ndarray:
    """steps + 1 sigmas from 1 (noise) down to exactly 0, float32.

    A shift > 1 spends more steps at high noise: sigma' = shift * sigma / (1 + (shift - 1) * sigma).
    """
    if steps < 1:
        raise ValueError("at least one step")
    if shift <= 0:
        raise ValueError("shift must be positive")
    sigma = np.linspace(1.0, 0.0, steps + 1)
    return (shift * sigma / (1 + (shift - 1) * sigma)).astype(np.float32)
