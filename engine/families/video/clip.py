"""Reading an uploaded clip: probing it, its frames on the 25 fps timeline, and why it is refused.

Frames are streamed, never held all at once: a minute of 720p RGB is 4 GB. Each
refusal is a `ClipError` whose message a person understands and whose code the
server returns beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.config import FPS

SUFFIXES = (".mp4", ".mov", ".webm", ".m4v", ".mkv")  # what is taken for a clip (else a photo)
MIN_SECONDS = 10.0
MAX_SECONDS = 300.0
MAX_SIDE = 4096  # refused from the header, before a frame is decoded
OVERRUN_S = 1.0  # frames this far past the header's length are not read
# FFmpeg opens a clip only as one of these containers, and only from its own file: a
# playlist (concat, HLS), an image pattern or a reference to another file or URL inside
# an upload is refused, not followed (QuickTime's external data references stay off).
# FLV and MPEG-PS: the training data's CREMA-D and GRID takes; they reference nothing either.
DEMUXERS = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,flv,mpeg"
OPEN_OPTIONS = {"format_whitelist": DEMUXERS, "protocol_whitelist": "file", "enable_drefs": "0"}
MP4_BOXES = (b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide", b"pnot")
EBML = b"\x1a\x45\xdf\xa3"  # Matroska and WebM
OTHERS = (b"FLV", b"\x00\x00\x01\xba")  # FLV, an MPEG program stream's pack header


class ClipError(ValueError):
    """A clip the avatar cannot be made from; `code` is the API's error code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ClipInfo:
    width: int
    height: int
    seconds: float
    frames: int  # on the 25 fps timeline


def open_clip(path: Path):  # type: ignore[no-untyped-def]  # PyAV's types
    """The clip's container, if the file is what a clip claims to be (MP4/MOV or Matroska/WebM)."""
    import av

    with open(path, "rb") as f:
        head = f.read(8)
    if head[4:8] not in MP4_BOXES and head[:4] != EBML and not head.startswith(OTHERS):
        raise ClipError("unreadable", "the file is not a video we can read (MP4, MOV, WebM or Matroska)")
    return av.open(str(path), container_options=OPEN_OPTIONS)


def probe(path: Path) -> ClipInfo:
    """Open the clip and check its stream, size and length, reading only the header."""
    import av

    try:
        with open_clip(path) as container:
            if not container.streams.video:
                raise ClipError("no_video", "the file has no video stream; upload a video of the person talking")
            video = container.streams.video[0]
            seconds = _seconds(container, video)
            width, height = video.codec_context.width, video.codec_context.height
    except av.error.FFmpegError as exc:
        raise ClipError("unreadable", f"the file is not a video we can read ({_reason(exc)})") from None
    if seconds <= 0 or width <= 0:
        raise ClipError("unreadable", "the video stream holds no frames we can read")
    if max(width, height) > MAX_SIDE:
        raise ClipError("video_too_large", f"the video is {width}x{height}; sides are limited to {MAX_SIDE} pixels")
    if seconds < MIN_SECONDS:
        raise ClipError("too_short", f"the clip is {seconds:.1f} s long; it needs at least {MIN_SECONDS:.0f} s "
                        "of the person talking")
    if seconds > MAX_SECONDS:
        raise ClipError("too_long", f"the clip is {seconds / 60:.1f} minutes long; the limit is "
                        f"{MAX_SECONDS / 60:.0f} minutes")
    return ClipInfo(width, height, seconds, int(seconds * FPS))


def _seconds(container, video) -> float:  # type: ignore[no-untyped-def]  # PyAV's types
    if video.duration is not None and video.time_base is not None:
        return float(video.duration * video.time_base)
    if container.duration is not None:
        return container.duration / 1e6
    return 0.0


def _reason(exc: Exception) -> str:
    """FFmpeg's own words, without its error number or the file name."""
    return str(getattr(exc, "strerror", None) or exc).split(":")[0][:80]


def frames(path: Path, transform: Callable[[np.ndarray], np.ndarray] | None = None) -> Iterator[np.ndarray]:
    """RGB frames on the 25 fps timeline, passed through `transform` as they are decoded.

    Tick k (k / FPS seconds after the first frame, up to the last frame's time) takes the
    source frame nearest it (the earlier one on a tie). Deciding needs only the frame after,
    so one decoded frame is held at a time, whatever the clip's length. Frames past the
    length its header declares (probe checked that one) are not read: a lying header
    cannot make the work longer than the clip it claims to be.
    """
    import av

    try:
        with open_clip(path) as container:
            video = container.streams.video[0]
            video.thread_type = "AUTO"
            declared = _seconds(container, video)
            tick, start, held = 0, None, None  # held: (time, frame) of the latest frame decoded
            for frame in container.decode(video):
                if frame.pts is None or video.time_base is None:
                    continue
                t = float(frame.pts * video.time_base)
                start = t if start is None else start
                t -= start
                if declared and t > declared + OVERRUN_S:
                    break
                rgb = frame.to_ndarray(format="rgb24")
                out = transform(rgb) if transform else rgb
                # the ticks between the held frame and this one (int(): the last tick is the
                # one at or before the last frame, as FPS * time rounds down)
                while held is not None and tick / FPS < t and tick <= int(t * FPS):
                    yield held[1] if tick / FPS - held[0] <= t - tick / FPS else out
                    tick += 1
                held = (t, out)
            while held is not None and tick <= int(held[0] * FPS):
                yield held[1]  # ticks on the last frame itself
                tick += 1
    except av.error.FFmpegError as exc:
        raise ClipError("unreadable", f"the video could not be decoded ({_reason(exc)})") from None


def samples(path: Path, seconds: list[float]) -> Iterator[np.ndarray]:
    """One RGB frame near each time (the first frame decoded after seeking to it): a look
    at a long clip without decoding all of it."""
    import av

    try:
        with open_clip(path) as container:
            video = container.streams.video[0]
            base = video.time_base
            start = video.start_time or 0
            for t in seconds:
                if base is not None:
                    container.seek(start + int(t / base), stream=video, backward=True)
                frame = next(container.decode(video), None)
                if frame is not None:
                    yield frame.to_ndarray(format="rgb24")
    except av.error.FFmpegError as exc:
        raise ClipError("unreadable", f"the video could not be decoded ({_reason(exc)})") from None


def sound(path: Path) -> np.ndarray | None:
    """The clip's sound as 48 kHz mono int16 from its first video frame on; None without any."""
    import av

    from engine.config import SAMPLE_RATE
    from media.resample import MonoResampler

    with open_clip(path) as container:
        if not container.streams.audio or not container.streams.video:
            return None
        video_start = _first_frame_time(container)
        declared = _seconds(container, container.streams.video[0])
    with open_clip(path) as container:
        audio = container.streams.audio[0]
        resampler = MonoResampler(SAMPLE_RATE)
        blocks: list[np.ndarray] = []
        audio_start = None
        try:
            for frame in container.decode(audio):
                if frame.pts is not None and audio.time_base is not None:
                    at = float(frame.pts * audio.time_base)
                    audio_start = at if audio_start is None else audio_start
                    if at - video_start > declared + OVERRUN_S:
                        break
                blocks += resampler.frame(frame)
            blocks += resampler.frame(None)
        except av.error.FFmpegError:
            return None  # the picture is what the avatar needs; a broken sound track only loses adaptation
    if not blocks:
        return None
    pcm = np.concatenate(blocks).astype(np.int16)
    offset = int(round(((audio_start or 0.0) - video_start) * SAMPLE_RATE))  # pad if the sound starts later
    return np.concatenate([np.zeros(offset, np.int16), pcm]) if offset > 0 else pcm[-offset:]


def _first_frame_time(container) -> float:  # type: ignore[no-untyped-def]  # PyAV's types
    """The time of the first decoded video frame: the timeline's 0 in frames()."""
    video = container.streams.video[0]
    for frame in container.decode(video):
        if frame.pts is not None and video.time_base is not None:
            return float(frame.pts * video.time_base)
    return 0.0
