"""Mouth shaping: the jaw and the lips' shape a viewer sees, made from the motion model's own.

Four steps, in order, on each chunk the motion stage publishes (its rolling window keeps
the model's own units): the jaw's opening beyond shut lips is scaled by `jaw_gain` and by
its emphasis (emphasis.py: how loud the frame is against this voice's recent loud speech),
held to one size by the mouth level (mouth_level.py: the running peak opening, whatever
the recording), widened or narrowed by the voice's liveliness (liveliness.py: how far its
pitch moves); then the closure gate shuts the lips where the LipClosure detector is sure
of a p/b/m (between `closure_gate`'s two probabilities, linearly). Beside them, the lips'
rounding and width come from the LipShape detector (lip_shape.py) where one is given:
rounded by `lip_shape` times its answer in o/u/w, narrowed in them and spread in ee/i/e.

ShapingState: the window's frame levels, the emphasis envelope, the liveliness pitch ring
and the mouth level's ring of openings; nothing grows with the session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from engine.core import motion
from engine.families.motion.emphasis import SILENT_DB, Emphasis, EmphasisConfig, frame_levels
from engine.families.motion.lip_closure import LipClosure
from engine.families.motion.lip_shape import LipShape
from engine.families.motion.liveliness import Liveliness, LivelinessConfig, LivelinessState
from engine.families.motion.mouth_level import MouthLevel, MouthLevelConfig, MouthLevelState

JAW = motion.INDEX["jaw_open"]
PARTING = [JAW, motion.INDEX["upper_lip"]]
LOWER = motion.INDEX["lower_lip"]
ROUND, WIDTH = motion.INDEX["lip_round"], motion.INDEX["lip_width"]
NARROWING = 0.7  # width given up per unit of rounding: the visemes' own ratio (o/u/w: -0.6 for 0.9)


class ShapingSettings(Protocol):
    """What the shaping reads of the motion stage's SamplerConfig (motion.py documents each)."""

    @property
    def jaw_gain(self) -> float: ...
    @property
    def emphasis(self) -> EmphasisConfig: ...
    @property
    def mouth_level(self) -> MouthLevelConfig: ...
    @property
    def liveliness(self) -> LivelinessConfig: ...
    @property
    def closure_gate(self) -> tuple[float, float]: ...
    @property
    def lip_shape(self) -> float: ...


@dataclass
class ShapingState:
    levels: np.ndarray  # (window,) dBFS of the frames whose audio rows are in the motion window
    envelope: np.ndarray  # (1,) the voice's recent loud level, dB (emphasis.py)
    liveliness: LivelinessState  # its pitch range (liveliness.py)
    mouth_level: MouthLevelState  # the jaw's recent open frames (mouth_level.py)


class MouthShaping:
    """The four steps of the module docstring, for a motion window of `context` frames of
    context before each `chunk`, whose audio rows hear `lookahead` frames ahead."""

    def __init__(self, sampler: ShapingSettings, closure: LipClosure | None, context: int, chunk: int, lookahead: int,
                 lip_shape: LipShape | None = None):
        self.jaw_gain, self.closure, self.gate = sampler.jaw_gain, closure, sampler.closure_gate
        self.lip_shape, self.shape_gain = lip_shape, sampler.lip_shape
        self.emphasis, self.liveliness = Emphasis(sampler.emphasis), Liveliness(sampler.liveliness)
        self.mouth_level = MouthLevel(sampler.mouth_level)
        self.context, self.chunk, self.lookahead, self.high = context, chunk, lookahead, motion.HIGH[JAW]

    def new_state(self, window: int) -> ShapingState:
        return ShapingState(levels=np.full(window, SILENT_DB), envelope=np.full(1, self.emphasis.config.floor_db),
                            liveliness=self.liveliness.new_state(), mouth_level=self.mouth_level.new_state())

    def levels(self, pcm: np.ndarray, frames: int) -> np.ndarray:
        return frame_levels(pcm, frames)

    def follow(self, window_features: np.ndarray, db: np.ndarray,
               state: ShapingState) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """After the motion window took its next chunk: how far to shut each of its frames,
        their emphasis gains (`db`: the chunk's frame levels) and how rounded (+) or spread
        (-) their lips are (None without a LipShape)."""
        shut = self._shut(window_features) if self.closure else np.zeros(self.chunk, np.float32)
        rounding = self.lip_shape.rounding(self._rows(window_features, self.lip_shape.config.rows)) \
            if self.lip_shape else None
        state.levels = np.concatenate([state.levels[self.chunk:], db])
        return shut, self.emphasis.gains(self._own_levels(state.levels), state.envelope), rounding

    def shape(self, coeffs: np.ndarray, shut: np.ndarray, gain: np.ndarray, pcm: np.ndarray,
              state: ShapingState, rounding: np.ndarray | None = None) -> np.ndarray:
        """The published coefficients (changed in place: the caller's copy, not the window)."""
        if rounding is not None:  # the detector's shape in place of the model's own
            coeffs[:, ROUND] = np.clip(self.shape_gain * rounding, 0, motion.HIGH[ROUND])
            coeffs[:, WIDTH] = np.clip(-NARROWING * self.shape_gain * rounding, motion.LOW[WIDTH], motion.HIGH[WIDTH])
        jaw = coeffs[:, JAW]  # opening beyond shut lips is scaled; shut lips stay shut
        scale = self.jaw_gain * gain
        scale = scale * self.mouth_level.gains(np.maximum(jaw - motion.SHUT, 0) * scale, state.mouth_level)
        scale = scale * self.liveliness.gains(pcm, len(coeffs), state.liveliness)
        coeffs[:, JAW] = np.minimum(np.where(jaw > motion.SHUT, motion.SHUT + (jaw - motion.SHUT) * scale, jaw),
                                    self.high)
        open_ = 1 - shut[:, None]  # the lips meet: no opening, raise or drop is left
        coeffs[:, PARTING] *= open_
        coeffs[:, LOWER] = np.where(coeffs[:, LOWER] > 0, coeffs[:, LOWER] * open_[:, 0], coeffs[:, LOWER])
        return coeffs

    def _own_levels(self, levels: np.ndarray) -> np.ndarray:
        """The level of each frame of the window after its context, from its own audio
        (`lookahead` frames back, as the features), averaged with the frames either side."""
        first, end = self.context - self.lookahead - 1, len(levels) - self.lookahead + 1
        db = np.pad(levels[max(first, 0): min(end, len(levels))], (max(-first, 0), max(end - len(levels), 0)),
                    mode="edge")
        return np.convolve(db, np.ones(3) / 3, "valid")

    def _shut(self, feats: np.ndarray) -> np.ndarray:
        """How far to shut each frame of the window after its context (0..1), from LipClosure
        hearing the rows _rows gives it."""
        assert self.closure is not None  # follow() calls this only with a detector
        mel = feats[:, : self.closure.config.audio_dim]  # the detector hears the log-mel columns
        low, high = self.gate
        probability = self.closure.probability(self._rows(mel, self.closure.config.rows))
        return np.clip((probability - low) / (high - low), 0, 1).astype(np.float32)

    def _rows(self, feats: np.ndarray, rows: int) -> np.ndarray:
        """(chunk, rows, columns): for each frame after the window's context, the last `rows`
        rows up to its own (the rows carry the features `lookahead` frames ahead)."""
        return np.stack([feats[i + 1 - rows: i + 1] for i in range(self.context, len(feats))])
