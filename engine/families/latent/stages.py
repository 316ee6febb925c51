"""The latent family's chunk loop: context -> A2V -> streaming decode -> refine.

Requests stay as small as for the CPU families (a few frames of audio each). Audio collects
in a fixed ring; once a chunk's worth of new frames (28) has arrived, the context stage turns
the ring into wav2vec2 windows and the A2V stage hands the chunk to the models' sampler thread
(the previous chunk's boundary re-encoded, then 4 flow-matching steps: our N chunks) and
returns at once. Meanwhile the requests keep showing the previous chunk's last
`StreamConfig.generation_lead` frames; when they run out, the decode stage starts a
latent-by-latent stream of the new chunk and each request pulls only as many frames from it as
it publishes. So the picture lags its sound by `StreamConfig.delay_frames` (the server's delay
line matches that), no request waits for a generation that finishes within the lead, and the
first frames of a chunk leave before its last latent is decoded.

All stages share one `LatentSession`, the loop engine/core/stage.py allows: the boundary the
A2V stage conditions on is made from the frames the decode stage produced last, so before it
samples a chunk the A2V stage has the decode stage finish the one before (`finish`).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field

import cv2
import numpy as np
import torch

from engine.config import FPS, SAMPLE_RATE
from engine.core.stage import AudioChunk, FrameChunk, Stage
from media.resample import MonoResampler

from .audio import SAMPLE_RATE as AUDIO_RATE
from .audio import frame_windows, normalize
from .color import ColorMatch
from .models import LatentModels
from .paste import PasteBack
from .vae import TimeCache

log = logging.getLogger("engine.latent")


@dataclass
class LatentSession:
    """Everything a session keeps between requests; every size is fixed by the config."""

    audio: np.ndarray  # the last audio_cache_s at 16 kHz, int16 (what wav2vec2 hears)
    resampler: MonoResampler  # 48 -> 16 kHz, streaming: each request's audio is resampled once
    generator: torch.Generator
    boundary: torch.Tensor  # [1, z, <= boundary_latents, h, w]: the head of the next chunk (sampler thread)
    last: np.ndarray  # the frame published last (RGB, head size); repeated until the first chunk
    held: int  # frames of the photo still to show before the first generated one (the delay)
    pending: int = 0  # audio frames since the last generation
    generation: Future[torch.Tensor] | None = None  # the next chunk's latents, being sampled
    generation_s: float = 0.0  # how long the last chunk took to sample (the lead must cover it)
    overruns: int = 0  # chunks whose frames were due before their generation had finished
    stream: Iterator[torch.Tensor] | None = None  # the current chunk's decode, latent by latent
    skip: int = 0  # frames at the head of the stream that the previous chunk already showed
    ready: deque[np.ndarray] = field(default_factory=deque)  # decoded, not yet published
    tail: deque[torch.Tensor] = field(default_factory=deque)  # the last decoded frames
    latents_decoded: int = 0  # of the current chunk (how far the stream has run)
    cache: TimeCache | None = None  # the decoder's last frames, carried across chunks (carry_decode_cache)


@dataclass
class LatentWork:
    """What passes between the stages for one request."""

    chunk: AudioChunk
    audio: torch.Tensor | None = None  # [1, chunk_frames, window, layers, dim] when a chunk is due
    frames: list[np.ndarray] = field(default_factory=list)  # RGB head frames to publish


def timesteps(steps: int, shift: float) -> list[float]:
    """The distilled model's schedule in [0, 1], noisiest first, ending at 0."""
    base = {2: [1000.0, 500.0], 4: [1000.0, 750.0, 500.0, 250.0]}.get(steps)
    ts = (base or list(np.linspace(1000, 1, steps))) + [0.0]
    return [shift * (t / 1000) / (1 + (shift - 1) * (t / 1000)) for t in ts]


def to_rgb(frames: torch.Tensor) -> list[np.ndarray]:
    """[1, 3, t, h, w] in [-1, 1] -> t RGB uint8 frames."""
    pixels = ((frames[0].float().clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)
    return list(pixels.permute(1, 2, 3, 0).cpu().numpy())


class LatentContextStage(Stage[AudioChunk, LatentWork, LatentSession]):
    name = "context"

    def __init__(self, models: LatentModels, reference: np.ndarray, ref_latents: torch.Tensor):
        self.models, self.stream = models, models.stream
        self.reference, self.ref_latents = reference, ref_latents

    def new_state(self, seed: int) -> LatentSession:
        m = self.models
        return LatentSession(
            audio=np.zeros(self.stream.audio_cache_s * AUDIO_RATE, np.int16), resampler=MonoResampler(AUDIO_RATE),
            generator=torch.Generator(m.device).manual_seed(seed),
            boundary=self.ref_latents[:, :, :1].clone(), last=self.reference, held=self.stream.delay_frames,
            ready=deque(maxlen=self.stream.chunk_frames + self.stream.generation_lead),
            tail=deque(maxlen=self.stream.boundary_frames))

    def run(self, data: AudioChunk, state: LatentSession) -> LatentWork:
        pcm16 = state.resampler.pcm(data.pcm, SAMPLE_RATE)
        if n := len(pcm16):
            state.audio[:-n] = state.audio[n:]
            state.audio[-n:] = pcm16
        state.pending += data.frames
        if state.pending < self.stream.new_frames:
            return LatentWork(data)
        state.pending -= self.stream.new_frames
        return LatentWork(data, audio=self.windows(state.audio))

    @torch.inference_mode()
    def windows(self, pcm16: np.ndarray) -> torch.Tensor:
        """wav2vec2 over the whole ring (as the official streaming does), the last chunk's frames."""
        m = self.models
        frames = len(pcm16) * FPS // AUDIO_RATE
        audio = torch.from_numpy(pcm16.astype(np.float32) / 32768)[None].to(m.device)
        features = m.audio(normalize(audio), frames)[0]
        return frame_windows(features, m.dit.config.audio_window)[-self.stream.chunk_frames:][None]


class A2VStage(Stage[LatentWork, LatentWork, LatentSession]):
    """Hands a due chunk to the sampler thread: the 4-step flow-matching sampler over its
    latents, its head held to the boundary. Its latents reach the decode stage as a Future."""

    name = "a2v"

    def __init__(self, models: LatentModels, ref_latents: torch.Tensor, decode: StreamDecodeStage):
        self.models, self.ref_latents, self.decode = models, ref_latents, decode
        self.schedule = timesteps(models.stream.steps, models.stream.shift)

    def run(self, data: LatentWork, state: LatentSession) -> LatentWork:
        if data.audio is None:
            return data
        # a generation slower than real time: its chunk is decoded before the next one starts
        self.decode.collect(state, wait=True)
        self.decode.finish(state)
        tail = list(state.tail) if len(state.tail) == state.tail.maxlen else None
        state.generation = self.models.sampler.submit(self.sample, data.audio, tail, state)
        return data

    @torch.inference_mode()  # thread-local: the sampler thread enters it itself
    def sample(self, audio: torch.Tensor, tail: list[torch.Tensor] | None, state: LatentSession) -> torch.Tensor:
        """On the sampler thread; only it touches `state.boundary` and `state.generator`."""
        started, m = time.perf_counter(), self.models
        if tail is not None:  # the previous chunk's last frames, re-encoded
            state.boundary = m.vae.encode(torch.cat(tail, 2))
        ref = self.ref_latents.to(m.dtype)
        x = torch.randn(ref.shape, generator=state.generator, device=m.device).to(m.dtype)
        head = state.boundary.shape[2]
        audio = audio.to(m.dtype)
        for t, t_next in zip(self.schedule, self.schedule[1:]):
            x[:, :, :head] = state.boundary.to(m.dtype)
            flow = m.flow(x, torch.tensor([t * 1000], device=m.device), audio, ref)
            clean = x - flow * t
            noise = torch.randn(x.shape, generator=state.generator, device=m.device).to(m.dtype)
            x = (1 - t_next) * clean + t_next * noise
        x[:, :, :head] = state.boundary.to(m.dtype)
        if m.device.type == "cuda":
            torch.cuda.current_stream().synchronize()  # done means done, for the timing and the decode
        state.generation_s = time.perf_counter() - started
        return x


class StreamDecodeStage(Stage[LatentWork, LatentWork, LatentSession]):
    """Starts each new chunk's decode and pulls only the frames this request publishes."""

    name = "decode"

    def __init__(self, models: LatentModels, color: ColorMatch):
        self.models, self.color = models, color

    def pull(self, state: LatentSession) -> bool:
        """Decode one more latent of the current chunk into `ready`; False when there is none."""
        if state.stream is None:
            return False
        with torch.inference_mode():
            frames = next(state.stream, None)
            if frames is None:
                state.stream = None
                return False
            frames = self.color(frames)
        state.latents_decoded += 1
        for i in range(frames.shape[2]):
            state.tail.append(frames[:, :, i : i + 1])
        rgb = to_rgb(frames)
        drop = min(state.skip, len(rgb))
        state.skip -= drop
        state.ready.extend(rgb[drop:])
        return True

    def start(self, latents: torch.Tensor, state: LatentSession) -> None:
        """A new chunk's decode. Either from a fresh cache, dropping its boundary frames (shown
        already), as the official model decodes; or, with `carry_decode_cache`, only its new
        latents, continuing the previous chunk's causal cache (the boundary is not decoded again)."""
        s = self.models.stream
        if s.carry_decode_cache and state.cache is not None:
            stream = self.models.vae.decode_stream(latents[:, :, s.boundary_latents:], state.cache)
            state.stream, state.skip = stream, 0
        else:
            state.cache = TimeCache() if s.carry_decode_cache else None
            state.stream, state.skip = self.models.vae.decode_stream(latents, state.cache), s.boundary_frames
        state.latents_decoded = 0

    def finish(self, state: LatentSession) -> None:
        """Decode what is left of the current chunk: the next chunk's boundary needs its last frames."""
        while self.pull(state):
            pass

    def collect(self, state: LatentSession, wait: bool) -> bool:
        """Start decoding the chunk the sampler made, once it is done (or now, waiting for it)."""
        if state.generation is None or not (wait or state.generation.done()):
            return False
        if not state.generation.done():
            self._overrun(state)
        latents, state.generation = state.generation.result(), None
        with torch.inference_mode():
            self.start(latents, state)
        return True

    def _overrun(self, state: LatentSession) -> None:
        """The stream stalls until the chunk is done: say so once, then every 100th time."""
        state.overruns += 1
        if state.overruns % 100 == 1:
            lead = self.models.stream.generation_lead
            log.warning("a chunk was not generated within its lead of %d frames (%d ms; the last took %.0f ms) "
                        "and the stream waits for it (%d times in this session); a longer lead in "
                        "latent.json trades %d ms of delay per frame for a steady stream",
                        lead, lead * 1000 // FPS, state.generation_s * 1000, state.overruns, 1000 // FPS)

    def run(self, data: LatentWork, state: LatentSession) -> LatentWork:
        held = min(state.held, data.chunk.frames)
        state.held -= held
        need = data.chunk.frames - held
        self.collect(state, wait=False)
        while len(state.ready) < need and (self.pull(state) or self.collect(state, wait=True)):
            pass
        data.frames += [state.last] * held
        for _ in range(need):
            state.last = state.ready.popleft() if state.ready else state.last
            data.frames.append(state.last)
        return data


class RefineStage(Stage[LatentWork, FrameChunk, LatentSession]):
    """The SR slot: the generated head as the stream shows it, I420: scaled to a square
    stream's size, or pasted back into the photo's surroundings (paste.py) for a wider one."""

    name = "refine"

    def __init__(self, size: int, paste: PasteBack | None = None):
        self.size, self.paste = size, paste

    def run(self, data: LatentWork, state: LatentSession) -> FrameChunk:
        to_i420 = self.paste or (lambda f: cv2.cvtColor(self._scaled(f), cv2.COLOR_RGB2YUV_I420))
        frames = np.stack([to_i420(f) for f in data.frames])
        return FrameChunk(data.chunk.first_frame, frames, np.zeros((len(frames), 0), np.float32))

    def _scaled(self, rgb: np.ndarray) -> np.ndarray:
        if rgb.shape[0] == self.size:
            return rgb
        return cv2.resize(rgb, (self.size, self.size), interpolation=cv2.INTER_LINEAR)
