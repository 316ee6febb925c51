"""The piper TTS process: sentence streaming and cancellation safety (real voice)."""

import asyncio

import pytest

from server.audio_sources.tts import PiperTts, split_sentences

pytestmark = pytest.mark.integration


def test_sentences_split_for_streaming():
    assert split_sentences("Hi there. How are you? Fine!") == ["Hi there.", "How are you?", "Fine!"]
    assert split_sentences("... !!") == []
    long = "word, " * 100
    assert all(len(s) <= 241 for s in split_sentences(long))


async def test_cancelled_sentence_does_not_leak_into_the_next():
    tts = PiperTts()
    await tts.start()
    try:
        short = await tts.synthesize("Yes.")
        task = asyncio.ensure_future(tts.synthesize("This is a much longer sentence that an interrupt cancels midway."))
        await asyncio.sleep(0.02)
        task.cancel()
        again = await tts.synthesize("Yes.")
        assert abs(len(again) - len(short)) < 0.25 * len(short)  # not the long sentence's audio
        assert len(short) / 48000 < 1.5
    finally:
        await tts.close()
