"""Configuration: TOML file, AVATAR_* variables over it, options over both; clear errors."""

from pathlib import Path

import pytest

from server.config import ConfigError, ServerConfig

pytestmark = pytest.mark.unit


def test_precedence_file_then_environment_then_options(tmp_path: Path):
    file = tmp_path / "avatar.toml"
    file.write_text('[server]\nport = 9000\nmax_sessions = 3\nice_servers = ["turn:a:3478"]\ntoken = "t"\n')
    config = ServerConfig.load(file, env={"AVATAR_MAX_SESSIONS": "5"}, host="0.0.0.0")
    assert (config.port, config.max_sessions, config.host, config.token) == (9000, 5, "0.0.0.0", "t")
    assert config.ice_servers == ("turn:a:3478",)
    assert ServerConfig.load(None, env={"AVATAR_ICE_SERVERS": "stun:x, turn:y"}).ice_servers == ("stun:x", "turn:y")


@pytest.mark.parametrize("text,message", [
    ("porrt = 1\n", "unknown setting 'porrt'"),
    ("port = 'eighty'\n", "must be an integer"),
    ("port = [1]\n", "must be int"),
    ("port = \n", "cannot read config file"),
])
def test_bad_files_name_the_problem(tmp_path: Path, text: str, message: str):
    file = tmp_path / "bad.toml"
    file.write_text(text)
    with pytest.raises(ConfigError, match=message):
        ServerConfig.load(file, env={})


def test_bad_environment_value_is_an_error():
    with pytest.raises(ConfigError, match="AVATAR_PORT|'port'"):
        ServerConfig.load(None, env={"AVATAR_PORT": "x"})


def test_unknown_motion_model_is_an_error():
    with pytest.raises(ConfigError, match="motion_model.*dit, interim"):
        ServerConfig.load(None, env={"AVATAR_MOTION_MODEL": "magic"})
    assert ServerConfig.load(None, env={"AVATAR_MOTION_MODEL": "interim"}).motion_model == "interim"


def test_defaults_are_safe_for_local_use():
    config = ServerConfig.load(None, env={})
    assert config.host == "127.0.0.1" and config.ice_servers == () and config.token == ""
    assert config.max_sessions >= 1 and config.allowed_origins == ()


def test_ray_actor_resources_are_numbers_and_a_worker_takes_at_least_one_session(tmp_path: Path):
    file = tmp_path / "ray.toml"
    file.write_text('engine = "ray"\nray_address = "head:6379"\nray_worker_gpus = 1\nsessions_per_worker = 4\n')
    config = ServerConfig.load(file, env={"AVATAR_RAY_WORKER_CPUS": "0.5"})
    assert (config.ray_worker_cpus, config.ray_worker_gpus, config.sessions_per_worker) == (0.5, 1.0, 4)
    with pytest.raises(ConfigError, match="'ray_worker_gpus' must be a number"):
        ServerConfig.load(None, env={"AVATAR_RAY_WORKER_GPUS": "one"})
    with pytest.raises(ConfigError, match="'sessions_per_worker' >= 1"):
        ServerConfig.load(None, env={"AVATAR_SESSIONS_PER_WORKER": "0"})


def test_the_configuration_page_is_written_from_the_settings_docstrings():
    """docs/configuration.md's table is ServerConfig's fields and docstrings, every one of them
    documented; a field added without rerunning `python -m server.config_docs` fails here."""
    from dataclasses import fields

    from server import config_docs
    from server.config import ServerConfig

    documented = config_docs.settings()
    assert [name for name, _, _ in documented] == [f.name for f in fields(ServerConfig)]
    assert [name for name, _, doc in documented if not doc] == []
    page = config_docs.PAGE.read_text()
    assert config_docs.rewritten(page) == page, "stale: run python -m server.config_docs"


def test_both_commands_print_the_packages_one_version():
    """pyproject.toml is the version's one source; the installed commands read it back."""
    import subprocess
    import sys
    import tomllib

    root = Path(__file__).resolve().parents[2]
    want = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    for command in ("avatar-server", "avatar-render"):
        out = subprocess.run([str(Path(sys.executable).with_name(command)), "--version"], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == f"{command} {want}", out
