"""Stage: a typed step of the Pipeline, coordinating one or more Modules.

Each stage declares its input and output dataclass; `run` is a pure function of
the input and the stage's slice of the RollingState, and data flows one way, from each
stage's output to the next stage's input.

One exception, part of the contract: stages that form a loop within a session may share
one state object in place of a slice each. The latent family does (its Pipeline's
`new_state`): its A2V stage conditions each chunk on the last frames its decode stage made
of the one before, and needs that chunk decoded to the end before it samples the next, so
it asks the decode stage to finish. Nothing outside the family sees that state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

In = TypeVar("In")
Out = TypeVar("Out")
S = TypeVar("S")  # the stage's slice of a session's RollingState: a small dataclass of arrays


@dataclass
class AudioChunk:
    """Audio for `frames` video frames, 48 kHz mono int16, starting at frame `first_frame`."""

    first_frame: int
    frames: int
    pcm: np.ndarray


class FeatureModule(Protocol):
    """Per-frame rows from 48 kHz PCM, with a small per-session state (the audio it still needs)."""

    def initial_state(self, seed: int) -> Any: ...

    def __call__(self, pcm48: np.ndarray, frames: int, state: Any) -> np.ndarray: ...


@dataclass
class AudioFeatures:
    """Per-frame audio features (frames, F) plus the chunk they came from."""

    chunk: AudioChunk
    features: np.ndarray


@dataclass
class MotionChunk:
    """Per-frame motion coefficients (frames, motion.DIM)."""

    first_frame: int
    coeffs: np.ndarray


@dataclass
class FrameChunk:
    """Rendered frames, I420 planar (frames, size * 3 // 2, size) uint8, and their motion."""

    first_frame: int
    frames: np.ndarray
    coeffs: np.ndarray


class Stage(Generic[In, Out, S]):
    """One step of the chunk loop."""

    name = "stage"

    def new_state(self, seed: int) -> S:
        """This stage's slice of a new session's RollingState."""
        raise NotImplementedError

    def run(self, data: In, state: S) -> Out:
        raise NotImplementedError
