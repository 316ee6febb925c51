"""docs/api.md as data, and the codes the server's source can send, to hold one against the other.

The document's tables are read by their headings: "Error codes" (code, HTTP status or
`event`), "Events" (type, fields), "Broadcast error reasons" and "Metrics" (names). The source is read
with `ast`: every literal code an `ApiError` (or TargetRefused), an engine, clip or WHIP error,
an `error` event or a session failure can carry.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
API_DOC = ROOT / "docs" / "api.md"
SOURCES = ("server", "engine/families/video", "engine/runtime", "engine/facade.py")
COMMON = {"type", "session_id", "t"}  # every event's
SECTIONS = ("error codes", "events", "broadcast error reasons", "metrics")
_TICKED = re.compile(r"`([a-z_0-9]+)(\??)`")
CODED = {"EngineError": "event", "EngineUnavailable": "event", "SessionErrorEvent": "event", "ClipError": "422",
         "fail": "event", "_refuse": "event"}  # the call -> what its first literal is
KEYWORDED = {"emit": "event", "event": "event", "read_body": "413", "parse_json": "400"}  # code=... of these
REASONS = {"WhipError", "PublishFailed"}


@dataclass
class Contract:
    codes: dict[str, set[str]] = field(default_factory=dict)  # code -> {"400", ..., "event"}
    events: dict[str, tuple[set[str], set[str]]] = field(default_factory=dict)  # type -> (always, optional)
    reasons: set[str] = field(default_factory=set)
    metrics: set[str] = field(default_factory=set)


def read_contract(path: Path = API_DOC) -> Contract:
    contract, section = Contract(), ""
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            section = line.lstrip("# ").split("(")[0].strip().lower()
        elif line.startswith("| `") and section in SECTIONS:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            names = [n for n, _ in _TICKED.findall(cells[0])]
            if section == "error codes":
                for name in names:
                    contract.codes.setdefault(name, set()).update(s.strip("` ") for s in cells[1].split(","))
            elif section == "events":
                ticked = _TICKED.findall(cells[1])
                always = {n for n, optional in ticked if not optional}
                for name in names:
                    contract.events[name] = (always, {n for n, optional in ticked if optional})
            elif section == "metrics":
                contract.metrics.update(names)
            else:
                contract.reasons.update(names)
    return contract


def event_problems(event: dict, contract: Contract) -> list[str]:
    """What in one event the document does not say: its type, a field it lacks or one it has extra."""
    kind = event.get("type")
    if kind not in contract.events:
        return [f"event type {kind!r} is not in docs/api.md"]
    always, optional = contract.events[kind]
    missing = (always | COMMON) - set(event)
    extra = set(event) - always - optional - COMMON
    return [f"{kind}: documented field {name!r} missing" for name in sorted(missing)] + \
        [f"{kind}: field {name!r} is not in docs/api.md" for name in sorted(extra)]


def source_codes(roots: tuple[Path, ...] | None = None) -> tuple[set[tuple[str, str]], set[str]]:
    """(code, status or "event") pairs and broadcast reasons the source can send."""
    codes: set[tuple[str, str]] = set()
    reasons: set[str] = set()
    for root in roots or tuple(ROOT / s for s in SOURCES):
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                _collect(node, codes, reasons)
    return codes, reasons


def _collect(node: ast.AST, codes: set[tuple[str, str]], reasons: set[str]) -> None:
    if isinstance(node, ast.Call):
        _call(node, codes, reasons)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in KEYWORDED:  # a default code=
        named = dict(zip([a.arg for a in node.args.args][-len(node.args.defaults):], node.args.defaults))
        if isinstance(default := named.get("code"), ast.Constant):
            codes.add((str(default.value), KEYWORDED[node.name]))
    elif isinstance(node, ast.FunctionDef) and node.name.endswith("_code"):  # failure_code: codes it returns
        codes.update((str(c.value), "event") for n in ast.walk(node) if isinstance(n, ast.Return)
                     for c in ast.walk(n) if isinstance(c, ast.Constant) and isinstance(c.value, str))
    elif isinstance(node, ast.FunctionDef) and (node.name == "reason" or node.name.endswith("_reason")):
        reasons.update(str(n.value.value) for n in ast.walk(node)
                       if isinstance(n, ast.Return) and isinstance(n.value, ast.Constant))
    elif isinstance(node, ast.Dict) and node.keys and all(isinstance(k, ast.Attribute) for k in node.keys):
        reasons.update(str(v.value) for v in node.values if isinstance(v, ast.Constant))  # errno -> reason
    elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "code" for t in node.targets):
        value = node.value
        options = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
        codes.update((str(o.value), "event") for o in options if isinstance(o, ast.Constant))


def _call(node: ast.Call, codes: set[tuple[str, str]], reasons: set[str]) -> None:
    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
    literals = [a.value for a in node.args if isinstance(a, ast.Constant)]
    text = [v for v in literals if isinstance(v, str)]
    status, code = (node.args + [ast.expr(), ast.expr()])[:2]
    if name == "ApiError" and isinstance(status, ast.Constant) and isinstance(code, ast.Constant):
        codes.add((str(code.value), str(status.value)))  # ApiError(status, code, message)
    elif name == "TargetRefused":
        codes.add(("target_not_allowed", "403"))
    elif name in CODED and text:
        codes.add((text[0], CODED[name]))
    elif name in REASONS and text:
        reasons.add(text[0])
    for keyword in node.keywords:
        if keyword.arg == "code" and isinstance(keyword.value, ast.Constant) and name in KEYWORDED:
            codes.add((str(keyword.value.value), KEYWORDED[name]))


def undocumented_codes(contract: Contract, roots: tuple[Path, ...] | None = None) -> list[str]:
    """Every code the source can send that docs/api.md lacks (or lists under another status)."""
    codes, reasons = source_codes(roots)
    out = [f"{code} ({status})" for code, status in sorted(codes) if status not in contract.codes.get(code, set())]
    return out + [f"broadcast reason {r}" for r in sorted(reasons - contract.reasons)]


def undocumented_metrics(exposition: str, contract: Contract) -> list[str]:
    """Metric families in a /metrics page that docs/api.md does not name (a counter's or a
    histogram's `_created` gauge goes with its family)."""
    families = {line.split()[2] for line in exposition.splitlines() if line.startswith("# TYPE ")}
    named = contract.metrics | {m.removesuffix("_total") + "_created" for m in contract.metrics}
    return sorted(families - named)
