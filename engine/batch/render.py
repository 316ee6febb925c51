"""`avatar-render`: batch mode. Audio (or text) in, one MP4 (H.264 + AAC) out.

The same stages as live sessions run chunk by chunk over a streamed decode of the input
(engine/batch/runner.py: motion in order here, decode in a small process pool), so memory does
not depend on the input's length, and frames go straight to the encoder. Audio and video
both start at pts 0 on the frame clock: FFmpeg's AAC encoder here declares its 1024
samples of priming in the MP4 edit list itself (shifting pts by hand would start the
audio 21 ms early); a test checks the written file to the sample.
"""

from __future__ import annotations

if __name__ == "__main__":  # python -m engine.batch.render: as `avatar-render` (engine.runtime.entry.run_render)
    from engine.threads import single_threaded

    single_threaded()

import argparse
import fractions
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import av
import numpy as np

from engine.config import FPS, SAMPLE_RATE, SAMPLES_PER_FRAME, EngineConfig
from engine.core.stage import FrameChunk
from engine.version import package_version
from media.h264 import add_live_streams
from media.resample import MonoResampler

MOTION_CHUNK = 2  # the motion stage's chunk: every piece must hold whole ones
CHUNK_FRAMES = 10
"""Frames per batch job; the last chunk is cut short, padded only to the motion chunk (2)."""


class RenderError(Exception):
    """An input the renderer cannot use; the message is for the user, one line."""


def audio_stream(path: Path) -> tuple[Iterator[np.ndarray], float]:
    """48 kHz mono int16 blocks of a media file, decoded as they are needed, and its duration."""
    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, OSError) as exc:
        raise RenderError(f"{path}: cannot open it as audio ({_reason(exc)})") from None
    if not container.streams.audio:
        container.close()
        raise RenderError(f"{path}: has no audio stream")
    stream = container.streams.audio[0]
    if stream.duration:
        assert stream.time_base is not None  # a stream that knows its duration has a time base
        duration = float(stream.duration * stream.time_base)
    else:
        duration = (container.duration or 0) / 1e6

    def blocks() -> Iterator[np.ndarray]:
        resampler = MonoResampler(SAMPLE_RATE)
        try:
            for frame in container.decode(stream):
                yield from resampler.frame(frame)
            yield from resampler.frame(None)
        except av.error.FFmpegError as exc:
            raise RenderError(f"{path}: the audio is damaged or truncated ({_reason(exc)})") from None
        finally:
            container.close()

    return blocks(), duration


def _reason(exc: Exception) -> str:
    return str(getattr(exc, "strerror", None) or exc).splitlines()[0][:120]


def chunks(blocks: Iterator[np.ndarray], size: int, multiple: int) -> Iterator[np.ndarray]:
    """Fixed-size pieces of a block stream; the last one padded with silence to `multiple` samples."""
    pending, filled = np.zeros(size, np.int16), 0
    for block in blocks:
        while len(block):
            take = min(size - filled, len(block))
            pending[filled : filled + take], block = block[:take], block[take:]
            filled += take
            if filled == size:
                yield pending.copy()
                filled = 0
    if filled:
        end = -(-filled // multiple) * multiple
        pending[filled:end] = 0
        yield pending[:end]


class Mp4Writer:
    """H.264 video and AAC audio into one MP4, both on the media clock of the frame index."""

    def __init__(self, path: Path, size: int):
        self.container = av.open(str(path), "w", format="mp4")
        self.video = self.container.add_stream("libx264", rate=FPS, options={"preset": "ultrafast", "crf": "21"})
        self.video.width = self.video.height = size
        self.video.pix_fmt = "yuv420p"
        self.audio = self.container.add_stream("aac", rate=SAMPLE_RATE, layout="mono")
        self.samples = 0

    def write(self, chunk: FrameChunk, pcm: np.ndarray) -> None:
        for i, frame in enumerate(chunk.frames):
            vf = av.VideoFrame.from_ndarray(frame, format="yuv420p")
            vf.pts, vf.time_base = chunk.first_frame + i, fractions.Fraction(1, FPS)
            self.container.mux(self.video.encode(vf))
        if not len(pcm):  # the silent tail that flushes a lookahead motion model carries no audio
            return
        af = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        af.sample_rate = SAMPLE_RATE
        af.pts, af.time_base = self.samples, fractions.Fraction(1, SAMPLE_RATE)
        self.samples += len(pcm)
        self.container.mux(self.audio.encode(af))

    def close(self) -> None:
        self.container.mux(self.video.encode(None))
        self.container.mux(self.audio.encode(None))
        self.container.close()


class LiveWriter(Mp4Writer):
    """The same streams, live to an RTMP(S) ingest as FLV, at real-time pace: a chunk goes
    when its media time comes (a player sees the render as it would a live session)."""

    def __init__(self, url: str, size: int):
        try:
            self.container = av.open(url, "w", format="flv", timeout=5.0)
        except (av.FFmpegError, OSError) as exc:
            raise RenderError(f"cannot publish to {url.rsplit('/', 1)[0]}: {exc}") from None
        self.video, self.audio = add_live_streams(self.container, size)
        self.samples = 0
        self.started: float | None = None

    def write(self, chunk: FrameChunk, pcm: np.ndarray) -> None:
        self.started = self.started or time.monotonic()
        time.sleep(max(0.0, self.started + chunk.first_frame / FPS - time.monotonic()))
        try:
            super().write(chunk, pcm)
        except (av.FFmpegError, OSError) as exc:
            raise RenderError(f"the ingest dropped the stream: {exc}") from None


def is_live(out: str | Path) -> bool:
    return str(out).startswith(("rtmp://", "rtmps://"))


def render(blocks: Iterator[np.ndarray], duration: float, avatar: Path, out: Path | str,
           progress: Callable[[float, float], None] | None = None, seed: int = 0, workers: int = 2) -> int:
    """Render the whole stream into `out` (a file, or an RTMP(S) ingest, live); returns the
    number of frames written."""
    size = EngineConfig().size
    if is_live(out):
        live = LiveWriter(str(out), size)
        try:
            return _fill(live, blocks, duration, avatar, progress, seed, workers)
        finally:
            live.container.close()
    out = Path(out)
    partial = out.with_name(out.name + ".part")  # the output appears only when complete
    writer = Mp4Writer(partial, size)
    try:
        frames = _fill(writer, blocks, duration, avatar, progress, seed, workers)
    except BaseException:
        writer.container.close()
        partial.unlink(missing_ok=True)
        raise
    if frames == 0:
        partial.unlink(missing_ok=True)
        raise RenderError("the input holds no audio")
    partial.replace(out)
    return frames


def _fill(writer: Mp4Writer, blocks: Iterator[np.ndarray], duration: float, avatar: Path,
          progress: Callable[[float, float], None] | None, seed: int, workers: int) -> int:
    from engine.batch.runner import batch_frames

    frames = 0
    pieces = chunks(blocks, CHUNK_FRAMES * SAMPLES_PER_FRAME, MOTION_CHUNK * SAMPLES_PER_FRAME)
    for chunk, pcm in batch_frames(pieces, avatar, seed, workers=workers):
        writer.write(chunk, pcm)
        frames += len(chunk.frames)
        if progress:
            progress(frames / FPS, duration)
    writer.close()
    return frames


class Progress:
    """One rewritten stderr line: percent, position and speed against real time."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.last = 0.0

    def __call__(self, done_s: float, total_s: float) -> None:
        now = time.monotonic()
        if now - self.last < 0.25 and done_s < total_s:
            return
        self.last = now
        speed = done_s / max(now - self.started, 1e-6)
        percent = 100 * min(done_s / total_s, 1) if total_s else 0
        sys.stderr.write(f"\rrendering {percent:5.1f}%  {done_s:7.1f}s / {total_s:.1f}s  {speed:4.1f}x real time")
        sys.stderr.flush()


def _text_audio(text: str) -> tuple[Iterator[np.ndarray], float]:
    import asyncio

    from speech.sentences import split_sentences
    from speech.tts import PiperTts

    async def synth() -> list[np.ndarray]:
        tts = PiperTts()
        await tts.start()
        try:
            return [await tts.synthesize(s) for s in split_sentences(text)]
        finally:
            await tts.close()

    parts = asyncio.run(synth())
    if not parts:
        raise RenderError("the text has nothing to say")
    return iter(parts), sum(len(p) for p in parts) / SAMPLE_RATE


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="avatar-render",
                                     description="Render a talking-avatar MP4 from audio or text.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--audio", type=Path, help="speech audio file (any format FFmpeg reads)")
    source.add_argument("--text", help="text to speak with the bundled voice")
    parser.add_argument("--avatar", type=Path, help="portrait photo, or a clip (MP4/MOV/WebM) of the person "
                        "talking for a video avatar (default: the bundled avatar)")
    parser.add_argument("--out", required=True, help="output .mp4, or an RTMP(S) ingest (rtmp://host/app/key) "
                        "to stream the render live, at real-time pace")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                        help="decode processes (default: up to 2; 0 decodes in this process)")
    args = parser.parse_args(argv)
    try:
        blocks, duration = audio_stream(args.audio) if args.audio else _text_audio(args.text)
        avatar = _avatar(args.avatar)
        started = time.monotonic()
        frames = render(blocks, duration, avatar, args.out, Progress(), workers=args.workers)
    except RenderError as exc:
        sys.stderr.write(f"\navatar-render: {exc}\n")
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        sys.stderr.write("\navatar-render: interrupted\n")
        raise SystemExit(130) from None
    elapsed = time.monotonic() - started
    sys.stderr.write(f"\nwrote {args.out} ({frames / FPS:.1f} s of video in {elapsed:.1f} s)\n")


def _avatar(photo: Path | None) -> Path:
    from engine.assembly import prepare_file
    from engine.families.portrait.avatar import DEFAULT_AVATAR

    if photo is None:
        return DEFAULT_AVATAR
    try:
        return prepare_file(photo, Path.home() / ".cache" / "avatar-server" / "avatars")
    except (OSError, ValueError) as exc:
        raise RenderError(f"{photo}: {exc}") from None


if __name__ == "__main__":
    main()
