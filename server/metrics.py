"""GET /metrics: Prometheus text format, from counters and the live sessions at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from server.session import Session
    from server.stream.playout import PlayoutStats


class Metrics:
    """The server's metrics registry (one per app, so tests can run several servers)."""

    def __init__(self, capacity: int, live: Callable[[], Iterable[Session]],
                 workers_ready: Callable[[], int] = lambda: 0,
                 engine_load: Callable[[], tuple[int, int] | None] = lambda: None):
        """`live`: the sessions playing now, `workers_ready`: engine workers taking sessions,
        `engine_load`: a Ray cluster's sessions (every front end's) and capacity; each read at
        each scrape."""
        self.registry = CollectorRegistry()
        self.sessions_created = Counter("avatar_sessions_created", "Sessions admitted", registry=self.registry)
        self.sessions_rejected = Counter("avatar_sessions_rejected", "Sessions refused at capacity",
                                         registry=self.registry)
        self.interrupts = Counter("avatar_interrupts", "Utterances interrupted", registry=self.registry)
        self.worker_restarts = Counter("avatar_worker_restarts", "Engine workers restarted after dying",
                                       registry=self.registry)
        self.ttff = Histogram("avatar_time_to_first_frame_seconds", "Session start to first frame sent",
                              buckets=(0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 5), registry=self.registry)
        self.closed_frames = {"played": 0, "held": 0, "skipped": 0}  # of sessions that have ended
        self.workers_ready, self.engine_load = workers_ready, engine_load
        self.registry.register(_LiveCollector(capacity, live, self))

    def session_closed(self, stats: PlayoutStats) -> None:
        for key in self.closed_frames:
            self.closed_frames[key] += getattr(stats, key)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _LiveCollector:
    def __init__(self, capacity: int, live: Callable[[], Iterable[Session]], metrics: Metrics):
        self.capacity, self.live, self.metrics = capacity, live, metrics

    def collect(self) -> Iterator[Any]:
        sessions = list(self.live())
        yield GaugeMetricFamily("avatar_sessions", "Live sessions", value=len(sessions))
        yield GaugeMetricFamily("avatar_sessions_capacity", "Sessions admitted at most", value=self.capacity)
        yield GaugeMetricFamily("avatar_engine_workers_ready", "Engine workers (or Ray actors) taking sessions",
                                value=self.metrics.workers_ready())
        cluster = self.metrics.engine_load()
        if cluster:
            yield GaugeMetricFamily("avatar_engine_sessions", "Sessions on the engine cluster, from every front end",
                                    value=cluster[0])
            yield GaugeMetricFamily("avatar_engine_capacity", "Sessions the engine cluster's ready actors take",
                                    value=cluster[1])
        # Summaries over the live sessions, never one series per session: ids are secrets
        # that protect a session when no token is set, and per-id series grow without bound.
        fps = [s.monitor.fps for s in sessions] or [0.0]
        fresh = [s.monitor.fresh_fps for s in sessions] or [0.0]
        yield GaugeMetricFamily("avatar_session_fps_min", "Lowest frames per second sent by a live session",
                                value=min(fps))
        yield GaugeMetricFamily("avatar_session_fps_mean", "Mean frames per second sent by live sessions",
                                value=sum(fps) / len(fps))
        yield GaugeMetricFamily("avatar_session_fresh_fps_min", "Lowest newly rendered frames per second "
                                "of a live session", value=min(fresh))
        yield GaugeMetricFamily("avatar_session_queue_frames_max", "Most rendered frames waiting for playout "
                                "in a live session", value=max([s.playout.buffered for s in sessions] or [0]))
        for key, help_text in (("played", "Frames played"), ("held", "Ticks with no fresh frame (engine late)"),
                               ("skipped", "Frames skipped because a sender fell behind the clock")):
            live = sum(getattr(s.playout.stats, key) for s in sessions)
            yield CounterMetricFamily(f"avatar_frames_{key}", help_text, value=self.metrics.closed_frames[key] + live)
