"""Turn detection on real speech, sentence streaming, and the LLM's SSE client."""

import numpy as np
import pytest

from server.voice.llm import ChatLLM, LlmConfig, LlmError
from server.voice.vad import TurnDetector
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
    assert 80 <= turn[0].onset_ms <= 120  # the onset: 4 voiced frames of the last 6, counted from the first
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


async def test_a_replys_first_clause_is_spoken_alone_and_at_once():
    """The first piece goes as soon as its clause ends; later ones are whole sentences."""
    said: list[tuple[str, int]] = []

    async def tokens(parts):
        for i, t in enumerate(parts):
            said.append(("token", i))
            yield t

    async def pieces(parts):
        said.clear()
        return [(s, len(said)) async for s in sentences_of(tokens(parts))]

    assert await pieces(["Well", " of", " course,", " Paris", " is", " the", " capital", ", I", " think."]) == [
        ("Well of course,", 3), ("Paris is the capital, I think.", 9)]
    assert await pieces(["The", " capital", " is", " Paris", ".", " It", " is", " big."]) == [
        ("The capital is Paris.", 5), ("It is big.", 8)], "the first sentence's end did not wait for ' It'"
    assert await pieces(["It", " costs", " 3", ".", "5", " euros."]) == [("It costs 3.5 euros.", 6)]
    assert await pieces(["Please", " ask", " Dr", ".", " Who."]) == [("Please ask Dr. Who.", 5)]
    assert await pieces(["Yes,", " sure."]) == [("Yes, sure.", 2)], "a clause of one word waits for more"


async def test_a_long_first_clause_is_cut_before_a_phrase_so_it_is_read_sooner():
    long = "I think the most important thing to remember about the capital of France is how old it is."
    words = [w + " " for w in long.split()]
    assert [s async for s in sentences_of(_stream(words))] == [
        "I think the most important thing", "to remember about the capital of France is how old it is."]
    no_phrase = "Seven large grey elephants slowly walked home yesterday evening together."
    assert [s async for s in sentences_of(_stream([no_phrase]))] == [
        "Seven large grey elephants slowly", "walked home yesterday evening together."]
    dangling = "Here is a reply of about the same length as the one before it."
    assert [s async for s in sentences_of(_stream([dangling]))][0] == "Here is a reply", "not on 'of' or 'about'"
    eight = "The capital of France is very old indeed, I think."
    assert [s async for s in sentences_of(_stream([eight]))][0] == "The capital of France", "not on 'is' or 'very'"
    six = "The capital is very old indeed, I think."
    assert [s async for s in sentences_of(_stream([six]))][0] == "The capital is very old indeed,"


async def _stream(tokens):
    for token in tokens:
        yield token


async def test_llm_client_streams_an_openai_compatible_answer():
    fake = FakeLLM("Paris is the capital.")
    await fake.start()
    try:
        llm = ChatLLM(LlmConfig(base_url=fake.url, model="m"))
        for _ in range(2):
            text = "".join([t async for t in llm.stream([{"role": "user", "content": "capital?"}])])
            assert text.strip() == "Paris is the capital."
        assert fake.requests[0]["messages"][0]["role"] == "system"
        assert fake.peers[0] == fake.peers[1], "the second turn opened a new connection"
        await llm.close()
    finally:
        await fake.stop()


async def test_unreachable_llm_is_a_clear_error():
    from testkit.server import free_port

    llm = ChatLLM(LlmConfig(base_url=f"http://127.0.0.1:{free_port()}/v1"))
    with pytest.raises(LlmError, match="could not be reached"):
        async for _ in llm.stream([{"role": "user", "content": "hi"}]):
            pass


@pytest.mark.parametrize("text,complete", [
    ("What is the capital of France?", True),
    ("Don't forget a jacket.", True),
    ("Don't forget to check it.", True),
    ("Where are you from?", True),
    ("Set blue in.", False),
    ("We all know the past few years have been difficult for", False),  # Whisper on a cut sentence
    ("And so my fellow Americans,", False),
    ("I was thinking about the...", False),
    ("Tell me about the.", False),
    ("So, um.", False),
    ("", False),
])
def test_a_turn_is_complete_only_when_its_words_are_a_whole_sentence(text, complete):
    from server.voice.turns import is_complete

    assert is_complete(text) is complete


async def test_a_spoken_texts_pieces_are_those_of_the_same_reply_streamed():
    from speech.sentences import split_stream

    text = "Well of course, Paris is the capital, I think. It is big. " + "Very, " * 60 + "long."
    streamed = [s async for s in split_stream(text)]
    assert streamed[:3] == ["Well of course,", "Paris is the capital, I think.", "It is big."]
    assert all(len(s) <= 241 for s in streamed) and "".join(streamed[3:]).count("Very") == 60
    assert [s async for s in split_stream("Here is a reply of about the same length.")] == [
        "Here is a reply", "of about the same length."]
