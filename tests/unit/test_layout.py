"""The layout's rules of dependency: data flows one way (see docs/architecture.md)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {  # package -> what it may never import
    "engine": ("server", "tests", "bench", "training"),
    "training": ("server", "tests", "bench"),
    "speech": ("server", "engine", "torch", "tests"),
    "avatar_client": ("server", "engine", "torch", "tests"),
    "testkit": ("tests", "bench"),
    "bench": ("tests",),
    "server": ("tests", "bench", "training"),
}


def imported(path: Path) -> set[str]:
    """Top-level packages a file imports, lazily inside functions too."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_flow_one_way(package):
    wrong = {str(path.relative_to(ROOT)): sorted(imported(path) & set(FORBIDDEN[package]))
             for path in (ROOT / package).rglob("*.py")}
    assert not {path: names for path, names in wrong.items() if names}


CORE_NEVER = ("engine.families", "engine.stages", "engine.batch", "engine.runtime", "engine.assembly")


def modules(path: Path) -> set[str]:
    """Full module names a file imports, lazily inside functions too."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_engine_core_is_the_ground_floor():
    """Core holds the contracts (Module, Stage, Pipeline, RollingState, chunks); the families,
    stages and assembly build on it, so a new family lands without touching core."""
    wrong = {str(path.relative_to(ROOT)): sorted(m for m in modules(path) if m.startswith(CORE_NEVER))
             for path in (ROOT / "engine" / "core").rglob("*.py")}
    assert not {path: names for path, names in wrong.items() if names}
