"""The N/I chunk schedule: main-timeline chunks and the interpolation chunks between them.

N(k) covers frames [k*L, (k+1)*L). I(k) runs once N(k) and N(k+1) both exist: its anchors
are the last frame of N(k) and frame `anchor` of N(k+1); it generates the span between and
including them, then its own predictions of the two anchors are discarded, so only
interpolated frames replace the head of N(k+1). Order: N0, N1, I0, N2, I1, N3, I2, ...

Publishing: frames of N(k+1) are final once I(k) exists (I(k+1) changes only N(k+2)), so
the first frame of chunk k+1 leaves after N(k+1) and I(k) are done. Playback never stalls
when generating one N and one I chunk takes less than L frames of playback (the latency
budget: one chunk of lead, see docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

ANCHOR = 1
"""Frames of N(k) that I(k-1) regenerates (its early anchor is the frame after them)."""


@dataclass(frozen=True)
class ChunkPlan:
    """One unit of generation work."""

    kind: str  # "N" or "I"
    index: int
    start: int  # first timeline frame the chunk generates
    frames: int  # frames it generates (an I chunk: both anchors included)
    keep: tuple[int, int]  # timeline frames [keep[0], keep[1]) it contributes

    @property
    def anchors(self) -> tuple[int, int] | None:
        """Timeline positions of the two anchor frames (I chunks only)."""
        return (self.start, self.start + self.frames - 1) if self.kind == "I" else None


def n_chunk(k: int, length: int, anchor: int) -> ChunkPlan:
    head = 0 if k == 0 else anchor  # frames [k*L, k*L + anchor) come from I(k-1)
    return ChunkPlan("N", k, k * length, length, (k * length + head, (k + 1) * length))


def i_chunk(k: int, length: int, anchor: int) -> ChunkPlan:
    first = (k + 1) * length - 1  # the last frame of N(k)
    last = (k + 1) * length + anchor  # the early anchor frame of N(k+1)
    return ChunkPlan("I", k, first, last - first + 1, (first + 1, last))


def plan(length: int, anchor: int = ANCHOR, chunks: int | None = None) -> Iterator[ChunkPlan]:
    """N0, N1, I0, N2, I1, ...; open-ended when `chunks` is None (a live session)."""
    if not 1 <= anchor < length:
        raise ValueError("the anchor must fall inside the next chunk")
    k = 0
    while chunks is None or k < chunks:
        yield n_chunk(k, length, anchor)
        if k > 0:
            yield i_chunk(k - 1, length, anchor)
        k += 1


def interior(i_frames: list, plan_i: ChunkPlan) -> list:
    """An I chunk's kept frames: its predictions minus its two anchor predictions."""
    if len(i_frames) != plan_i.frames:
        raise ValueError("an I chunk must predict its whole span, anchors included")
    return i_frames[1:-1]
