"""Turn detection on real speech, sentence streaming, and the LLM's SSE client."""

import numpy as np
import pytest

from server.audio_sources.llm import ChatLLM, LlmConfig, LlmError
from server.audio_sources.vad import TurnDetector
from speech.sentences import sentences_of
from testkit.fake_llm import FakeLLM

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def jfk16(jfk_pcm48) -> np.ndarray:
    return jfk_pcm48[::3].copy()


def test_turn_detector_finds_one_turn_in_real_speech(jfk16):
    detector = TurnDetector()
    silence = np.zeros(16000, np.int16)
    events = []
    for part in (silence, jfk16[: 16000 * 3], silence):
        for lo in range(0, len(part), 320):
            events += detector.feed(part[lo : lo + 320])
    turn = [e for e in events if e.kind != "pause"]
    assert [e.kind for e in turn] == ["start", "end"]
    assert 2.5 * 16000 < len(turn[1].audio) < 4.2 * 16000
    pauses = [e for e in events if e.kind == "pause"]
    assert pauses and pauses[-1].voiced == turn[1].voiced  # the last pause heard every word


def test_turn_detector_ignores_silence_and_steady_noise():
    rng = np.random.default_rng(1)
    noise = (rng.standard_normal(16000 * 3) * 30).astype(np.int16)
    assert TurnDetector().feed(np.zeros(16000 * 2, np.int16)) + TurnDetector().feed(noise) == []


async def test_sentences_come_out_as_soon_as_they_end():
    async def tokens():
        for t in ["Hel", "lo there.", " How", " are you", "? I am", " fine"]:
            yield t

    assert [s async for s in sentences_of(tokens())] == ["Hello there.", "How are you?", "I am fine"]


async def test_llm_client_streams_an_openai_compatible_answer():
    fake = FakeLLM("Paris is the capital.")
    await fake.start()
    try:
        llm = ChatLLM(LlmConfig(base_url=fake.url, model="m"))
        text = "".join([t async for t in llm.stream([{"role": "user", "content": "capital?"}])])
        assert text.strip() == "Paris is the capital."
        assert fake.requests[0]["messages"][0]["role"] == "system"
    finally:
        await fake.stop()


async def test_unreachable_llm_is_a_clear_error():
    from testkit.server import free_port

    llm = ChatLLM(LlmConfig(base_url=f"http://127.0.0.1:{free_port()}/v1"))
    with pytest.raises(LlmError, match="could not be reached"):
        async for _ in llm.stream([{"role": "user", "content": "hi"}]):
            pass
