"""Server configuration: one frozen dataclass, read once.

Precedence, lowest first: defaults, the TOML file (`--config`, a `[server]` table or
top-level keys), `AVATAR_<FIELD>` environment variables, command-line options.
Unknown keys and unparsable values are errors that name the key, not silent defaults.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from engine.config import FAMILIES, MOTION_MODELS, EngineConfig, nvidia_gpus
from engine.facade import DEFAULT_AVATAR, MODEL_LAYOUT, missing_parts
from server.publish.targets import Listed

PHOTOS_ONLY = "this server's latent family takes photo avatars only"
MIN_FRAME, MAX_FRAME = 128, 3840  # a streamed frame's sides, in pixels


def _default_workers() -> int:
    """One per NVIDIA GPU, else 1."""
    return max(1, nvidia_gpus())


def _default_max_sessions() -> int:
    """The CPU count; 4 per GPU.

    On a CPU one 512x512 session costs about two thirds of a core (renderer, encoder, RTP;
    bench/load.py measures it); on GPUs, four per device until measured otherwise."""
    gpus = nvidia_gpus()
    return 4 * gpus if gpus else max(1, os.cpu_count() or 1)


def _cores() -> int:
    return os.cpu_count() or 1


def _default_max_viewers() -> int:
    """8 per core.

    bench/viewers.py: an added viewer costs the server +4.4 % of a core (its Opus, RTP and
    DTLS); with the players on the same 2 cores, 25 viewers fell to 21.5 fps and 10 held 25.1.
    Eight a core keeps 25 fps with room for the sessions themselves."""
    return 8 * _cores()


def _default_max_broadcasts() -> int:
    """1 per core.

    A broadcast is one more x264 + AAC encode in a publisher process of its own:
    bench/broadcast.py measured +31 % of a core beside +63 % for a second session. One per
    core leaves room for the sessions being broadcast."""
    return _cores()


ENGINES = ("local", "ray")


class ConfigError(ValueError):
    """A configuration value is missing, unknown or malformed."""


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    """Address to listen on (also --host); 0.0.0.0 for every interface."""
    port: int = 8080
    """Port to listen on (also --port)."""
    avatar: Path = DEFAULT_AVATAR
    """Portrait or clip used when a session names no avatar (also --avatar); the bundled face by default."""
    workers: int = field(default_factory=_default_workers)
    """Engine worker processes (with engine = "ray": actors, one CPU core each)."""
    engine: str = "local"
    """Where the engine workers run: "local" (processes of this server) or "ray" (actors on a Ray cluster)."""
    ray_address: str = ""
    """The Ray cluster (host:port of its head, as `ray start --head` prints) for engine = "ray"."""
    ray_worker_cpus: float = 1.0
    """CPU cores each Ray engine actor reserves."""
    ray_worker_gpus: float = 0.0
    """GPUs each Ray engine actor reserves: 1 places one actor per GPU, on the GPU nodes only."""
    sessions_per_worker: int = 2
    """Sessions one Ray engine actor takes (bench/load.py: one core holds two at 25 fps). The
    cluster's capacity is this times its ready actors; a full cluster answers 503 at_capacity."""
    ice_servers: tuple[str, ...] = ()
    """STUN/TURN URLs. Empty by default: an unreachable server stalls ICE gathering for 5 s."""
    ice_username: str = ""
    """Username for the TURN servers in ice_servers."""
    ice_credential: str = ""
    """Credential for the TURN servers in ice_servers."""
    max_sessions: int = field(default_factory=_default_max_sessions)
    """Sessions admitted at once; more get 503 with Retry-After, admitted ones are unaffected."""
    max_sessions_per_client: int = 0
    """Sessions one client address may hold at once (0: no per-address limit)."""
    max_queued_utterances: int = 16
    """Utterances a session may have waiting to be spoken; more speak requests get 429."""
    max_avatars: int = 100
    """Uploaded avatars kept; more uploads get 409 until some are deleted."""
    token: str = ""
    """When set, the API, WebSockets and WHEP need `Authorization: Bearer <token>` (or `?token=`)."""
    allowed_origins: tuple[str, ...] = ()
    """Origins of other sites whose pages may use the API (CORS); `*` allows any. Same-origin always
    works; other pages get `origin_not_allowed`."""
    allowed_hosts: tuple[str, ...] = ()
    """Names this server is reached by (the `Host` header), besides IP addresses and `localhost`;
    `*` allows any. Other names get 421: a DNS-rebinding page cannot pass for our own."""
    broadcast_targets: tuple[str, ...] = ()
    """Ingest hosts a session may be broadcast to (`host` or `host:port`). Empty: broadcast is off
    (403 broadcast_disabled). Loopback, private and link-local addresses only where listed as such."""
    max_broadcasts: int = field(default_factory=_default_max_broadcasts)
    """Broadcasts running at once on this server; more get 429."""
    max_broadcasts_per_client: int = 1
    """Broadcasts one client address may run at once."""
    max_viewers: int = field(default_factory=_default_max_viewers)
    """Added viewers (POST .../viewers) of one session; more get 429."""
    lead_frames: int = 4
    """Frames rendered ahead of playout; adds lead x 40 ms of latency and absorbs render jitter."""
    video_bitrate: int = 1_200_000
    """Highest H.264 bitrate; each viewer's BitrateControl lowers it on a narrow or lossy link."""
    avatars_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "avatar-server" / "avatars")
    """Where uploaded and --avatar portraits are kept, prepared and analysed."""
    mirror_echo: int = 1
    """Mirror mode: 1 plays the user's voice back with the face, 0 sends silence instead."""
    llm_base_url: str = ""
    """Chat mode's OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 (Ollama)."""
    llm_model: str = ""
    """The model chat mode asks llm_base_url for."""
    llm_api_key: str = ""
    """Sent as `Authorization: Bearer` to llm_base_url when set."""
    tts_voice: str = ""
    """Piper voice model (.onnx); empty means the bundled joe-us voice."""
    motion_model: str = "dit"
    """Audio-to-motion: "dit" (the trained MotionDiT) or "interim" (the hand-set loudness mapping)."""
    family: str = "cpu"
    """Who makes the face: "cpu" (a photo's rig or a person's clip, drawn on a CPU) or "latent"
    (SoulX-FlashHead generates it on a GPU; photo avatars only; needs model_dir)."""
    model_dir: str = ""
    """The latent family's downloaded checkpoints (the layout: docs/latent.md)."""
    offload: int = 0
    """Latent family: 1 keeps the DiT's blocks in host memory and streams them to the GPU one by one."""
    dit_gpus: int = 1
    """Latent family: GPUs one worker's DiT runs across, sequence parallel (a chunk's tokens split
    between them); workers x dit_gpus must not exceed the GPUs. 1: each GPU runs its own worker."""
    frame: str = ""
    """Latent family: the streamed frames, WIDTHxHEIGHT (e.g. 1280x720), the generated 512x512 head
    pasted into the photo's surroundings; empty: the head alone, 512x512."""

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ConfigError(f"setting 'engine' must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.engine == "ray" and not self.ray_address:
            raise ConfigError("engine = ray needs the cluster's address: set 'ray_address' (AVATAR_RAY_ADDRESS, "
                              "--ray-address) to the head's host:port")
        if self.ray_worker_cpus < 0 or self.ray_worker_gpus < 0 or self.sessions_per_worker < 1:
            raise ConfigError("settings 'ray_worker_cpus' and 'ray_worker_gpus' must be >= 0 and "
                              "'sessions_per_worker' >= 1")
        if min(self.max_broadcasts, self.max_broadcasts_per_client, self.max_viewers) < 0:
            raise ConfigError("settings 'max_broadcasts', 'max_broadcasts_per_client' and 'max_viewers' must be >= 0")
        for entry in self.broadcast_targets:
            try:
                Listed.parse(entry)
            except ValueError as exc:
                raise ConfigError(f"setting 'broadcast_targets': {exc}") from None
        self._check_family()
        self._check_frame()
        self._check_dit_gpus()
        if self.motion_model not in MOTION_MODELS:
            raise ConfigError(f"setting 'motion_model' must be one of {', '.join(MOTION_MODELS)}, "
                              f"got {self.motion_model!r}")

    @property
    def photos_only(self) -> bool:
        """The latent family draws from a photo: clips are refused at upload, at a session's
        start and as --avatar (PHOTOS_ONLY says why)."""
        return self.family == "latent"

    def _check_family(self) -> None:
        if self.family not in FAMILIES:
            raise ConfigError(f"setting 'family' must be one of {', '.join(FAMILIES)}, got {self.family!r}")
        if self.family != "latent":
            return
        if not self.model_dir:
            raise ConfigError("family = latent needs 'model_dir' (AVATAR_MODEL_DIR, --model-dir): the folder the "
                              "checkpoints were downloaded to")
        missing = missing_parts(Path(self.model_dir))
        if missing:
            raise ConfigError(f"model_dir lacks {', '.join(missing)}; expected:\n{MODEL_LAYOUT}")

    @property
    def frame_size(self) -> tuple[int, int] | None:
        """`frame` as (width, height); None for the square head alone."""
        if not self.frame:
            return None
        width, _, height = self.frame.lower().partition("x")
        return int(width), int(height)

    def engine_settings(self, base: EngineConfig) -> EngineConfig:
        """The engine's settings that this server's decide (the rest stay `base`'s): the one
        place where a server setting becomes an engine one, under the engine's name."""
        sized = {"width": self.frame_size[0], "height": self.frame_size[1]} if self.frame_size else {}
        return replace(base, preload_avatar=str(self.avatar), motion=self.motion_model, family=self.family,
                       model_dir=self.model_dir, offload=bool(self.offload), dit_gpus=self.dit_gpus, **sized)

    def _check_dit_gpus(self) -> None:
        if self.dit_gpus == 1:
            return
        if self.dit_gpus < 1 or self.family != "latent" or self.offload or self.engine == "ray":
            raise ConfigError("setting 'dit_gpus' must be 1, or more with family = latent, without offload (a DiT "
                              f"split over GPUs needs none) and on local workers (a Ray actor has one GPU); "
                              f"got {self.dit_gpus}")
        gpus = nvidia_gpus()  # none: the ranks are CPU processes (what the tests run)
        if gpus and self.workers * self.dit_gpus > gpus:
            raise ConfigError(f"{self.workers} workers x dit_gpus {self.dit_gpus} is more than this machine's "
                              f"{gpus} GPUs; set workers = {max(1, gpus // self.dit_gpus)}")

    def _check_frame(self) -> None:
        if not self.frame:
            return
        shape = "setting 'frame' must be WIDTHxHEIGHT in even pixels, e.g. 1280x720"
        try:
            width, height = self.frame_size or (0, 0)
        except ValueError:
            raise ConfigError(f"{shape}, got {self.frame!r}") from None
        if width % 2 or height % 2 or not (MIN_FRAME <= min(width, height) <= max(width, height) <= MAX_FRAME):
            raise ConfigError(f"{shape}, each side {MIN_FRAME}-{MAX_FRAME}; got {self.frame!r}")
        if max(width, height) > 4 * min(width, height):
            raise ConfigError(f"setting 'frame': {self.frame} is narrower than 4:1")
        if self.family != "latent":
            raise ConfigError("setting 'frame' needs family = latent: the CPU families stream the square head "
                              "they draw")

    @classmethod
    def load(cls, file: Path | None = None, env: dict[str, str] | None = None, **overrides: Any) -> ServerConfig:
        values = _from_toml(file) if file else {}
        env = dict(os.environ if env is None else env)
        for f in fields(cls):
            raw = env.get(f"AVATAR_{f.name.upper()}")
            if raw is not None:
                values[f.name] = _parse(f.name, str(f.type), raw)  # a string: annotations are postponed
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _from_toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    data = data.get("server", data)
    known = {f.name: str(f.type) for f in fields(ServerConfig)}
    out = {}
    for key, value in data.items():
        if key not in known:
            raise ConfigError(f"{path}: unknown setting '{key}' (known: {', '.join(sorted(known))})")
        out[key] = _parse(key, known[key], value) if isinstance(value, str) else _coerce(key, known[key], value)
    return out


def _coerce(name: str, kind: str, value: Any) -> Any:
    if kind.startswith("tuple") and isinstance(value, list):
        return tuple(str(v) for v in value)
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "int" and isinstance(value, bool):
        return int(value)
    if kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ConfigError(f"setting '{name}' must be {kind}, got {value!r}")


def _parse(name: str, kind: str, raw: str) -> Any:
    try:
        if kind in ("int", "float"):
            return int(raw) if kind == "int" else float(raw)
    except ValueError:
        raise ConfigError(f"setting '{name}' must be {'an integer' if kind == 'int' else 'a number'}, "
                          f"got {raw!r}") from None
    if kind == "Path":
        return Path(raw).expanduser()
    if kind.startswith("tuple"):
        return tuple(s.strip() for s in raw.split(",") if s.strip())
    return raw
