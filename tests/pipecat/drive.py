"""A pipecat pipeline whose output is our avatar: run by tests/integration/test_pipecat.py
in the pipecat environment (.venv-pipecat), against a real server and session.

    drive.py URL SESSION_ID SPEECH.raw SCENARIO

SPEECH.raw is PCM16 mono at 24 kHz (what OpenAI's and most pipecat TTS services emit).
`speak`: one TTS response, then the pipeline ends once the avatar has played it.
`interrupt` / `user_started`: a long response, cut after 2 s of playback by an
InterruptionFrame / a UserStartedSpeakingFrame (a user's barge-in).
Prints one JSON line per event the test checks: when the pipeline saw the bot start
and stop speaking (frames that reached its source), and when it interrupted.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndFrame,
    InterruptionFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    UserStartedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.workers.runner import WorkerRunner

from avatar_client.pipecat import AvatarService

RATE = 24_000
CHUNK = RATE // 50 * 2  # 20 ms of PCM16, as pipecat's TTS services chunk it


def say(kind: str) -> None:
    print(json.dumps({"event": kind, "t": time.time()}), flush=True)


async def main(url: str, session_id: str, speech: bytes, scenario: str) -> None:
    worker = PipelineWorker(Pipeline([AvatarService(base_url=url, session_id=session_id)]), enable_rtvi=False)
    worker.set_reached_upstream_filter((BotStartedSpeakingFrame, BotStoppedSpeakingFrame))
    stopped = asyncio.Event()

    @worker.event_handler("on_frame_reached_upstream")
    async def reached(worker: PipelineWorker, frame: object) -> None:
        say("bot_started" if isinstance(frame, BotStartedSpeakingFrame) else "bot_stopped")
        if isinstance(frame, BotStoppedSpeakingFrame):
            stopped.set()

    async def feed() -> None:
        audio = [TTSAudioRawFrame(speech[i:i + CHUNK], RATE, 1) for i in range(0, len(speech), CHUNK)]
        await worker.queue_frames([TTSStartedFrame(), *audio, TTSStoppedFrame()])
        if scenario != "speak":
            await asyncio.sleep(2.0)
            say("interrupt")
            await worker.queue_frame(InterruptionFrame() if scenario == "interrupt" else UserStartedSpeakingFrame())
        await asyncio.wait_for(stopped.wait(), 30)
        await worker.queue_frame(EndFrame())

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), feed())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3]).read_bytes(), sys.argv[4]))
