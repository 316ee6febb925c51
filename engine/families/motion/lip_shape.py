"""LipShape: how rounded (o, u, w) or spread (ee, i, e) the lips are, frame by frame (numpy).

The MotionDiT learned the shape of real lips from GRID's one speaker, who barely rounds
them (his mouth is 0.98 as wide in o/u/w as in ee/i/e; other people 0.94), and on other
voices its width and rounding do not follow the sounds: scaled up, its shape channels made
rounded sounds read wider, not narrower (docs/motion.md, "Shape"). Which sound is being
made is what the speech encoder's rows carry across voices: a linear map from them, trained
on GRID s1's force-aligned phones alone, tells a rounded sound from a spread one in other
people's speech with an AUC of 0.93 (eight validation speakers).

This is that map: the encoder's rows of the frames around the one it judges (`context`
before, `lookahead` after: rows the motion stage already holds), each standardised, times
one weight vector. Its answer is near +1 in a rounded sound, -1 in a spread one, 0 between;
the motion stage turns it into lip rounding and width (mouth_shaping.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.core.module import Module, saved_config
from engine.families.motion.mel_features import DIM as MEL_DIM
from engine.families.motion.speech_features import ENCODER_DIM
from engine.package_files import package_path

WEIGHTS = package_path("engine", "weights", "lip_shape.safetensors")


@dataclass(frozen=True)
class LipShapeConfig:
    context: int = 6
    """Feature rows before the judged frame."""
    lookahead: int = 2
    """Rows after it: the MotionDiT's own lookahead, so the detector adds no latency."""
    first_column: int = MEL_DIM
    """Where the encoder's columns start in a feature row (log-mel comes first: the voice
    and the room more than the sound)."""
    columns: int = ENCODER_DIM

    @property
    def rows(self) -> int:
        return self.context + 1 + self.lookahead


class LipShape(Module):
    """`rounding(rows)`: (N, rows, feature columns) speech-feature rows -> (N,), + rounded, - spread."""

    name = "lip_shape"

    def __init__(self, checkpoint: Path = WEIGHTS):
        super().__init__(checkpoint)
        self.config = saved_config(checkpoint, LipShapeConfig)
        self.prepare()

    def prepare(self) -> None:
        """The standardisation folded into the weights: one dot product per frame."""
        p = self.params
        self.weight = (p["weight"] / p["std"]).reshape(self.config.rows, self.config.columns).astype(np.float32)
        self.bias = float(np.ravel(p["bias"])[0] - (p["mean"] / p["std"]) @ p["weight"])

    def rounding(self, rows: np.ndarray) -> np.ndarray:
        c = self.config
        x = np.asarray(rows, np.float32)[..., c.first_column: c.first_column + c.columns]
        return np.einsum("nrc,rc->n", x, self.weight) + self.bias
