"""`avatar-server` / `python -m server`: serve the demo page, the JS client and the API."""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from engine.config import FAMILIES
from engine.facade import CLIP_UPLOAD_SUFFIXES as VIDEO_SUFFIXES
from engine.version import package_version
from server.app import create_app
from server.config import PHOTOS_ONLY, ConfigError, ServerConfig
from server.engines.client import EngineUnavailable

# A connection that has not completed a request's headers this long after it opened
# (or after its last response) is closed: slow or stalled clients hold no sockets.
IDLE_TIMEOUT_S = 10.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="avatar-server", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument("--host", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default 8080)")
    parser.add_argument("--avatar", type=Path, help="portrait photo or video clip (MP4/MOV/WebM) of the person "
                        "for the default avatar")
    parser.add_argument("--engine", choices=("local", "ray"), help="where engine workers run (default local)")
    parser.add_argument("--ray-address", help="the Ray cluster's head, host:port (with --engine ray)")
    parser.add_argument("--family", choices=FAMILIES,
                        help="who makes the face: cpu (default) or latent (SoulX-FlashHead on a GPU)")
    parser.add_argument("--model-dir", help="the latent family's downloaded checkpoints (layout: docs/latent.md)")
    parser.add_argument("--offload", action="store_const", const=1,
                        help="latent family: stream the DiT's blocks to the GPU one by one (a 24 GB card)")
    parser.add_argument("--frame", help="latent family: stream WIDTHxHEIGHT (e.g. 1280x720), the head pasted "
                        "into the photo's surroundings (default: the 512x512 head alone)")
    parser.add_argument("--config", type=Path,
                        help="TOML file of settings (see docs/configuration.md); AVATAR_* variables override it")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        config = ServerConfig.load(args.config, host=args.host, port=args.port, engine=args.engine,
                                   ray_address=args.ray_address, family=args.family, model_dir=args.model_dir,
                                   offload=args.offload, frame=args.frame)
    except ConfigError as exc:
        raise SystemExit(f"avatar-server: {exc}") from None
    if args.avatar and config.photos_only and args.avatar.suffix.lower() in VIDEO_SUFFIXES:
        raise SystemExit(f"avatar-server: {args.avatar}: {PHOTOS_ONLY}")
    if args.avatar:
        config = replace(config, avatar=_prepare_avatar(args.avatar, config.avatars_dir))
    try:
        web.run_app(create_app(config), host=config.host, port=config.port, print=None,
                    access_log_class=PathOnlyAccessLogger, keepalive_timeout=IDLE_TIMEOUT_S)
    except EngineUnavailable as exc:  # e.g. a model folder whose weights cannot be read
        raise SystemExit(f"avatar-server: {exc}") from None


class PathOnlyAccessLogger(AbstractAccessLogger):
    """Access lines without query strings: `?token=` must never reach a log file."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info('%s "%s %s" %s %.1f ms', request.remote, request.method, request.path,
                         response.status, time * 1000)


def _prepare_avatar(path: Path, folder: Path) -> Path:
    """Prepare a user's photo or clip once (before the server starts); the prepared file is
    what workers load. This process never imports torch: preparation needs numpy and mediapipe."""
    from engine.assembly import prepare_file

    try:
        return prepare_file(path, folder)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"avatar-server: {path}: {exc}") from None


if __name__ == "__main__":
    main()
