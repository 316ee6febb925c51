"""Utterances with the real voice: when each sentence of a reply is read."""

import asyncio
import time

import pytest

from server.events import EventHub
from server.stream.playout import Playout
from server.stream.speech_queue import SpeechQueue
from server.stream.video_path import RawVideo
from server.voice.utterances import HEAD_START_S, Utterances
from speech.tts import PiperTts

pytestmark = pytest.mark.integration


class Timed:
    """The real voice, noting when each sentence was asked for."""

    def __init__(self, tts: PiperTts):
        self.tts, self.asked = tts, []

    async def synthesize(self, sentence: str, owner: str = ""):
        self.asked.append(time.monotonic())
        return await self.tts.synthesize(sentence, owner)


@pytest.fixture
async def voice():
    tts = PiperTts()
    await tts.start()
    yield Timed(tts)
    await tts.close()


def utterances_for(voice: Timed) -> tuple[Utterances, SpeechQueue]:
    speech = SpeechQueue()
    playout = Playout(RawVideo(lambda slot: None, 64), lambda slot: None, lambda marks, ids: None, 64)
    tasks: set[asyncio.Task] = set()

    def spawn(coro):
        task = asyncio.ensure_future(coro)
        tasks.add(task)
        return task

    return Utterances("s", speech, playout, EventHub("s"), voice, spawn, asyncio.Event(), 4), speech


async def until(done, timeout: float) -> bool:
    """Poll `done()` every 5 ms for at most `timeout` seconds; whether it came true."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


async def first_piece_queued(speech: SpeechQueue) -> float:
    assert await until(lambda: speech.buffered > 0, 30), "the first piece was never synthesized"
    return time.monotonic()


async def test_the_second_sentence_waits_until_the_first_plays(voice):
    """Read beside the first frames' renders, it would slow them (server/voice/utterances.py)."""
    utterances, speech = utterances_for(voice)
    utterances.speak("Here is a reply of about the same length.")
    queued = await first_piece_queued(speech)
    early = await until(lambda: len(voice.asked) > 1, queued + HEAD_START_S * 0.8 - time.monotonic())
    assert not early, "the second piece was read before the first began to play"
    piece = speech.read(1920)
    playing = time.monotonic()
    utterances.on_marks(piece.marks, piece.utterances)  # what the playout reports at its first frame
    assert await until(lambda: len(voice.asked) > 1, 10), "the second piece was never read"
    assert voice.asked[1] >= playing
    utterances.interrupt()


async def test_without_playback_the_second_sentence_is_read_after_the_head_start(voice):
    """No viewer yet (the clock has not started): the reply is still read in full."""
    utterances, speech = utterances_for(voice)
    utterances.speak("Here is a reply of about the same length.")
    queued = await first_piece_queued(speech)
    assert await until(lambda: len(voice.asked) > 1, 10), "the second piece was never read"
    assert voice.asked[1] - queued >= HEAD_START_S * 0.9
    utterances.interrupt()
