"""Uploaded clips are opened as what they claim to be, and cost no more than they declare."""

from __future__ import annotations

import fractions
import struct
from pathlib import Path

import av
import numpy as np
import pytest

from engine.families.video.clip import ClipError, frames, probe

pytestmark = pytest.mark.unit


def lying_clip(path: Path) -> Path:
    """20 s by its header (mvhd, mdhd, tkhd), with its last frame at 3,600 s."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=25)
        stream.width = stream.height = 64
        for pts in [*range(500), 3600 * 25]:
            frame = av.VideoFrame.from_ndarray(np.full((96, 64), pts % 255, np.uint8), format="yuv420p")
            frame.pts, frame.time_base = pts, fractions.Fraction(1, 25)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    data = bytearray(path.read_bytes())
    for box in (b"mvhd", b"mdhd"):  # version 0: timescale at +16, duration at +20 from the box type
        at = data.find(box)
        scale = struct.unpack(">I", data[at + 16:at + 20])[0]
        struct.pack_into(">I", data, at + 20, 20 * scale)
    struct.pack_into(">I", data, data.find(b"tkhd") + 24, 20 * 1000)
    path.write_bytes(bytes(data))
    return path


def test_a_header_that_lies_about_the_length_bounds_the_work(tmp_path):
    clip = lying_clip(tmp_path / "lying.mp4")
    assert probe(clip).seconds == 20.0
    assert sum(1 for _ in frames(clip)) == 500  # not the 90,000 ticks to the frame at 3,600 s


def test_playlists_and_other_formats_are_refused_before_ffmpeg_reads_them(tmp_path):
    playlist = tmp_path / "a.upload"
    playlist.write_text("ffconcat version 1.0\nfile 'default.png'\n")
    with pytest.raises(ClipError) as err:
        probe(playlist)
    assert err.value.code == "unreadable" and "MP4" in str(err.value)
    disguised = tmp_path / "b.upload"  # MP4's first box, then a playlist: the MP4 reader alone sees it
    disguised.write_bytes(b"\x00\x00\x00\x18ftypisom#EXTM3U\n#EXTINF:10,\nfile:///etc/passwd\n")
    with pytest.raises(ClipError) as err:
        probe(disguised)
    assert err.value.code == "unreadable"


def wide_clip(path: Path) -> Path:
    """12 s of a 4112-pixel-wide picture (small on disk: refused from its header)."""
    with av.open(str(path), "w", format="matroska") as out:
        stream = out.add_stream("mpeg4", rate=25)
        stream.width, stream.height = 4112, 64
        for i in range(300):
            frame = av.VideoFrame.from_ndarray(np.zeros((96, 4112), np.uint8), format="yuv420p")
            frame.pts = i
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


def test_a_picture_wider_than_4096_is_refused_from_the_header(tmp_path):
    with pytest.raises(ClipError) as err:
        probe(wide_clip(tmp_path / "wide.mkv"))
    assert err.value.code == "video_too_large"
