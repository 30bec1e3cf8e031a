"""Which package may import which, and inside nkisim which module may import which
(docs/architecture.md draws both pictures). Every import statement of every module, at any depth
(a function's lazy import too), is read with ast and checked against the tables; a new import
against the direction fails here with its file and line.

    service ──> web ──> workers ──> store ──> grader ──> reference_kernels ──> nkisim
    (each may also import anything to its right; nothing imports service)

Inside nkisim, layers from the bottom (NKISIM_LAYERS): base, machine model, instruction table and
tracing, programs, runtime, the two front ends, composition.
"""
from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# package -> the project's packages it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "nkisim": set(),                                  # the simulator knows no kernels, no grader
    "student_template": set(),                        # what students start from: NKI and NumPy only
    "reference_kernels": {"nkisim"},                  # reference_kernels.demo composes the `nkisim` command
    "grader": {"nkisim", "reference_kernels"},        # the grading core: never the service around it
    "store": {"grader"},
    "workers": {"store", "grader", "reference_kernels", "nkisim"},
    "web": {"workers", "store", "grader", "nkisim"},
    "service": {"web", "workers", "store", "grader", "reference_kernels", "nkisim"},   # the composition root
}
OURS = set(ALLOWED)


def imports_of(path: Path, package: str) -> list[tuple[str, int]]:
    """(top-level package of ours, line) for every import in the module, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [package if node.level else (node.module or "")]      # relative: within the package
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in OURS:
                found.append((top, node.lineno))
    return found


def modules():
    for package in sorted(ALLOWED):
        for path in sorted((ROOT / package).rglob("*.py")):
            yield package, path


def violations() -> list[str]:
    bad = []
    for package, path in modules():
        for top, line in imports_of(path, package):
            if top != package and top not in ALLOWED[package]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {top} ({package} may import: "
                           f"{', '.join(sorted(ALLOWED[package])) or 'nothing of ours'})")
    return bad


def test_every_package_of_ours_is_in_the_table():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench", "docs"}
    assert packages == OURS, "add the new package to ALLOWED (and to docs/architecture.md)"


def test_imports_follow_the_layers():
    assert violations() == []


def test_the_table_has_no_cycle():
    def reaches(start: str, seen: frozenset = frozenset()) -> set[str]:
        out = set()
        for nxt in ALLOWED[start]:
            if nxt in seen:
                raise AssertionError(f"cycle through {nxt}")
            out |= {nxt} | reaches(nxt, seen | {start})
        return out
    for package in ALLOWED:
        assert package not in reaches(package)


@pytest.mark.parametrize("source, package, expected", [
    ("import web.auth\n", "workers", ["web"]),
    ("def f():\n    from store.models import User\n", "grader", ["store"]),     # a lazy import counts too
    ("from . import x\nfrom .y import z\n", "nkisim", ["nkisim", "nkisim"]),
    ("import numpy\nfrom sqlalchemy import text\n", "store", []),
])
def test_the_checker_sees_every_import_form(tmp_path, source, package, expected):
    module = tmp_path / "m.py"
    module.write_text(source)
    assert [top for top, _ in imports_of(module, package)] == expected


def test_no_package_discovers_its_own_parts_through_entry_points():
    """Commands are composed by name in service/cli.py (and reference_kernels/demo.py)."""
    found = []
    for package, path in modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "entry_points":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


# ----- inside nkisim --------------------------------------------------------------------------------

# nkisim's modules by layer, bottom first, named relative to the package ("cost.*" is every module
# under nkisim/cost/, "cost" its __init__; "__init__" is nkisim itself). A module may import its
# own layer and the ones below it, never one above; docs/architecture.md says why each is where it is.
NKISIM_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("errors", "source", "dtypes", "trace", "collector", "limits", "dialects", "facade")),
    ("machine model", ("running", "alu", "indexing", "memory", "tensor", "platforms", "settings",
                       "direct_alloc")),
    ("instruction table and tracing", ("registry", "machine", "instructions", "instructions.*")),
    ("programs", ("kinds", "kinds.*", "program", "sequencer", "execute", "split", "forked", "products", "cost", "cost.*")),
    ("runtime", ("launch", "runtime")),
    ("front ends", ("nki", "nki.*", "nki06", "nki06.*")),
    ("composition", ("install", "cli", "__init__")),
]
# the two front ends, each a binding onto the one table: neither imports the other
FRONT_ENDS = ("nki", "nki06")
# imports inside one layer that close a cycle, each with why it is left (any other cycle fails)
CYCLES_LEFT: dict[tuple[str, str], str] = {}


def nkisim_modules(root: Path = ROOT / "nkisim") -> dict[str, Path]:
    """Every module of nkisim by its relative name ("instructions.vector"; a package by its own
    name, nkisim itself "__init__")."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        found[".".join(parts)] = path
    return found


def _absolute(module: str) -> str:
    return "nkisim" if module == "__init__" else f"nkisim.{module}"


def _relative(name: str) -> str:
    return "__init__" if name == "nkisim" else name.removeprefix("nkisim.")


def nkisim_imports_of(path: Path, module: str, known: set[str]) -> list[tuple[str, int]]:
    """(module of nkisim, line) for every import in `module` (its relative name; its file at
    `path`, a package when that is an __init__.py), relative ones resolved. An import names the
    longest module of `known` it reaches: `from . import x` and `from .. import dtypes` the
    submodule x or dtypes (the package only when there is no such module), `from .a import b`
    a, or a.b when b is a module."""
    known_absolute = {_absolute(m) for m in known}

    def longest(name: str) -> str:
        while name not in known_absolute and "." in name:
            name = name.rpartition(".")[0]
        return name

    absolute = _absolute(module)
    package = absolute if path.name == "__init__.py" else absolute.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - (node.level - 1)])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            names = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in known_absolute else source
                     for alias in node.names]
        else:
            continue
        for name in names:
            if name == "nkisim" or name.startswith("nkisim."):
                found.append((_relative(longest(name)), node.lineno))
    return found


def nkisim_graph() -> dict[str, list[tuple[str, str]]]:
    """module -> (module it imports, "file:line") for every import of every nkisim module."""
    modules = nkisim_modules()
    return {module: [(target, f"{path.relative_to(ROOT)}:{line}")
                     for target, line in nkisim_imports_of(path, module, set(modules)) if target != module]
            for module, path in modules.items()}


def layers_of(module: str) -> list[int]:
    return [i for i, (_, patterns) in enumerate(NKISIM_LAYERS)
            if any(fnmatch.fnmatchcase(module, pattern) for pattern in patterns)]


def front_end_of(module: str) -> str | None:
    top = module.split(".")[0]
    return top if top in FRONT_ENDS else None


def layer_violations(graph: dict[str, list[tuple[str, str]]]) -> list[str]:
    """Each import that goes up a layer, or from one front end into the other."""
    bad = []
    for module, imports in sorted(graph.items()):
        (mine,) = layers_of(module)
        for target, where in imports:
            (theirs,) = layers_of(target)
            if theirs > mine:
                bad.append(f"{where}: {module} ({NKISIM_LAYERS[mine][0]}) imports {target}, a layer above "
                           f"({NKISIM_LAYERS[theirs][0]}): move the code down, or have {target} register "
                           f"it with {module} at its import")
            elif front_end_of(module) and front_end_of(target) and front_end_of(module) != front_end_of(target):
                bad.append(f"{where}: front end {front_end_of(module)} imports the other front end "
                           f"({target}): both sit on the one table, put what they share below them")
    return bad


def layer_cycles(graph: dict[str, list[tuple[str, str]]], left=CYCLES_LEFT) -> list[str]:
    """Each cycle of imports among the modules of one layer (the imports named in `left` aside),
    as the file:line of every import that closes it."""
    edges: dict[str, dict[str, str]] = {m: {} for m in graph}
    for module, imports in graph.items():
        for target, where in imports:
            if layers_of(target) == layers_of(module) and (module, target) not in left:
                edges[module].setdefault(target, where)
    cycles, done = [], set()

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(edges[module]):
            if target in path:
                loop = path[path.index(target):] + [target]
                key = frozenset(loop)
                if key not in done:
                    done.add(key)
                    steps = [f"{a} -> {b} ({edges[a][b]})" for a, b in zip(loop, loop[1:])]
                    cycles.append("cycle in layer " + NKISIM_LAYERS[layers_of(module)[0]][0] + ": " +
                                  "; ".join(steps))
            elif target not in finished:
                visit(target, path + [target])
        finished.add(module)

    finished: set[str] = set()
    for module in sorted(edges):
        if module not in finished:
            visit(module, [module])
    return cycles


def test_every_nkisim_module_is_in_one_layer():
    placed = {module: [NKISIM_LAYERS[i][0] for i in layers_of(module)] for module in nkisim_modules()}
    assert {m: where for m, where in placed.items() if len(where) != 1} == {}, \
        "put each module of nkisim in exactly one layer of NKISIM_LAYERS (and in docs/architecture.md)"


def test_nkisim_imports_go_down_the_layers():
    assert layer_violations(nkisim_graph()) == []


def test_no_layer_of_nkisim_has_an_import_cycle():
    assert layer_cycles(nkisim_graph()) == []


def test_programs_are_read_beside_the_tracer():
    """Layer 4 reads a traced program without tracing: of layer 3 it takes the instruction table
    (registry, instructions), never the tracing Machine."""
    graph = nkisim_graph()
    programs = [m for m in graph if layers_of(m) == [3]]
    assert programs and [f"{where}: {m} imports machine" for m in programs
                         for target, where in graph[m] if target == "machine"] == []


def test_no_nkisim_module_hides_an_import_of_nkisim():
    """A layer is kept by moving code or by registration, never by an import the checker cannot
    read: __import__("nkisim...") or importlib.import_module("nkisim..." / ".x")."""
    found = []
    for module, path in nkisim_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                text = node.args[0].value
                if name in ("__import__", "import_module") and isinstance(text, str) and \
                        (text.startswith((".", "nkisim"))):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


@pytest.mark.parametrize("source, module, package, expected", [
    ("from .machine import Machine\n", "tensor", False, ["machine"]),
    ("def f():\n    from ..machine import current_machine\n", "instructions.common", False, ["machine"]),
    ("from . import dtypes, machine\nfrom .alu import OPS\n", "tensor", False, ["dtypes", "machine", "alu"]),
    ("from .. import dtypes\nfrom . import vector\n", "instructions.dma", False, ["dtypes", "instructions.vector"]),
    ("from . import names\nfrom .isa import x\n", "nki", True, ["nki.names", "nki.isa"]),
    ("from .. import not_a_module\n", "nki.isa", False, ["__init__"]),       # a name of the package
    ("import nkisim.instructions.vector as v\nimport nkisim\n", "cli", False, ["instructions.vector", "__init__"]),
    ("from nkisim.nki06 import isa\n", "nki.language", False, ["nki06.isa"]),
    ("import numpy\nfrom threadpoolctl import threadpool_limits\n", "runtime", False, []),
])
def test_the_nkisim_checker_sees_every_import_form(tmp_path, source, module, package, expected):
    path = tmp_path / ("__init__.py" if package else "m.py")
    path.write_text(source)
    assert [target for target, _ in nkisim_imports_of(path, module, set(nkisim_modules()))] == expected


def test_the_nkisim_checker_catches_an_upward_import_a_crossing_and_a_cycle(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def at_first_use():\n    from .instructions import language_ops\n")
    lazy_up = [(target, f"nkisim/tensor.py:{line}")
               for target, line in nkisim_imports_of(path, "tensor", set(nkisim_modules()))]
    graph = {"tensor": lazy_up, "alu": [("errors", "nkisim/alu.py:1")], "errors": [],
             "instructions.language_ops": [("tensor", "nkisim/instructions/language_ops.py:5")],
             "nki.isa": [("nki06.isa", "nkisim/nki/isa.py:3")], "nki06.isa": [],
             "memory": [("settings", "nkisim/memory.py:2")], "settings": [("memory", "nkisim/settings.py:4")]}
    bad = layer_violations(graph)
    assert len(bad) == 2
    assert bad[0].startswith("nkisim/nki/isa.py:3: front end nki imports the other front end (nki06.isa)")
    assert bad[1].startswith("nkisim/tensor.py:2: tensor (machine model) imports instructions.language_ops, "
                             "a layer above (instruction table and tracing)")
    assert layer_cycles(graph) == ["cycle in layer machine model: memory -> settings (nkisim/memory.py:2); "
                                   "settings -> memory (nkisim/settings.py:4)"]
    assert layer_cycles(graph, left={("settings", "memory"): "named"}) == []
