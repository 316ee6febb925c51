"""INTERIM audio-to-motion stage: the hand-set loudness mapping plus procedural idle motion.

Kept to compare against the trained model (training/motion/evaluate.py) and as a fallback
(EngineConfig.motion = "interim").
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.stage import AudioFeatures, MotionChunk, Stage
from engine.families.motion.idle import IdleMotionModule, IdleState
from engine.families.motion.interim import InterimMotionModule, InterimState


@dataclass
class InterimMotionState:
    speech: InterimState
    idle: IdleState

class InterimMotionStage(Stage[AudioFeatures, MotionChunk, InterimMotionState]):
    name = "motion"

    def __init__(self, speech: InterimMotionModule, idle: IdleMotionModule):
        self.speech, self.idle = speech, idle

    def new_state(self, seed: int) -> InterimMotionState:
        return InterimMotionState(self.speech.initial_state(seed), self.idle.initial_state(seed))

    def run(self, data: AudioFeatures, state: InterimMotionState) -> MotionChunk:
        coeffs, loud = self.speech(data.features, state.speech)
        self.idle(coeffs, loud, state.idle)
        return MotionChunk(data.chunk.first_frame, coeffs)
