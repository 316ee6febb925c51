"""Benchmark conversation latencies; prints JSON, each figure beside a baseline from the same run.

- agent first chunk -> speak_started (server clock), beside a WebSocket round trip on the
  same server (the transport floor);
- interrupt -> silence heard at a real aiortc client, beside speech onset -> sound heard
  (the same delivery path, the other way round);
- chat: end of user speech -> first avatar audio at the client, minus the LLM's own time
  (a local test LLM; its time to first token is measured and subtracted), beside
  POST /speak -> first audio (the reply path without turn detection and recognition).
  The user is real: 21 recorded utterances of 12 people (GRID's ten other speakers,
  CREMA-D's actor 1001 in six moods and five sentences of a read weekly address,
  ../shared/data/real-talking), each played into its own chat session by an aiortc
  microphone. The end of speech is the last voiced frame of the turn that the answer
  played to its end answers: the server's `user_speech_ended` says how long after it the
  turn was ended. That is the server's view, after the network and its receiver; the
  `client` figures start where an outside measurement does, when the recording's last
  voiced 20 ms (by the server's own VAD settings) left the client's microphone. Also
  reported: the first turn of the fresh server on its own, medians per source, and some of
  the utterances again while `--others` sessions speak on the same server, each with its
  own viewer. `--held-out N` (default 10, 0: none) also plays N recordings of GRID's
  speaker s1, whom no setting of the turn detector was chosen on (its thresholds came from
  the 21 above and the longer recordings of bench/turns.py).

    .venv/bin/python bench/conversation.py [--runs 3] [--utterances 21] [--others 3] [--loaded 8] [--held-out 10]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from avatar_client import AgentClient, AvatarViewer  # noqa: E402
from server.voice.vad import RATE  # noqa: E402
from testkit.audio import decoded, silence, speech_wav  # noqa: E402
from testkit.fake_llm import FakeLLM  # noqa: E402
from testkit.server import ServerProcess  # noqa: E402

LOUD = 300  # RMS of a 20 ms client audio frame that counts as sound
LEAD_S, TAIL_S = 1.0, 4.0  # silence around each recording as the benches play it


class Watch:
    """A viewer plus its event stream, with helpers to find moments on one clock (time.time)."""

    def __init__(self, url: str, **kwargs):
        self.viewer = AvatarViewer(url, **kwargs)

    async def __aenter__(self) -> Watch:
        await self.viewer.connect()
        await self.viewer.record_events()
        await self.viewer.wait_frames(25)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.viewer.close()

    async def event(self, kind: str, after: float = 0.0, timeout: float = 30.0) -> dict:
        return await self.viewer.wait_event(kind, timeout, after)

    def audio_times(self, after: float = 0.0) -> Iterator[tuple[float, float]]:
        """(arrival on the time.time clock, rms) for each audio frame received after `after`,
        its level computed only when asked for (sound_after polls while the server works)."""
        shift = time.time() - time.monotonic()
        for t, pcm in list(self.viewer.received.audio):
            if t + shift >= after:
                yield t + shift, float(np.sqrt(np.mean(pcm.astype(np.float64) ** 2)))

    def first_sound_after(self, t0: float) -> float | None:
        return next((t for t, level in self.audio_times(t0) if level > LOUD), None)

    async def sound_after(self, t0: float, timeout: float = 10.0) -> float:
        """When the first sound after t0 arrived, waiting for it: under load it can take seconds."""
        deadline = time.time() + timeout
        while (heard := self.first_sound_after(t0)) is None:
            if time.time() > deadline:
                raise TimeoutError(f"no sound within {timeout:.0f} s")
            await asyncio.sleep(0.05)
        return heard

    def silent_for_good_after(self, t0: float) -> float | None:
        """When the audio went quiet and stayed quiet (speech has pauses of its own)."""
        frames = list(self.audio_times(t0))
        loud = [t for t, level in frames if level > LOUD]
        if not frames:
            return None
        return (loud[-1] + 0.02) if loud else frames[0][0]


async def agent_start(url: str, pcm16: np.ndarray) -> tuple[float, float, float, float]:
    """(first chunk -> speak_started ms, ws round trip ms, interrupt -> silence ms, onset -> sound ms)."""
    async with Watch(url) as w:
        agent = AgentClient(url, w.viewer.session_id)
        voice = await agent.open_audio(16000)
        first = time.time()
        for lo in range(0, 16000 * 4, 640):  # 4 s, pushed a little faster than real time
            await voice.push(pcm16[lo : lo + 640])
            await asyncio.sleep(0.03)
        started = await w.event("speak_started", after=first)
        t0 = time.time()
        await voice.ws.send_str("?")
        await voice.ws.receive_json()  # the socket's error reply to a bad message
        rtt = (time.time() - t0) * 1000
        await asyncio.sleep(1.0)
        cut = time.time()
        await voice.interrupt()
        await asyncio.sleep(1.5)
        quiet = w.silent_for_good_after(cut)
        heard = w.first_sound_after(started["t"])
        await voice.close()
        await agent.close()
        return ((started["t"] - first) * 1000, rtt, (quiet - cut) * 1000 if quiet else float("nan"),
                (heard - started["t"]) * 1000 if heard else float("nan"))


async def chat_reply(url: str, wav: Path, llm: FakeLLM) -> tuple[float, ...]:
    """(end of user speech -> first avatar audio minus LLM time; POST /speak -> first audio;
    silence before the turn ended; recognition; reply start -> speak_started; speak_started
    -> heard; turn ends that came too soon; the first figure from the client's end of speech;
    the client's end of speech -> the server's), ms and a count. The end of speech is that of
    the turn the answer that played to its end answers: a turn ended too soon (a pause
    mid-sentence) is taken back, counted apart, and not the start of the wait."""
    async with Watch(url, mode="chat", microphone=str(wav)) as w:
        done = await w.viewer.wait_played()
        seen = list(w.viewer.seen)
        started = next(e for e in seen if e["type"] == "speak_started" and e["utterance_id"] == done["utterance_id"])
        ends = [e for e in seen if e["type"] == "user_speech_ended" and e["t"] < started["t"]]
        ended = ends[-1]
        heard_text = next(e for e in seen if e["type"] == "transcript" and e["role"] == "user" and e["t"] >= ended["t"])
        heard = w.first_sound_after(started["t"] - 0.1)  # the viewer's clock may be a little ahead
        assert heard is not None, f"{wav.stem}: the answer was never heard"
        end_of_speech = ended["t"] - ended["silence_ms"] / 1000
        chat_ms = (heard - end_of_speech) * 1000 - llm.last_first_token_ms
        assert w.viewer.mic is not None and w.viewer.mic.started is not None
        sent = w.viewer.mic.started + last_voiced_s(wav)  # the last voiced sound left the client
        t0 = time.time()
        await w.viewer.post("speak", {"text": "Here is a reply of about the same length."})
        speak_ms = (await w.sound_after(t0) - t0) * 1000
        return (chat_ms, speak_ms, ended["silence_ms"], (heard_text["t"] - ended["t"]) * 1000,
                (started["t"] - heard_text["t"]) * 1000 - llm.last_first_token_ms, (heard - started["t"]) * 1000,
                len(ends) - 1, (heard - sent) * 1000 - llm.last_first_token_ms, (end_of_speech - sent) * 1000)


@functools.cache  # read once: the loaded figure plays some recordings again, bench/turns.py each thrice
def pcm16k(wav: Path) -> np.ndarray:
    """A WAV file as the server's VAD hears it: 16 kHz int16."""
    from scipy.io import wavfile
    from scipy.signal import resample_poly

    rate, pcm = wavfile.read(wav)
    return resample_poly(pcm.astype(np.float32), RATE, rate).clip(-32768, 32767).astype(np.int16)


@functools.cache
def last_voiced_s(wav: Path) -> float:
    """When the recording's last voiced 20 ms frame ends, by the server's own VAD."""
    from server.voice.vad import FRAME, RATE, TurnDetector

    detector, pcm16 = TurnDetector(), pcm16k(wav)
    frames = pcm16[: len(pcm16) // FRAME * FRAME].reshape(-1, FRAME)
    voiced = [i for i, frame in enumerate(frames) if detector.is_voiced(frame)]
    return (voiced[-1] + 1) * FRAME / RATE if voiced else 0.0


OTHERS_SAY = ("Good morning. This is one of the other sessions on this server, talking all the time "
              "so that the conversation being measured shares the machine with it.")


async def keep_talking(url: str) -> None:
    """Another session with its own viewer, speaking without a break until cancelled."""
    async with Watch(url) as w:
        while True:
            asked = time.time()
            await w.viewer.post("speak", {"text": OTHERS_SAY})
            await w.viewer.wait_played(60, after=asked)


async def with_others_speaking(url: str, others: int, wavs: list[Path], llm: FakeLLM) -> list[tuple[float, ...]]:
    """chat_reply on each of `wavs` while `others` more sessions speak on the same server."""
    talkers = [asyncio.ensure_future(keep_talking(url)) for _ in range(others)]
    try:
        await asyncio.sleep(5.0)  # all of them connected and speaking
        return [await chat_reply(url, wav, llm) for wav in wavs]
    finally:
        for talker in talkers:
            talker.cancel()
        await asyncio.gather(*talkers, return_exceptions=True)


def real_utterances(count: int) -> list[Path]:
    """Recorded people, one utterance each, as 48 kHz WAVs with a second of silence before:
    GRID's other speakers, CREMA-D's actor in six moods, sentences of a read weekly address."""
    from testkit.server import SHARED_DATA

    real = SHARED_DATA / "real-talking"
    sources = sorted((real / "grid-samples").iterdir()) + sorted((real / "crema-d").glob("*.flv")) \
        + sorted((real / "obama-weekly-address").glob("*.mp4"))
    return [played(source) for source in sources[:count]]


def held_out_utterances(count: int) -> list[Path]:
    """A speaker the turn detector was not tuned on: GRID s1's recordings, evenly spread
    over the ones here, as real_utterances plays them."""
    from testkit.server import SHARED_DATA

    clips = sorted((SHARED_DATA / "real-talking" / "grid-s1").glob("*.mp4"))
    picked = clips[:: max(1, len(clips) // count)][:count] if count else []
    return [played(clip, "bench-s1-") for clip in picked]


def played(source: Path, prefix: str = "bench-") -> Path:
    """A recording as a 48 kHz WAV with LEAD_S of silence before it and TAIL_S after."""
    return speech_wav(f"{prefix}{source.stem}.wav", silence(LEAD_S), decoded(source), silence(TAIL_S))


def by_source(utterances: list[Path], values: tuple[float, ...]) -> dict[str, float]:
    """Medians per recording source (GRID, CREMA-D, the address), told apart by file name."""
    groups: dict[str, list[float]] = {}
    for wav, value in zip(utterances, values):
        source = "crema-d" if wav.stem.startswith("bench-1001") else "address" if "sentence" in wav.stem else "grid"
        groups.setdefault(source, []).append(value)
    return {source: median(group) for source, group in groups.items()}


def breakdown(c: list[tuple[float, ...]]) -> dict[str, float]:
    """Medians of chat_reply's steps, over its results transposed."""
    return {"silence_before_turn_ended": median(c[2]), "recognition_after_it": median(c[3]),
            "transcript_to_speak_started_excl_llm": median(c[4]), "speak_started_to_heard": median(c[5])}


def median(values: Sequence[float]) -> float:
    return round(statistics.median(values), 1)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3, help="agent-socket runs")
    parser.add_argument("--utterances", type=int, default=21, help="real utterances for the chat figure")
    parser.add_argument("--others", type=int, default=3, help="sessions speaking meanwhile, for the loaded figure")
    parser.add_argument("--loaded", type=int, default=8, help="real utterances for the loaded figure (0: none)")
    parser.add_argument("--held-out", type=int, default=10, help="recordings of a speaker the turn detector was "
                        "not tuned on (GRID s1), for one more chat figure (0: none)")
    args = parser.parse_args()
    import av

    from testkit.server import SHARED_DATA

    with av.open(str(SHARED_DATA / "jfk.flac")) as c:
        r = av.AudioResampler("s16", "mono", 16000)
        pcm16 = np.concatenate([f.to_ndarray().ravel() for fr in c.decode(audio=0) for f in r.resample(fr)])
    pcm16 = pcm16[np.argmax(np.abs(pcm16) > 2000):]  # start on the first word, not the recording's lead-in
    utterances, held_out = real_utterances(args.utterances), held_out_utterances(args.held_out)
    llm = FakeLLM("The capital of France is Paris. It is famous for the Eiffel Tower.")
    await llm.start()
    try:
        env = {"AVATAR_LLM_BASE_URL": llm.url, "AVATAR_LLM_MODEL": "bench",
               "AVATAR_MAX_SESSIONS": str(args.others + 1)}  # room for the others (2 cores admit 2)
        with ServerProcess(env=env) as proc:
            chat = [await chat_reply(proc.url, wav, llm) for wav in utterances]  # the first: a fresh server's
            held = [await chat_reply(proc.url, wav, llm) for wav in held_out]
            agent = [await agent_start(proc.url, pcm16) for _ in range(args.runs)]
            loaded = utterances[:: max(1, len(utterances) // args.loaded)][: args.loaded] if args.loaded else []
            busy = await with_others_speaking(proc.url, args.others, loaded, llm) if loaded else []
    finally:
        await llm.stop()
    a = list(zip(*agent))
    c = list(zip(*chat))
    b = list(zip(*busy))
    h = list(zip(*held))
    print(json.dumps({
        "agent_first_chunk_to_speak_started_ms": median(a[0]), "baseline_ws_round_trip_ms": median(a[1]),
        "interrupt_to_client_silence_ms": median(a[2]), "baseline_speak_started_to_client_sound_ms": median(a[3]),
        "chat_end_of_speech_to_first_audio_ms_excl_llm": median(c[0]),
        "chat_client_end_of_speech_to_first_audio_ms_excl_llm": median(c[7]),
        "chat_client_end_of_speech_to_server_end_of_speech_ms": median(c[8]),
        "baseline_speak_post_to_first_audio_ms": median(c[1]),
        "chat_breakdown_ms": breakdown(c),
        "chat_turn_ends_too_soon": sum(c[6]),
        "chat_end_of_speech_to_first_audio_ms_each": [round(x) for x in c[0]],
        "chat_median_ms_by_source": by_source(utterances, c[0]),
        "chat_first_turn_of_a_fresh_server_ms": round(c[0][0]),
        "chat_held_out_speaker_ms": median(h[0]) if h else None,
        "chat_client_held_out_speaker_ms": median(h[7]) if h else None,
        "chat_held_out_speaker_turn_ends_too_soon": sum(h[6]) if h else None,
        f"chat_with_{args.others}_others_speaking_ms": median(b[0]) if b else None,
        f"chat_client_with_{args.others}_others_speaking_ms": median(b[7]) if b else None,
        f"chat_with_{args.others}_others_speaking_breakdown_ms": breakdown(b) if b else None,
        f"speak_post_to_first_audio_with_{args.others}_others_speaking_ms": median(b[1]) if b else None,
        "runs": args.runs, "utterances": [w.stem for w in utterances], "loaded": [w.stem for w in loaded],
        "raw": {"agent": agent, "chat": chat, "held_out": held, "busy": busy},
    }, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
