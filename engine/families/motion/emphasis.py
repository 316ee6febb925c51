"""Emphasis: the jaw opens with the voice's stress, against this speaker's own loud speech.

The motion model learnt how far a mouth opens from one clearly articulating speaker, so on
anyone else it opens its stressed and its unstressed syllables alike. Real mouths open
widest on the loud syllables. Each published frame's jaw is therefore scaled by how loud
that frame is against an envelope of the voice's recent loud speech: the envelope jumps to
any louder frame and falls by `decay_db_per_s` otherwise, so it is relative to the
microphone's (or the voice's) own level, needs no look back beyond one number, and adapts
within a syllable to a new speaker.

Measured by the judge (training/motion/judge.py, four held-out speakers from four sources):
correlation with the real mouth at lag 0 0.471 -> 0.483, spread 1.31 -> 1.30 and peaks 1.37
-> 1.37 of the real ones, open vowels unchanged (docs/motion.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.config import FPS, SAMPLES_PER_FRAME

SILENT_DB = -70.0  # digital silence is held here


@dataclass(frozen=True)
class EmphasisConfig:
    weight: float = 0.8
    """Share of the jaw's opening that follows the frame's loudness (0: the model's own jaw)."""
    range_db: float = 25.0
    """A frame this far below the envelope's loud speech gets only the unweighted share."""
    decay_db_per_s: float = 4.0
    """How fast the envelope forgets a loud frame: slow enough to span a sentence's quiet words."""
    headroom_db: float = 8.0
    """The envelope's peaks stand this far above the speech that opens the jaw fully (at 3 dB
    only 78 % of held-out open vowels reached jaw 0.25, at 6 dB 80 %, at 8 dB 81 %: as without)."""
    floor_db: float = -35.0
    """The envelope starts here and never falls below it (dBFS): a room's hiss before the first
    word, or between words, is not loud speech however long the silence."""


def frame_db(pcm: np.ndarray, frames: int) -> np.ndarray:
    """Each video frame's RMS level in dBFS (48 kHz int16)."""
    x = pcm[: frames * SAMPLES_PER_FRAME].astype(np.float32).reshape(frames, -1) / 32768
    return 20 * np.log10(np.sqrt((x**2).mean(1)) + 1e-9)


def frame_levels(pcm: np.ndarray, frames: int) -> np.ndarray:
    """Frame levels as emphasis hears them: the RMS level, not a mel sum, which would weigh a
    hiss like a vowel (its bands are widest where fricatives are loud: measured, the judge's
    correlation gained 0.003 with it against 0.015 with this)."""
    return np.maximum(frame_db(pcm, frames), SILENT_DB)


class Emphasis:
    """Per-frame jaw gains from frame levels; the envelope (one number) is the caller's state."""

    def __init__(self, config: EmphasisConfig = EmphasisConfig()):
        self.config = config
        self.fall = config.decay_db_per_s / FPS

    def gains(self, levels: np.ndarray, envelope: np.ndarray) -> np.ndarray:
        """Gains 1 - weight .. 1 for consecutive frames' levels; `envelope` (1,) is updated in place."""
        c = self.config
        out = np.empty(len(levels), np.float32)
        for i, level in enumerate(levels):
            envelope[0] = max(float(level), envelope[0] - self.fall, c.floor_db)
            rel = (level - envelope[0] + c.headroom_db + c.range_db) / c.range_db
            out[i] = 1 - c.weight + c.weight * min(max(rel, 0.0), 1.0)
        return out
