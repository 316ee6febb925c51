"""The RTMP publisher: one broadcast's encode and network I/O, in a process of its own.

`python -m server.publish.rtmp_publisher`, started by server/publish/broadcast.py. Why a process: PyAV
opens an output (FFmpeg's avio_open and the RTMP handshake in avformat_write_header)
holding the GIL and with no timeout, so an ingest that accepts the connection and then
says nothing would freeze every thread of the process that opened it, the event loop
included. Here it freezes only this process, which the server kills when it is late.

stdin: one JSON line {"url", "size": [width, height]} (the URL never appears in the process list), then
ticks: a TICK header (index, kind, video bytes, audio bytes), the picture (kind RAW: an
I420 frame; kind UNIT: an H.264 access unit from a Ray engine) and 40 ms of s16 mono.
stdout: JSON lines, {"started": true} once the ingest took the stream header, or
{"error": reason} with one of REASONS; the process then exits. EOF on stdin ends the
stream cleanly.
"""

from __future__ import annotations

import errno
import fractions
import json
import struct
import sys
from typing import Any, BinaryIO

import av
import numpy as np

from engine.config import FPS, SAMPLE_RATE, SAMPLES_PER_FRAME
from media.frame_size import FrameSize, frame_dims
from media.h264 import add_live_streams

TICK = struct.Struct("<IBII")
RAW, UNIT = 0, 1
REASONS = {errno.ECONNREFUSED: "connection_refused", errno.ETIMEDOUT: "timeout", errno.EHOSTUNREACH: "unreachable",
           errno.ENETUNREACH: "unreachable", errno.ECONNRESET: "dropped", errno.EPIPE: "dropped",
           errno.EIO: "dropped"}


def encode_tick(index: int, video: np.ndarray | bytes, pcm: np.ndarray) -> bytes:
    """A tick as the publisher reads it (the server's side of the pipe)."""
    kind, picture = (UNIT, video) if isinstance(video, bytes) else (RAW, video.tobytes())
    sound = pcm.astype(np.int16).tobytes()
    return TICK.pack(index, kind, len(picture), len(sound)) + picture + sound


def reason(exc: BaseException) -> str:
    """What happened, as a code: never the other side's words."""
    if isinstance(exc, av.error.EOFError):
        return "dropped"  # the ingest closed the connection (or spoke something else than RTMP)
    return REASONS.get(getattr(exc, "errno", None) or 0, "failed")


class Pictures:
    """Each tick's picture as a frame: the raw one, or the Ray engine's unit decoded. A tick
    the engine was late for repeats the last picture: the stream stays at a constant rate."""

    def __init__(self, size: FrameSize):
        width, height = frame_dims(size)
        self.shape = (height * 3 // 2, width)
        self._decoder: Any = None
        self._last: np.ndarray = np.zeros(self.shape, np.uint8)

    def of(self, kind: int, data: bytes) -> av.VideoFrame:
        if kind == RAW:
            self._last = np.frombuffer(data, np.uint8).reshape(self.shape)
        elif data:
            self._decoder = self._decoder or av.CodecContext.create("h264", "r")
            try:
                for frame in self._decoder.decode(av.Packet(data)):
                    self._last = frame.to_ndarray(format="yuv420p")
            except av.FFmpegError:  # units before the first keyframe (asked for at the start) do not decode
                pass
        return av.VideoFrame.from_ndarray(self._last, format="yuv420p")


def read_tick(source: BinaryIO) -> tuple[int, int, bytes, bytes] | None:
    head = source.read(TICK.size)
    if len(head) < TICK.size:
        return None
    index, kind, video_len, pcm_len = TICK.unpack(head)
    return index, kind, source.read(video_len), source.read(pcm_len)


def publish(url: str, size: FrameSize, source: BinaryIO, say: Any) -> None:
    out = av.open(url, "w", format="flv")
    try:
        video, audio = add_live_streams(out, size)
        out.start_encoding()  # the handshake and the stream header: the ingest took the stream
        say(started=True)
        pictures, first = Pictures(size), None
        while (tick := read_tick(source)) is not None:
            index, kind, picture, pcm = tick
            first = index if first is None else first
            write(out, video, audio, pictures.of(kind, picture), np.frombuffer(pcm, np.int16), index - first)
        for stream in (video, audio):
            for packet in stream.encode(None):
                out.mux(packet)
    finally:
        out.close()


def write(out: Any, video: Any, audio: Any, picture: av.VideoFrame, pcm: np.ndarray, n: int) -> None:
    """Tick n of the stream: both streams stamped from the tick number, one media clock."""
    picture.pts, picture.time_base = n, fractions.Fraction(1, FPS)
    for packet in video.encode(picture):
        out.mux(packet)
    sound = av.AudioFrame.from_ndarray(pcm[:SAMPLES_PER_FRAME].reshape(1, -1), format="s16", layout="mono")
    sound.sample_rate, sound.pts = SAMPLE_RATE, n * SAMPLES_PER_FRAME
    sound.time_base = fractions.Fraction(1, SAMPLE_RATE)
    for packet in audio.encode(sound):
        out.mux(packet)


def main() -> None:
    def say(**message: object) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    spec = json.loads(sys.stdin.buffer.readline())
    try:
        publish(spec["url"], frame_dims(spec["size"]), sys.stdin.buffer, say)
    except (av.FFmpegError, OSError) as exc:
        say(error=reason(exc))
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
