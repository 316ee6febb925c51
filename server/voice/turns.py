"""Whether what a speaker has said so far is a whole sentence: the end-of-turn decision's
evidence besides silence. Whisper punctuates what it hears, and leaves a sentence that
was cut off unpunctuated ("the past few years have been difficult for"); a sentence
that ends on a word that needs a next one ("and", "the", "um") is not finished either.
"""

from __future__ import annotations

import re

from speech.sentences import NEEDS_MORE

ASKED_AFTER = frozenset("at by in on with for from into about like".split())  # end "where from?", not "set blue in."


def is_complete(text: str) -> bool:
    text = text.strip()
    if not text or text.endswith(("...", "\u2026", ",", "-", "\u2014")) or text[-1] not in ".?!":
        return False
    words = re.findall(r"[a-z']+", text.lower())
    if not words or words[-1] in NEEDS_MORE:
        return False
    return text[-1] == "?" or words[-1] not in ASKED_AFTER
