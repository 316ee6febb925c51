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
    "media": ("server", "engine", "speech", "avatar_client", "testkit", "training", "bench", "tests", "torch"),
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


def test_the_server_knows_the_families_only_through_the_facade():
    """engine/facade.py is what the server may know of the model families (avatar files,
    layouts, error codes): their insides move without touching the server."""
    wrong = {str(path.relative_to(ROOT)): sorted(m for m in modules(path) if m.startswith("engine.families"))
             for path in (ROOT / "server").rglob("*.py")}
    assert not {path: names for path, names in wrong.items() if names}


@pytest.mark.parametrize("lower,upper", [("stream", "server.voice"), ("engines", "server.stream")])
def test_server_parts_do_not_reach_up(lower, upper):
    """Voice queues audio for the stream to play and never the other way; the engines render
    for the stream and follow a BitrateControl (server/bitrate.py), never the stream itself."""
    wrong = {str(path.relative_to(ROOT)): sorted(m for m in modules(path) if m.startswith(upper))
             for path in (ROOT / "server" / lower).rglob("*.py")}
    assert not {path: names for path, names in wrong.items() if names}


FAMILIES_NEVER = ("engine.stages", "engine.batch", "engine.runtime", "engine.assembly")


def test_families_do_not_run_pipelines():
    """A family is models and renderers; what runs them (stages, batch, runtime, assembly) is
    above it, so preparing a video avatar is handed the motion it needs (adapt.Drive)."""
    wrong = {str(path.relative_to(ROOT)): sorted(m for m in modules(path) if m.startswith(FAMILIES_NEVER))
             for path in (ROOT / "engine" / "families").rglob("*.py")}
    assert not {path: names for path, names in wrong.items() if names}


def module_graph(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports (lazily too; `from a import b` counts as
    a.b when b is a module, relative imports resolved)."""
    files = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
             for pkg in packages for p in (ROOT / pkg).rglob("*.py")}
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]) if node.level else ""
                module = ".".join(filter(None, [base, node.module or ""]))
                found |= {module} | {f"{module}.{alias.name}" for alias in node.names}
        graph[name] = {m for m in found if m in files and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(group) > 1:
                out.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_in_engine_or_server():
    graph = module_graph(("engine", "server", "media"))
    assert len(graph) > 80 and sum(map(len, graph.values())) > 200  # the graph was read
    assert cycles(graph) == []


def sub_packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded onto sub-packages (server.stream, engine.families, ...); a
    top-level module (server.session, engine.config) stays itself."""
    def fold(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:2]) if (ROOT.joinpath(*parts[:2])).is_dir() else module

    folded: dict[str, set[str]] = {}
    for module, targets in graph.items():
        folded.setdefault(fold(module), set()).update(fold(t) for t in targets)
    return {k: {t for t in v if t != k and (ROOT.joinpath(*t.split(".")[:2])).is_dir()} for k, v in folded.items()
            if (ROOT.joinpath(*k.split(".")[:2])).is_dir()}


def test_no_import_cycles_between_sub_packages():
    """stream/voice/engines/publish/routes in server/, core/families/stages/runtime/batch/accel in
    engine/: each sub-package depends on others one way only."""
    folded = sub_packages(module_graph(("engine", "server")))
    assert {"server.stream", "server.voice", "engine.families", "engine.stages"} <= folded.keys()
    assert cycles(folded) == []


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("package", ["engine", "server", "speech", "media"])
def test_functions_and_modules_stay_short(package):
    """Small files with one owner, functions that read at a glance (docs/architecture.md)."""
    long = []
    for path in (ROOT / package).rglob("*.py"):
        tree = ast.parse(source := path.read_text())
        if source.count("\n") > 400:
            long.append(f"{path.relative_to(ROOT)}: {source.count(chr(10))} lines")
        long += [f"{path.relative_to(ROOT)}:{f.name}: {f.end_lineno - f.lineno + 1} lines" for f in ast.walk(tree)
                 if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.end_lineno - f.lineno + 1 > 50]
    assert not long
