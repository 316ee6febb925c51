"""Where turns end on real speech; prints JSON, beside a fixed-hangover VAD on the same audio.

Every real recording with speech here (GRID's other speakers, CREMA-D's actor 1001, the
weekly address's sentences, JFK, the public-domain addresses) is played into a chat session
of a real server by an aiortc microphone, with a local test LLM answering. Each
`user_speech_ended` says how long after the last voiced frame the turn ended
(`silence_ms`); where that frame lies in the recording is read on the client's clock. A
turn end that the speaker went on after (a turn of the VAD alone, below, ends more than
WENT_ON_S later in the recording: speech, where one voiced frame may be a click) ended a
single-sentence recording inside its sentence; in the three addresses, which hold several
sentences each, it may also be a pause between two of them. Three weekly-address clips
stop mid-sentence: their last turn should wait the 1.2 s for more.

The baseline is the TurnDetector alone (no words: every turn ends at its 450 ms hangover),
run on the same recordings here, with the same counting.

    .venv/bin/python bench/turns.py [--limit N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from conversation import LEAD_S, TAIL_S, Watch, pcm16k, played, real_utterances  # noqa: E402

from server.voice.vad import FRAME, RATE, TurnDetector  # noqa: E402
from testkit.fake_llm import FakeLLM  # noqa: E402
from testkit.server import SHARED_DATA, ServerProcess  # noqa: E402

WENT_ON_S = 0.3  # voice this long after a turn's end means the speaker went on
ADDRESSES = "public-domain-addresses"


@dataclass
class TurnEnd:
    at_s: float  # where the speech it ends stopped, in the recording (s)
    silence_ms: int


def recordings() -> tuple[list[Path], set[str]]:
    """bench/conversation.py's 21 utterances, then the longer ones (same lead and tail); and
    the names of those that hold several sentences (the addresses)."""
    addresses = sorted((SHARED_DATA / "real-talking" / ADDRESSES).glob("*.mp4"))
    wavs = real_utterances(21)
    for source in [SHARED_DATA / "jfk.flac", *addresses]:
        wavs.append(played(source))
    return wavs, {f"bench-{p.stem}" for p in addresses}


def fixed_hangover(wav: Path) -> list[TurnEnd]:
    """The turn ends of the VAD alone: each at its usual hangover after the last voiced frame."""
    detector, ends, pcm = TurnDetector(), [], pcm16k(wav)
    for i in range(0, len(pcm) - FRAME + 1, FRAME):
        for event in detector.feed(pcm[i : i + FRAME]):
            if event.kind == "end":
                ends.append(TurnEnd((i + FRAME) / RATE - event.silence_ms / 1000, event.silence_ms))
    return ends


async def served(url: str, wav: Path) -> list[TurnEnd]:
    """The turn ends of a chat session hearing the recording to its end."""
    async with Watch(url, mode="chat", microphone=str(wav)) as w:
        mic = w.viewer.mic
        assert mic is not None
        seconds = len(pcm16k(wav)) / RATE
        while mic.started is None or time.time() < mic.started + seconds + 1.5:
            await asyncio.sleep(0.2)
        assert mic.started is not None
        return [TurnEnd(e["t"] - e["silence_ms"] / 1000 - mic.started, e["silence_ms"])
                for e in w.viewer.seen if e["type"] == "user_speech_ended"]


def summary(per: dict[str, list[TurnEnd]], last_voice: dict[str, float], several: set[str]) -> dict:
    """`several`: the recordings that hold several sentences."""
    every = [e.silence_ms for ends in per.values() for e in ends]
    went_on = {k: [round(e.at_s - LEAD_S, 2) for e in v if e.at_s < last_voice[k] - WENT_ON_S] for k, v in per.items()}
    return {"turn_ends": len(every), "silence_ms_median": statistics.median(every) if every else None,
            "silence_ms_percentiles_10_50_90": [int(np.percentile(every, q)) for q in (10, 50, 90)] if every else [],
            "silence_ms_counts": {str(v): every.count(v) for v in sorted(set(every))},
            "single_sentence_recordings_ended_inside_it": {k: v for k, v in went_on.items() if v and k not in several},
            "addresses_turn_ends_gone_on_after": {k: v for k, v in went_on.items() if k in several}}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None, help="only the first N recordings (a quick run)")
    args = parser.parse_args()
    wavs, several = recordings()
    wavs = wavs[: args.limit]
    llm = FakeLLM("Yes.")
    await llm.start()
    try:
        with ServerProcess(env={"AVATAR_LLM_BASE_URL": llm.url, "AVATAR_LLM_MODEL": "bench"}) as proc:
            ours = {w.stem: await served(proc.url, w) for w in wavs}
    finally:
        await llm.stop()
    vad = {w.stem: fixed_hangover(w) for w in wavs}
    last_voice = {k: max((e.at_s for e in v), default=0.0) for k, v in vad.items()}  # speech, not a click
    print(json.dumps({
        "recordings": len(wavs), "speech_s": round(sum(len(pcm16k(w)) / RATE - LEAD_S - TAIL_S for w in wavs), 1),
        "ours": summary(ours, last_voice, several),
        "baseline_vad_hangover_alone": summary(vad, last_voice, several),
        "turn_ends_s": {k: [(round(e.at_s - LEAD_S, 2), e.silence_ms) for e in v] for k, v in ours.items()},
    }, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
