"""The core is sans-IO: it must import and work with the adapters' heavy modules blocked.

Mirrors STYLE.md's rule: no file, pyarrow, pyspark or psycopg imports below ``adapters/``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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
