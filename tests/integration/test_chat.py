"""Chat mode end to end: a spoken question goes through VAD, Whisper and a local LLM; the answer is spoken."""

import asyncio
import json

import numpy as np
import pytest
import pytest_asyncio

from avatar_client import AvatarViewer
from speech.tts import PiperTts
from testkit.audio import silence, speech_wav
from testkit.fake_llm import FakeLLM
from testkit.server import ServerProcess
from tests.integration.test_session import rms

pytestmark = pytest.mark.integration
ANSWER = "The capital of France is Paris. It is famous for the Eiffel Tower."


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fake_llm():
    llm = FakeLLM(ANSWER)
    await llm.start()
    yield llm
    await llm.stop()


@pytest.fixture(scope="module")
def chat_server(fake_llm):
    with ServerProcess(env={"AVATAR_LLM_BASE_URL": fake_llm.url, "AVATAR_LLM_MODEL": "test-model"}) as proc:
        yield proc


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def question_speech() -> np.ndarray:
    tts = PiperTts()
    await tts.start()
    try:
        return await tts.synthesize("What is the capital of France?")
    finally:
        await tts.close()


@pytest.fixture(scope="module")
def question_wav(question_speech):
    """The spoken question, with silence after it so the turn ends."""
    return speech_wav("question.wav", silence(0.5), question_speech, silence(3))


async def test_spoken_question_is_answered_out_loud(chat_server, fake_llm, question_wav):
    viewer = AvatarViewer(chat_server.url, mode="chat", microphone=str(question_wav))
    await viewer.connect()
    events = await viewer.record_events()
    try:
        await viewer.wait_event("user_speech_started", 20)
        await viewer.wait_event("user_speech_ended", 20)
        heard = await viewer.wait_event("transcript", 20)
        assert heard["role"] == "user" and "capital" in heard["text"].lower() and "france" in heard["text"].lower()
        started = await viewer.wait_event("speak_started", 20)
        await viewer.wait_event("speak_ended", 30)
        said = [e for e in events if e["type"] == "transcript" and e["role"] == "avatar"]
        assert said and said[-1]["text"] == ANSWER and said[-1]["utterance_id"] == started["utterance_id"]
        request = fake_llm.requests[-1]
        assert request["stream"] is True and request["model"] == "test-model"
        assert "france" in request["messages"][-1]["content"].lower()
        import time

        shift = time.monotonic() - time.time()
        assert rms(viewer, started["t"] + shift, started["t"] + shift + 2.0) > 300, "the answer was not heard"
    finally:
        await viewer.close()


async def test_user_talking_over_the_avatar_interrupts_it(chat_server, question_speech):
    wav = speech_wav("barge-in.wav", silence(4.0), question_speech, silence(3))
    viewer = AvatarViewer(chat_server.url, mode="chat", microphone=str(wav))
    await viewer.connect()
    events = await viewer.record_events()
    try:
        _, body = await viewer.post("speak", {"text": "Let me tell you a very long story about my travels. " * 4})
        await viewer.wait_event("speak_started", 10)
        barge = await viewer.wait_event("user_speech_started", 15)
        cut = await viewer.wait_event("interrupted", 5)
        assert cut["utterance_id"] == body["utterance_id"] and cut["t"] - barge["t"] < 0.1
        await viewer.wait_event("transcript", 20)
        answers = [e for e in events if e["type"] == "speak_started" and e["utterance_id"] != body["utterance_id"]]
        for _ in range(100):
            if answers:
                break
            await asyncio.sleep(0.1)
            answers = [e for e in events if e["type"] == "speak_started" and e["utterance_id"] != body["utterance_id"]]
        assert answers, "the question after the barge-in was not answered"
    finally:
        await viewer.close()


async def test_chat_without_an_llm_says_so(server):
    viewer = AvatarViewer(server.url, mode="chat")
    await viewer.connect()
    try:
        ws = await viewer.events()
        first = json.loads((await ws.receive(timeout=10)).data)
        assert first["type"] == "error" and first["code"] == "llm_not_configured"
        assert "AVATAR_LLM_BASE_URL" in first["message"]
        await ws.close()
    finally:
        await viewer.close()
