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
    """The pieces of a finished text (`POST /speak`) exactly as an LLM's reply of the same
    words would be cut: its first clause alone, so the first audio is the shortest it can be."""

    async def words() -> AsyncIterator[str]:
        for word in re.findall(r"\S+\s*", text):
            yield word

    async for piece in sentences_of(words()):
        yield piece


FIRST_CLAUSE = re.compile(r"^(\W*\w+\W+\w+\W+\w+.*?(?:[,;:\u2014]\s|[,;:\u2014.!?]$))")
"""The start of a reply up to its first clause's end (after three words at least), or its
first sentence's end even before the next token shows the space after it."""
ABBREVIATIONS = frozenset({"mr.", "mrs.", "ms.", "dr.", "st.", "vs.", "etc.", "e.g.", "i.e.", "no."})
FIRST_PIECE_WORDS = 6
"""A first clause longer than this is cut: the reply is heard only once its first piece is
read, and piper's time grows with its length (on its one thread, quiet: 93 ms for 4 words,
155 for 7, 258 for 11). The cut costs a phrase break mid-sentence."""
PHRASE_STARTS = frozenset({"and", "but", "or", "so", "because", "that", "which", "who", "when", "where", "while",
                           "if", "to", "about", "of", "in", "on", "for", "with", "from", "as", "than"})
"""Words a phrase begins with: a long first clause is cut before one of them where it can."""
NEEDS_MORE = frozenset("""
a an the and but or nor because if than my your his her our their its to of very um uh er erm hmm
""".split())
"""Words no sentence ends on ("it", "you", "that" do: "check it"); server/voice/turns.py decides on them."""
NO_PIECE_END = NEEDS_MORE | PHRASE_STARTS | {"this", "is", "are", "was", "were", "not"}
"""Nor does a first piece end on these: they lean on the next word."""


async def sentences_of(tokens: AsyncIterator[str]) -> AsyncIterator[str]:
    """Whole sentences out of a token stream, each as soon as it is complete, so speech
    starts while the rest of the reply is still being generated; the first one sooner
    still: its first clause goes alone, and its end does not wait for the next token."""
    buffer, first = "", True
    async for token in tokens:
        buffer += token
        if first and (clause := _first_piece(buffer)):
            yield clause
            buffer, first = buffer[len(clause):].lstrip(), False
            continue
        parts = SENTENCE_END.split(buffer)
        for sentence in parts[:-1]:
            for piece in split_sentences(sentence):
                first = False
                yield piece
        buffer = parts[-1]
    for piece in split_sentences(buffer):
        yield piece


def _first_clause(buffer: str) -> str:
    match = FIRST_CLAUSE.match(buffer)
    if not match:
        return ""
    clause = match.group(1).strip()
    at_end = buffer.rstrip() == buffer
    # "3." may be "3.5" and "1," "1,000", "Dr." a title: those wait for the next token
    if at_end and (not clause[-2].isalpha() or clause.split()[-1].lower() in ABBREVIATIONS):
        return ""
    return clause if re.search(r"\w", clause) else ""


def _first_piece(buffer: str) -> str:
    clause = _first_clause(buffer)
    if clause and len(clause.split()) <= FIRST_PIECE_WORDS:
        return clause
    return _first_phrase(buffer) or clause


def _first_phrase(buffer: str) -> str:
    """The first words of a clause too long to wait for (FIRST_PIECE_WORDS): up to the
    first phrase start after its 4th, 5th, 3rd or 6th word, else its first 5 (4, 6, 3) words;
    either way, not ending on a word that leans on the next ("of", "the", "is")."""
    words = buffer.split()
    if len(words) < FIRST_PIECE_WORDS + 2:  # the word after the cut must be complete
        return ""
    plain = [w.lower().strip("\"'(,") for w in words]
    ends_well = [i for i in (4, 5, 3, 6) if plain[i - 1] not in NO_PIECE_END]
    starts = [i for i in ends_well if plain[i] in PHRASE_STARTS]
    count = starts[0] if starts else next((i for i in (5, 4, 6, 3) if i in ends_well), 5)
    return re.match(rf"(?:\S+\s+){{{count}}}", buffer).group(0).rstrip()  # type: ignore[union-attr]
