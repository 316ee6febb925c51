"""Chat mode end to end: a spoken question goes through VAD, Whisper and a local LLM; the answer is spoken."""

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
import pytest_asyncio

from avatar_client import AvatarViewer
from server.voice.vad import VadConfig
from speech.tts import PiperTts
from testkit.audio import decoded, silence, speech_wav
from testkit.fake_llm import FakeLLM
from testkit.server import SHARED_DATA, ServerProcess
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
    viewer = AvatarViewer(server.url, mode="chat", microphone=str(speech_wav("quiet.wav", silence(5))))
    await viewer.connect()
    try:
        ws = await viewer.events()
        first = json.loads((await ws.receive(timeout=10)).data)
        assert first["type"] == "error" and first["code"] == "llm_not_configured"
        assert "AVATAR_LLM_BASE_URL" in first["message"]
        await ws.close()
    finally:
        await viewer.close()


@pytest.mark.parametrize("mode", ["chat", "mirror"])
async def test_a_mode_that_listens_refuses_an_offer_that_sends_no_audio(server, mode):
    """A receive-only audio offer would make a session that never hears anything: refused, saying why."""
    viewer = AvatarViewer(server.url, mode=mode)  # no microphone: its audio transceiver is recvonly
    with pytest.raises(RuntimeError) as refused:
        await viewer.connect()
    assert "400" in str(refused.value) and "no_microphone" in str(refused.value), refused.value
    assert "'tts'" in str(refused.value)
    await viewer.close()


def grid_words(clip: str, first: int, last: int) -> np.ndarray:
    """Words `first`..`last` (1-based) of a GRID s1 recording, 48 kHz, cut at the corpus's
    own word timings (1/25000 s)."""
    path = SHARED_DATA / "real-talking" / "grid-s1" / clip
    words = [line.split() for line in path.with_suffix(".align").read_text().splitlines()]
    lo, hi = (int(int(words[i][j]) / 25000 * 48000) for i, j in ((first, 0), (last, 1)))
    return decoded(path)[lo:hi]


async def answered(url: str, wav: Path) -> tuple[list[dict], list[dict], list[str], list[dict]]:
    """A chat session hearing `wav` until its last answer starts: its answers (speak_started),
    the turns' ends, what the user was heard to say and the answers cut (interrupted)."""
    viewer = AvatarViewer(url, mode="chat", microphone=str(wav))
    await viewer.connect()
    events = await viewer.record_events()
    try:
        await viewer.wait_played(30)  # an answer played to its end: the last one
    finally:
        await viewer.close()
    pick = lambda kind: [e for e in events if e["type"] == kind]  # noqa: E731
    asked = [e["text"].lower() for e in pick("transcript") if e["role"] == "user"]
    return pick("speak_started"), pick("user_speech_ended"), asked, pick("interrupted")


async def test_a_pause_in_the_middle_of_a_sentence_does_not_get_an_answer(chat_server, fake_llm):
    """A real speaker says "bin blue in", stops for 800 ms (a fixed 450 ms hangover answered
    there), then "L two now". Words that are not yet a sentence keep the turn open: one
    answer, to all of it, once he has finished."""
    clip = "bbil2n.mp4"
    wav = speech_wav("mid-sentence-pause.wav", silence(0.5), grid_words(clip, 1, 3), silence(0.8),
                     grid_words(clip, 4, 6), silence(3))
    answers, ends, asked, _ = await answered(chat_server.url, wav)
    assert len(ends) == 1 and len(answers) == 1 and answers[0]["t"] > ends[0]["t"], (ends, answers)
    assert len(asked) == 1 and " in " in asked[0] and "now" in asked[0], f"the words on both sides: {asked}"


async def test_going_on_after_a_whole_sentence_before_the_answer_is_heard_gets_one_answer(chat_server, fake_llm):
    """ "Bin blue in L two now." is a whole sentence, so the turn ends 160 ms into the silence
    after it (when Whisper punctuates it so); the speaker adds "please" 400 ms after it, about
    when the answer's first sound can play (so the VAD hears him go on only after it), too soon
    to be a reply to a word of it. That answer is taken back: cut at once if it began, never
    history; one answer, to everything said, after the last word."""
    wav = speech_wav("went-on.wav", silence(0.5), grid_words("bbil2n.mp4", 1, 6), silence(0.4),
                     grid_words("bbil4p.mp4", 6, 6), silence(3))
    answers, ends, asked, cut = await answered(chat_server.url, wav)
    assert answers[-1]["t"] > ends[-1]["t"], (ends, answers)
    taken_back = {a["utterance_id"] for a in answers[:-1]}
    assert taken_back <= {c["utterance_id"] for c in cut if c["played_ms"] <= 400}, (answers, cut)
    assert "now" in asked[-1] and "please" in asked[-1], f"the last question is all of it: {asked}"
    question = fake_llm.requests[-1]["messages"]
    assert "please" in question[-1]["content"].lower() and "now" in question[-1]["content"].lower(), question
    assert not any("please" not in m["content"].lower() and m["role"] == "user" and "now" in
                   m["content"].lower() for m in question[:-1]), "the taken-back turn stayed in the history"


async def test_a_sentence_whose_last_sound_follows_its_voice_is_not_taken_for_one_cut_off(chat_server, fake_llm):
    """CREMA-D's actor 1001 says "Don't forget to check it!" in fear: the "t" of "it" comes
    after the word's voiced part, and Whisper, given the turn only 40 ms into the silence
    after its last voiced frame, hears a sentence cut off ("Don't forget to check"), which
    waits 1.2 s for more. Recognised at VadConfig.pause_ms (80 ms) it is heard whole, and
    the turn ends as a whole sentence's does."""
    clip = SHARED_DATA / "real-talking" / "crema-d" / "1001_DFA_FEA_XX.flv"
    wav = speech_wav("last-sound.wav", silence(0.5), decoded(clip), silence(3))
    answers, ends, asked, _ = await answered(chat_server.url, wav)
    assert len(ends) == 1 and ends[0]["silence_ms"] < VadConfig().incomplete_hangover_ms, ends
    assert len(answers) == 1 and "forget" in asked[-1], asked
