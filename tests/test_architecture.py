"""The package's shape: the import graph between pkbsim's modules has no cycles, no module
imports another's private names, renderers and the core never import the CLI, and every file
pkbsim writes goes through pkbsim.files.

Every import counts: top-level, inside functions and under ``if TYPE_CHECKING``; but for the
package's own ``pkbsim/__init__.py``, the public façade: it imports nothing of pkbsim when it
loads (its names load on first use, PEP 562; the imports it has are for type checkers), so it
is the top of the graph and its edges are left out; ``test_the_facade_loads_lazily`` checks
that, and that no module inside pkbsim uses the façade's names.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from paths import ROOT

PACKAGE = ROOT / "pkbsim"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
FACADE = "pkbsim"


def imports(name: str) -> Iterator[tuple[str, str, int]]:
    """(imported module, imported name or "", line) of every import in module ``name``."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, "", node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            for alias in node.names:
                yield base, alias.name, node.lineno


def edges() -> dict[str, set[str]]:
    """Module -> the pkbsim modules it imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name in MODULES:
        if name == FACADE:
            continue
        for module, imported, _ in imports(name):
            target = f"{module}.{imported}" if f"{module}.{imported}" in MODULES else module
            if target in MODULES and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_scan_sees_the_package() -> None:
    graph = edges()
    assert len(MODULES) > 80
    assert "pkbsim.placement" in graph["pkbsim.roofline"]
    assert "pkbsim.cli.analyze" in graph["pkbsim.cli"]  # ``from pkbsim.cli import analyze``


def test_the_facade_loads_lazily() -> None:
    """pkbsim/__init__.py imports only __future__ and typing when it loads (the rest inside
    ``if TYPE_CHECKING`` or its ``__getattr__``), and pkbsim's modules take nothing from it
    but ``__version__`` and submodules."""
    tree = ast.parse(MODULES[FACADE].read_text())
    loaded = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert {getattr(n, "module", None) for n in loaded} <= {"__future__", "typing"}
    used = [f"{name}:{line} imports pkbsim.{imported}" for name in MODULES if name != FACADE
            for module, imported, line in imports(name)
            if module == FACADE and imported != "__version__"
            and f"{FACADE}.{imported}" not in MODULES]
    assert used == []


def test_cycles_are_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    assert cycles(edges()) == []


def test_no_private_names_imported_from_other_modules() -> None:
    private = [f"{name}:{line} imports {module}.{imported}"
               for name in MODULES for module, imported, line in imports(name)
               if module.startswith("pkbsim") and imported.startswith("_")
               and not imported.startswith("__")]
    assert private == []


def test_only_the_cli_imports_the_cli() -> None:
    outside = [f"{name} imports {target}" for name, targets in edges().items()
               for target in targets
               if target.startswith("pkbsim.cli") and not name.startswith("pkbsim.cli")
               and name != "pkbsim.__main__"]
    assert outside == []


def test_renderers_import_no_command() -> None:
    """pkbsim.report renders finished results: it imports no command or progress display."""
    bad = [f"{name} imports {target}" for name, targets in edges().items()
           if name.startswith("pkbsim.report") for target in targets
           if target.startswith(("pkbsim.cli", "pkbsim.processes"))]
    assert bad == []


def writes(source: str) -> list[int]:
    """Lines of ``source`` that write a file: os.replace/rename, tempfile, write_text or
    write_bytes, or open() / Path.open() with a mode that writes."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            called, owner = func.attr, func.value
        elif isinstance(func, ast.Name):
            called, owner = func.id, None
        else:
            continue
        by_os = isinstance(owner, ast.Name) and owner.id in ("os", "tempfile") and called in (
            "replace", "rename", "mkstemp", "NamedTemporaryFile")
        if by_os or called in ("write_text", "write_bytes"):
            found.append(node.lineno)
        elif called == "open":
            mode = node.args[1:2] if owner is None else node.args[:1]
            mode += [k.value for k in node.keywords if k.arg == "mode"]
            if any(isinstance(m, ast.Constant) and isinstance(m.value, str)
                   and set(m.value) & set("wax+") for m in mode):
                found.append(node.lineno)
    return found


def test_writes_are_recognised() -> None:
    source = ("os.replace(a, b)\nopen(p, 'w')\np.write_text('x')\npath.open('wb')\n"
              "open(p)\npath.open('rb')\nopen(p, mode='a')\ntempfile.mkstemp()\n")
    assert writes(source) == [1, 2, 3, 4, 7, 8]


def test_one_writer() -> None:
    """Files are written by pkbsim.files only."""
    writers = [f"{name}:{line}" for name, path in MODULES.items() if name != "pkbsim.files"
               for line in writes(path.read_text())]
    assert writers == []
