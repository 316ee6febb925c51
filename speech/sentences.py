"""Text into speakable sentences: whole texts, and token streams as they arrive (an LLM's reply)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")
MAX_SENTENCE = 240  # characters; a voice reads one sentence per request


def split_sentences(text: str) -> list[str]:
    """Sentences (long ones cut at commas) with something speakable in each."""
    out: list[str] = []
    for sentence in SENTENCE_END.split(text.strip()):
        while len(sentence) > MAX_SENTENCE:
            cut = sentence.rfind(",", 0, MAX_SENTENCE)
            cut = cut if cut > 40 else sentence.rfind(" ", 0, MAX_SENTENCE)
            cut = cut if cut > 0 else MAX_SENTENCE
            out.append(sentence[: cut + 1])
            sentence = sentence[cut + 1 :]
        out.append(sentence)
    return [s.strip() for s in out if re.search(r"\w", s)]


async def split_stream(text: str) -> AsyncIterator[str]:
    """The sentences of a finished text, as a stream like an LLM's."""
    for sentence in split_sentences(text):
        yield sentence


async def sentences_of(tokens: AsyncIterator[str]) -> AsyncIterator[str]:
    """Whole sentences out of a token stream, each as soon as it is complete, so speech
    starts while the rest of the reply is still being generated."""
    buffer = ""
    async for token in tokens:
        buffer += token
        parts = SENTENCE_END.split(buffer)
        for sentence in parts[:-1]:
            for piece in split_sentences(sentence):
                yield piece
        buffer = parts[-1]
    for piece in split_sentences(buffer):
        yield piece
