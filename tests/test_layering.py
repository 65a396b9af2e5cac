"""The package's layers, checked on the source: what may import what, and no import cycles.

Mirrors STYLE.md's rules.  The core (``wal/``, ``access/``, ``catalog/``, ``types/``,
``logical/``, ``plugins/``) is sans-IO: it imports and works with the adapters' heavy
modules (file formats, pyarrow, pyspark, psycopg) blocked and never opens a file.  It
imports no ``adapters/``, ``cli/`` or ``testing/`` module, and ``adapters/`` imports no
``cli/``.  These are read from the syntax tree, so every import counts: at module level,
inside a function (a lazy import), under ``if TYPE_CHECKING:``, relative or absolute.
No module of the package may take part in an import cycle, function-level imports
included; imports under ``TYPE_CHECKING`` are never executed and make none.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
CORE = ["wal", "logical", "plugins", "catalog", "access", "types"]
BLOCKED = ["pyarrow", "pyspark", "psycopg", "gzip", "zstandard"]

PROBE = r"""
import importlib, pkgutil, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError("blocked for the layering test: " + name)
        return None
sys.meta_path.insert(0, Block())
import pglogical_py
for sub in CORE:
    try:
        pkg = importlib.import_module("pglogical_py." + sub)
    except ModuleNotFoundError:
        continue
    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        if info.name.rsplit(".", 1)[-1] in ("export",):
            continue  # catalog export talks to a live server: an adapter living beside its loader
        importlib.import_module(info.name)
print("ok")
"""


def test_core_imports_without_io_modules() -> None:
    code = "BLOCKED = %r\nCORE = %r\n" % (BLOCKED, CORE) + PROBE
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# Reading the system time-zone database is what the stdlib's zoneinfo does too: a library
# resource, not the user's data.  Everything else in the core takes bytes from an adapter.
ALLOWED_FILE_READERS = {"types/_tz.py"}
FILE_CALL_ATTRS = {"read_bytes", "read_text", "write_bytes", "write_text"}


def _file_calls(tree: ast.AST) -> list:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.append(node.lineno)
        elif isinstance(func, ast.Attribute):
            base = func.value
            is_module = isinstance(base, ast.Name) and base.id in ("io", "os", "gzip")
            if func.attr == "open" and is_module:
                found.append(node.lineno)
            elif func.attr in FILE_CALL_ATTRS:
                found.append(node.lineno)
    return found


def test_core_never_opens_files() -> None:
    offenders = []
    for sub in CORE:
        for path in (ROOT / "pglogical_py" / sub).rglob("*.py"):
            rel = path.relative_to(ROOT / "pglogical_py").as_posix()
            if path.name == "export.py" or rel in ALLOWED_FILE_READERS:
                continue
            for lineno in _file_calls(ast.parse(path.read_text())):
                offenders.append("%s:%d" % (rel, lineno))
    assert offenders == []


# ---------------------------------------------------------------------------------------------
# imports, read from the syntax tree
# ---------------------------------------------------------------------------------------------

PACKAGE = ROOT / "pglogical_py"
#: the layers nothing in the core may import
OUTER = ("pglogical_py.adapters", "pglogical_py.cli", "pglogical_py.testing")
#: adapters -> cli imports allowed, by module path (none: the adapters drive the session)
ADAPTERS_TO_CLI_EXEMPT: Set[str] = set()


class Import:
    """One import statement's target module, resolved to an absolute name."""

    __slots__ = ("target", "lineno", "type_checking")

    def __init__(self, target: str, lineno: int, type_checking: bool) -> None:
        self.target = target
        self.lineno = lineno
        self.type_checking = type_checking


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(source: str, name: str, is_package: bool, modules: Set[str]) -> List[Import]:
    """Every import in ``source`` (module ``name``), wherever it stands in the tree.

    ``from X import y`` imports the module ``X.y`` when there is one, else ``X``.
    """
    out: List[Import] = []

    def visit(node: ast.AST, type_checking: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.append(Import(alias.name, node.lineno, type_checking))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            subs = [mod + "." + a.name for a in node.names if mod + "." + a.name in modules]
            if len(subs) < len(node.names):
                out.append(Import(mod, node.lineno, type_checking))
            out.extend(Import(sub, node.lineno, type_checking) for sub in subs)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_checking)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, type_checking)

    visit(ast.parse(source), False)
    return out


def package_imports(root: Path = PACKAGE) -> Dict[str, Tuple[str, List[Import]]]:
    """module name -> (path relative to the package, its imports of any module)."""
    paths = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    modules = set(paths)
    return {name: (p.relative_to(root).as_posix(),
                   imports_of(p.read_text(), name, p.name == "__init__.py", modules))
            for name, p in paths.items()}


def _under(target: str, prefixes: Iterable[str]) -> bool:
    return any(target == p or target.startswith(p + ".") for p in prefixes)


def layer_violations(graph: Dict[str, Tuple[str, List[Import]]]) -> List[str]:
    bad = []
    for _name, (rel, imps) in sorted(graph.items()):
        layer = rel.split("/")[0]
        for imp in imps:
            where = "%s:%d imports %s" % (rel, imp.lineno, imp.target)
            if layer in CORE and _under(imp.target, OUTER):
                bad.append(where)
            elif (layer == "adapters" and _under(imp.target, ("pglogical_py.cli",))
                  and rel not in ADAPTERS_TO_CLI_EXEMPT):
                bad.append(where)
    return bad


def import_cycles(graph: Dict[str, Tuple[str, List[Import]]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan), and modules
    importing themselves, over the executed imports between the package's modules."""
    edges = {name: sorted({i.target for i in imps if i.target in graph and not i.type_checking})
             for name, (_rel, imps) in graph.items()}
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    cycles: List[List[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        # iterative: (node, position in its edge list)
        work = [(start, 0)]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, i = work.pop()
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1 or node in edges[node]:
                    cycles.append(sorted(comp))
    return cycles


def _describe(graph: Dict[str, Tuple[str, List[Import]]], comp: List[str]) -> str:
    members = set(comp)
    lines = ["cycle: " + ", ".join(comp)]
    for name in comp:
        rel, imps = graph[name]
        for imp in imps:
            if imp.target in members and not imp.type_checking:
                lines.append("  %s:%d imports %s" % (rel, imp.lineno, imp.target))
    return "\n".join(lines)


def test_layers() -> None:
    assert layer_violations(package_imports()) == []


def test_no_import_cycles() -> None:
    graph = package_imports()
    assert [_describe(graph, c) for c in import_cycles(graph)] == []


def test_exemptions_are_still_needed() -> None:
    """An exemption whose module no longer imports the CLI is removed with it."""
    graph = package_imports()
    by_path = {rel: imps for rel, imps in graph.values()}
    for rel in ADAPTERS_TO_CLI_EXEMPT:
        assert rel in by_path, rel
        assert any(_under(i.target, ("pglogical_py.cli",)) for i in by_path[rel]), rel


def _fake_package(tmp_path: Path, files: Dict[str, str]) -> Path:
    root = tmp_path / "pglogical_py"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for d in [root] + [p for p in root.rglob("*") if p.is_dir()]:
        (d / "__init__.py").touch()
    return root


def test_checks_see_every_kind_of_import(tmp_path: Path) -> None:
    """The scanner finds lazy, TYPE_CHECKING, relative and absolute imports, and cycles
    made of function-level imports, but none made only under TYPE_CHECKING."""
    root = _fake_package(tmp_path, {
        "adapters/files.py": "",
        "cli/decode.py": "",
        "catalog/a.py": "def f():\n    from ..adapters.files import x\n",
        "catalog/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                        "    import pglogical_py.cli.decode\n",
        "wal/c.py": "from pglogical_py import adapters\n",
        "adapters/d.py": "def g():\n    from ..cli import decode\n",
        "logical/e.py": "from . import f\n",
        "logical/f.py": "def h():\n    from .e import y\n",
        "logical/g.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                        "    from .h import z\n",
        "logical/h.py": "from .g import w\n",
    })
    graph = package_imports(root)
    assert layer_violations(graph) == [
        "adapters/d.py:2 imports pglogical_py.cli.decode",
        "catalog/a.py:2 imports pglogical_py.adapters.files",
        "catalog/b.py:3 imports pglogical_py.cli.decode",
        "wal/c.py:1 imports pglogical_py.adapters",
    ]
    assert import_cycles(graph) == [["pglogical_py.logical.e", "pglogical_py.logical.f"]]
