"""The words of the real clips whose sentences are known without listening."""

from __future__ import annotations

GRID_WORDS = [
    {"b": "bin", "l": "lay", "p": "place", "s": "set"},
    {"b": "blue", "g": "green", "r": "red", "w": "white"},
    {"a": "at", "b": "by", "i": "in", "w": "with"},
    None,  # the letter itself
    {"z": "zero", "1": "one", "2": "two", "3": "three", "4": "four", "5": "five", "6": "six", "7": "seven",
     "8": "eight", "9": "nine"},
    {"a": "again", "n": "now", "p": "please", "s": "soon"},
]
CREMA_D = {"DFA": "don't forget a jacket", "IEO": "it's eleven o'clock", "TIE": "that is exactly what happened"}


def known_transcript(name: str, source: str) -> str | None:
    """GRID's names spell their sentence (the last six letters); CREMA-D's name its sentence."""
    if source.startswith("grid"):
        code = name[-6:]
        words = [code[3] if table is None else table.get(ch) for ch, table in zip(code, GRID_WORDS)]
        return " ".join(words) if all(words) else None
    if source == "crema-d":
        return CREMA_D.get(name.split("_")[1])
    return None
