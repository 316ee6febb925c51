"""SessionMonitor: the session's watchdog and its stats, from the peer's RTCP reports.

A peer that never pulls media, or whose receiver reports stop (a closed tab sends no
DTLS close and ICE notices only after ~30 s), ends its session; once a second the
session reports fps, queue and bitrate, and gives its viewer's loss to the bitrate control.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable
from typing import Any

from aiortc import RTCPeerConnection

from media.clock import FRAME_MS
from server.events import EventHub
from server.stream.playout import Playout
from server.stream.tracks import AvatarAudioTrack, AvatarVideoTrack

STATS_PERIOD_S = 1.0
CONNECT_TIMEOUT_S = 10.0  # a peer that never pulls media does not hold capacity for long
PEER_SILENT_S = 6.0  # no RTCP receiver report for this long: the viewer is gone (tab closed)
# Loss is judged over at least this many packets: at 200 kbit/s a second holds ~25, and one
# packet lost in them would read as 4 %, over LOSS_LOW, and hold the bitrate down
LOSS_WINDOW_PACKETS = 60


class SessionMonitor:
    """Ends a session whose peer never connects or goes silent; reports its stats each second."""

    def __init__(self, pc: RTCPeerConnection, video: AvatarVideoTrack, audio: AvatarAudioTrack,
                 playout: Playout, hub: EventHub, closed: asyncio.Event, fail: Callable[[str, str], None]):
        self.pc, self.video, self.audio, self.playout, self.hub = pc, video, audio, playout, hub
        self.closed, self.fail = closed, fail
        self.created = time.monotonic()
        self.fps = 0.0  # video frames sent in the last stats period, per second
        self.fresh_fps = 0.0  # of those, newly rendered ones (the rest repeat a late engine's last frame)

    async def run(self) -> None:
        """Once a second, from one read of the senders' stats: end a session whose viewer
        never connects or has gone away, report the stats, follow the video's loss."""
        last_sent, last_played, last_bytes, last_t = 0, 0, 0, time.monotonic()
        reported = (0, 0)  # packets lost and sent where the current loss window starts
        while not self.closed.is_set():
            await asyncio.sleep(STATS_PERIOD_S)
            senders = [(sender.track, list((await sender.getStats()).values())) for sender in self.pc.getSenders()]
            self._watch([stat for _, values in senders for stat in values])
            video = next((values for track, values in senders if track is self.video), [])
            reported = self._follow_video_loss(video, reported)
            now, played = time.monotonic(), self.playout.stats.played
            sent_bytes = sum(s.bytesSent for s in video if s.type == "outbound-rtp")  # what the encoder made
            self.fps = round((self.video.sent - last_sent) / (now - last_t), 2)
            self.fresh_fps = round((played - last_played) / (now - last_t), 2)
            video_kbps = round((sent_bytes - last_bytes) * 8 / 1000 / (now - last_t), 1)
            last_sent, last_played, last_bytes, last_t = self.video.sent, played, sent_bytes, now
            self.hub.emit("stats", fps=self.fps, fresh_fps=self.fresh_fps, queue_ms=self.playout.buffered * FRAME_MS,
                          av_offset_ms=self.av_offset_ms(), held=self.playout.stats.held, video_kbps=video_kbps)

    def _watch(self, stats: list[Any]) -> None:
        if self.video.first_frame_at is None:
            if time.monotonic() - self.created > CONNECT_TIMEOUT_S:
                self.fail("not_connected", f"no media was requested within {CONNECT_TIMEOUT_S:.0f} s; check ICE/TURN")
        elif self._seconds_since_receiver_report(stats) > PEER_SILENT_S:
            self.fail("peer_gone", "the viewer stopped answering")

    def _seconds_since_receiver_report(self, stats: list[Any]) -> float:
        reports = [s.timestamp for s in stats if s.type == "remote-inbound-rtp"]
        if not reports:
            assert self.video.first_frame_at is not None  # only asked once media flows
            return time.monotonic() - self.video.first_frame_at
        return (datetime.datetime.now(datetime.UTC) - max(reports)).total_seconds()

    def _follow_video_loss(self, stats: list[Any], before: tuple[int, int]) -> tuple[int, int]:
        """Give the video's bitrate control the fraction lost since `before`, from the receiver
        reports' running totals (a browser's per-report fractions come from several reporters,
        some over a few milliseconds, so one report says little), once LOSS_WINDOW_PACKETS
        have been sent since. The totals the next window starts from (lost, sent)."""
        for stat in stats:
            if stat.type == "remote-inbound-rtp":
                now = (stat.packetsLost, stat.packetsLost + stat.packetsReceived)
                if now[1] - before[1] < LOSS_WINDOW_PACKETS:
                    return before
                self.video.bitrate.loss(max(0, now[0] - before[0]) / (now[1] - before[1]), time.monotonic())
                return now
        return before

    def av_offset_ms(self) -> float:
        """How much later than its video the audio left the server (both are due at t0 + media time)."""
        return round((self.audio.last_late - self.video.last_late) * 1000, 1)
