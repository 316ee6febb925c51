"""Pipeline: connects the stages and owns each session's RollingState.

Streaming mode: the server feeds one AudioChunk per request for as long as the
session lives (silence is audio too). Batch mode (engine/batch/runner.py) runs the same
stages over a file, decode spread over processes; both give the same frames for the
same audio and seed (tests/unit/test_motion_model.py).
"""

from __future__ import annotations

from typing import Any

from engine.core.stage import AudioChunk, Stage
from engine.core.state import RollingState


class Pipeline:
    """The one orchestrator of the chunk loop: context -> motion [-> decode] for one avatar,
    used by the engine worker, batch mode and the tests alike. It knows no family: the
    concrete pipelines are put together in engine/assembly.py."""

    def __init__(self, stages: list[Stage]):
        self.stages = stages

    def new_state(self, seed: int) -> RollingState:
        return RollingState(stages={stage.name: stage.new_state(seed) for stage in self.stages})

    def render(self, chunk: AudioChunk, state: RollingState) -> Any:
        """One chunk through every stage: the last stage's output (a FrameChunk with a
        decode stage, a MotionChunk without)."""
        data: Any = chunk  # each stage's output is the next one's input
        for stage in self.stages:
            data = stage.run(data, state.stages[stage.name])
        state.next_frame = chunk.first_frame + chunk.frames
        return data
