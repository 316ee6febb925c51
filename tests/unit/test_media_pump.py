"""MediaPump: speech that starts after idle frames is heard after one of them, in sync.

The engine here hands out frame numbers as slots (frame k of the session is slot k): what
the pump does with them is under test, not the rendering (the integration tests render).
"""

import asyncio

import numpy as np
import pytest

from engine.config import SAMPLES_PER_FRAME
from server.engines.client import FrameFormat, RenderedChunk
from server.stream.media_pump import MediaPump
from server.stream.playout import Playout
from server.stream.speech_queue import SpeechQueue
from server.stream.video_path import video_path

pytestmark = pytest.mark.unit
CHUNK, LEAD, DELAY, SIZE = 2, 4, 2, 16


class NumberedFrames:
    """A RenderSession whose slot for frame k is k, the motion of moment k - DELAY."""

    def __init__(self, frame_format: FrameFormat = "i420"):
        self.frame_format = frame_format
        self.released: list[int] = []
        self.requests: list[int] = []  # frames asked for, per render
        self.shown: list[int] = []  # slots played, in order

    def frame(self, slot: int) -> np.ndarray | bytes:
        self.shown.append(slot)
        return b"" if self.frame_format == "h264" else np.zeros((SIZE * 3 // 2, SIZE), np.uint8)

    def want_keyframe(self) -> None:
        pass

    async def wait_open(self) -> None:
        pass

    async def render(self, chunk_id: int, first_frame: int, pcm: np.ndarray, frames: int) -> RenderedChunk:
        self.requests.append(frames)
        return RenderedChunk(chunk_id, list(range(first_frame, first_frame + frames)))

    def release(self, slot: int) -> None:
        self.released.append(slot)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def play_speech(engine: NumberedFrames, utterances: int, ticks: int = 12,
                      length: int = 3) -> tuple[list[tuple[int, int]], list[int]]:
    """Idle frames up to the lead, then `utterances` of `length` frames each, back to back:
    the (slot, audio value) of each tick played, and the slots released."""
    speech = SpeechQueue()
    playout = Playout(video_path(engine, SIZE), engine.release, lambda marks, utts: None, SIZE)  # type: ignore[arg-type]
    closed = asyncio.Event()
    pump = MediaPump(engine, speech, playout, closed, CHUNK, LEAD, DELAY, echo=True)  # type: ignore[arg-type]
    task = asyncio.ensure_future(pump.run(lambda code, text: None))
    await settle()
    assert playout.buffered == LEAD
    for n in range(utterances):
        await speech.push(f"u{n}", np.full(length * SAMPLES_PER_FRAME, n + 1, np.int16))
        speech.finish(f"u{n}")
    await settle()
    heard = []
    for tick in range(ticks):
        heard.append(int(playout.audio(tick, 0)[0]))
        await settle()
    task.cancel()
    await task
    assert playout.stats.held == 0
    return list(zip(engine.shown, heard)), engine.released


async def test_speech_after_idle_frames_follows_one_of_them_in_sync():
    played, released = await play_speech(NumberedFrames(), utterances=1)
    # frames 0-3 were idle; 1-3 went to make room, then the speech chunk's first two
    # frames (4-5, the moments before it, with their silence) went too: frame 6 shows
    # moment 4, when the speech began in the audio the engine was given
    assert played[:5] == [(0, 0), (6, 1), (7, 1), (8, 1), (9, 0)]
    assert {1, 2, 3, 4, 5} <= set(released) and not {6, 7, 8} & set(released[:5])


async def test_back_to_back_speech_loses_no_frame_and_no_sound():
    played, _ = await play_speech(NumberedFrames(), utterances=2)
    assert [value for _, value in played if value] == [1, 1, 1, 2, 2, 2]
    slots = [slot for slot, _ in played]
    assert slots[:1] == [0] and slots[1:] == list(range(6, 6 + len(slots) - 1))


async def test_h264_made_by_the_engine_keeps_its_lookahead_frames():
    """Its units depend on the ones before: the lookahead frames (rendered with the onset's
    chunk) are played, not dropped."""
    played, _ = await play_speech(NumberedFrames("h264"), utterances=1)
    assert played[:5] == [(0, 0), (4, 0), (5, 0), (6, 1), (7, 1)]


async def test_the_dropped_lookahead_rides_along_with_the_first_speech_chunk():
    """One render request at the onset, not two: on a busy worker each waits behind the
    other sessions' chunks. The frames played are those of two requests."""
    engine = NumberedFrames()
    played, released = await play_speech(engine, utterances=1, length=6)
    assert played[:8] == [(0, 0), (6, 1), (7, 1), (8, 1), (9, 1), (10, 1), (11, 1), (12, 0)]
    assert {1, 2, 3, 4, 5} <= set(released)
    onset = engine.requests.index(CHUNK + DELAY)
    assert engine.requests[:onset] == [CHUNK] * (LEAD // CHUNK)  # the idle lead, then the onset
    assert engine.requests[onset + 1 :] == [CHUNK] * (len(engine.requests) - onset - 1)
