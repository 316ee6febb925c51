"""Audio-to-motion: the N/I chunk loop of the trained MotionDiT.

Every `chunk` frames of audio the stage runs N(k), conditioned on the last
`window - chunk` final frames (the boundary motion), then I(k-1), which re-generates
the head of N(k) between its two anchors: the last frame of N(k-1) and frame `anchor`
of N(k). Only I(k-1)'s interior is kept (schedule.interior), so a chunk's frames are
final as soon as both are done and the loop adds no latency beyond one chunk.

Each published chunk's jaw is then shaped (mouth_shaping.py: emphasis, mouth level,
liveliness, the closure gate); the window keeps the model's own motion.

RollingState: the window of the last frames' motion and features, the chunk counter,
the noise generator, and the shaping's state; nothing grows with the session.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.core import motion
from engine.core.chunks import ANCHOR, ChunkPlan, i_chunk, interior, n_chunk
from engine.core.stage import AudioFeatures, MotionChunk, Stage
from engine.families.motion.dit import MotionDiT
from engine.families.motion.emphasis import EmphasisConfig
from engine.families.motion.lip_closure import LipClosure
from engine.families.motion.lip_shape import LipShape
from engine.families.motion.liveliness import LivelinessConfig
from engine.families.motion.mouth_level import MouthLevelConfig
from engine.families.motion.sigmas import flow_sigmas
from engine.families.motion.speech_features import silence
from engine.stages.mouth_shaping import MouthShaping, ShapingState


@dataclass(frozen=True)
class SamplerConfig:
    steps: int = 3
    """Euler steps per N chunk."""
    interp_steps: int = 1
    """Euler steps per I chunk: its two anchors pin it down."""
    mouth_temperature: float = 0.0
    """Scale of the starting noise on the mouth channels. The mouth follows the audio, so it is
    sampled from the flow's centre (0: sharper p/b/m closures, measured); blinks, breathing and
    head sway keep the full noise and stay varied."""
    jaw_gain: float = 0.55
    """Scale of the published jaw's opening beyond shut lips (SHUT; the rolling window keeps the
    model's own). The mouth level below holds the peak to its own target, so this sets the
    size only where the model's peak stays under the level's floor. Its calibration on whole
    held-out speakers: docs/motion.md (jaw_gain)."""
    emphasis: EmphasisConfig = EmphasisConfig()
    """How far the jaw follows the voice's stress, on top of jaw_gain."""
    mouth_level: MouthLevelConfig = MouthLevelConfig()
    """Holds the model's running peak opening to one size, whatever the recording."""
    liveliness: LivelinessConfig = LivelinessConfig()
    """How far the voice's pitch range widens or narrows the whole opening, applied last."""
    closure_gate: tuple[float, float] = (0.5, 0.7)
    """LipClosure probabilities between which the published jaw goes from the model's own
    opening to shut (linearly): below the first the detector is ignored, above the second
    the lips meet. Chosen in docs/motion.md (closure_gate)."""
    lip_shape: float = 1.0
    """Lip rounding per unit of the LipShape detector's answer (its width: NARROWING times as
    much the other way), in place of the model's own shape. Chosen on the validation
    speakers: docs/motion.md ("Shape")."""


@dataclass
class MotionState:
    """The rolling window the chunk loop slides: motion and features of its last frames."""

    rng: np.random.Generator
    motion: np.ndarray  # (window, DIM): final frames of context, then the chunk being made
    features: np.ndarray  # (window, audio_dim): their audio rows
    k: np.ndarray  # the next N chunk's index
    shaping: ShapingState  # mouth_shaping.py

class MotionStage(Stage[AudioFeatures, MotionChunk, MotionState]):
    name = "motion"

    def __init__(self, model: MotionDiT, sampler: SamplerConfig = SamplerConfig(), closure: LipClosure | None = None,
                 lip_shape: LipShape | None = None):
        self.model = model
        c = model.config
        self.chunk, self.context = c.chunk, c.window - c.chunk
        if not 1 <= ANCHOR < self.chunk <= self.context:
            raise ValueError("the window must hold a whole chunk after its context, anchor inside the chunk")
        if closure and (closure.config.lookahead != c.lookahead or closure.config.rows > self.context + 1):
            raise ValueError("the closure detector must hear as far ahead as the motion model, inside its window")
        if lip_shape and (lip_shape.config.lookahead != c.lookahead or lip_shape.config.rows > self.context + 1):
            raise ValueError("the lip-shape detector must hear as far ahead as the motion model, inside its window")
        self.sigmas, self.interp_sigmas = flow_sigmas(sampler.steps), flow_sigmas(sampler.interp_steps)
        self.shaping = MouthShaping(sampler, closure, self.context, self.chunk, c.lookahead, lip_shape)
        self.silence = silence(c.audio_dim)
        self.temperature = np.ones(motion.DIM, np.float32)
        self.temperature[motion.MOUTH_INDEX] = sampler.mouth_temperature
        # Every value is held to its range (motion.LOW, motion.HIGH). The window is fed back as
        # the next chunk's context, so a value let out of range is never pulled back: unbounded,
        # the breath channel walked to -7.6 within 20 s of varied speech, and the mouth the model
        # made beside it lost two thirds of its opening (training/video/reenact.py found it).
        self.low, self.high = motion.LOW, motion.HIGH

    def new_state(self, seed: int) -> MotionState:
        window = self.model.config.window
        return MotionState(np.random.default_rng(seed),
                           motion=motion.zeros(window),  # a neutral face ...
                           features=np.tile(self.silence, (window, 1)),  # ... over silence
                           k=np.zeros(1, np.int64), shaping=self.shaping.new_state(window))

    def run(self, data: AudioFeatures, state: MotionState) -> MotionChunk:
        if len(data.features) % self.chunk:
            raise ValueError(f"chunks must hold a multiple of {self.chunk} frames")
        out, shut, gain, rounding = [], [], [], []  # rounding stays empty without a LipShape
        db = self.shaping.levels(data.chunk.pcm, len(data.features))
        for i in range(0, len(data.features), self.chunk):
            out.append(self.step(data.features[i: i + self.chunk], state))
            closing, gains, rounded = self.shaping.follow(state.features, db[i: i + self.chunk], state.shaping)
            shut.append(closing)
            gain.append(gains)
            if rounded is not None:
                rounding.append(rounded)
        coeffs = np.concatenate(out)  # a copy: the window in the state stays in the model's own units
        shape = np.concatenate(rounding) if rounding else None
        coeffs = self.shaping.shape(coeffs, np.concatenate(shut), np.concatenate(gain), data.chunk.pcm, state.shaping,
                                    shape)
        return MotionChunk(data.chunk.first_frame, coeffs)

    def step(self, features: np.ndarray, state: MotionState) -> np.ndarray:
        """One N chunk (and the I chunk before it): the next `chunk` final frames."""
        k = int(state.k[0])
        base = k * self.chunk - self.context  # timeline frame at window position 0
        window = np.concatenate([state.motion[self.chunk:], motion.zeros(self.chunk)])
        feats = np.concatenate([state.features[self.chunk:], features])
        n = n_chunk(k, self.chunk, ANCHOR)
        window = self.sample(window, np.arange(len(window)) < n.start - base, feats, state, self.sigmas)
        if k > 0:
            self.interpolate(window, feats, i_chunk(k - 1, self.chunk, ANCHOR), base, state)
        state.motion, state.features, state.k[0] = window, feats, k + 1
        return window[self.context:]

    def interpolate(self, window: np.ndarray, feats: np.ndarray, plan: ChunkPlan, base: int,
                    state: MotionState) -> None:
        """I chunk: regenerate the span between its anchors; keep only the interior."""
        lo, hi = plan.start - base, plan.start - base + plan.frames
        known = np.ones(len(window), bool)
        known[lo + 1: hi - 1] = False
        filled = self.sample(window, known, feats, state, self.interp_sigmas)
        window[lo + 1: hi - 1] = interior(list(filled[lo:hi]), plan)

    def sample(self, window: np.ndarray, known: np.ndarray, feats: np.ndarray, state: MotionState,
               sigmas: np.ndarray) -> np.ndarray:
        noise = state.rng.standard_normal(window.shape).astype(np.float32) * self.temperature
        out = self.model.sample(window, known, feats, noise, sigmas)
        return np.clip(out, self.low, self.high).astype(np.float32)
