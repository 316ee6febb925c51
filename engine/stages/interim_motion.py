"""INTERIM audio-to-motion stage: the hand-set loudness mapping plus procedural idle motion.

Kept to compare against the trained model (training/motion/evaluate.py) and as a fallback
(EngineConfig.motion = "interim").
"""

from __future__ import annotations

from typing import Any

from engine.core.stage import AudioFeatures, MotionChunk, Stage
from engine.families.motion.idle import IdleMotionModule
from engine.families.motion.interim import InterimMotionModule


class InterimMotionStage(Stage[AudioFeatures, MotionChunk]):
    name = "motion"

    def __init__(self, speech: InterimMotionModule, idle: IdleMotionModule):
        self.speech, self.idle = speech, idle

    def init_state(self, state: dict[str, Any], seed: int) -> None:
        state["speech"] = self.speech.initial_state(seed)
        state["idle"] = self.idle.initial_state(seed)

    def run(self, data: AudioFeatures, state: dict[str, Any]) -> MotionChunk:
        coeffs, loud = self.speech(data.features, state["speech"])
        self.idle(coeffs, loud, state["idle"])
        return MotionChunk(data.chunk.first_frame, coeffs)
