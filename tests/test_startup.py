"""Start-up of ``pglogical-py decode`` (issue 7): what it imports, how a snapshot loads.

The catalog snapshot is parsed without a ``parse_float`` hook (PyPy's fast JSON
decoder takes none) unless an attmissingval needs a number's literal text; types are
built at their first look-up; the CLI imports only the subcommand it runs and never
platform, secrets, tempfile or shutil before the first record.  These tests pin that
down and check the results are those of the exact, eager way.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Any, Dict, List, Tuple

import pytest

from pglogical_py.catalog.snapshot import (
    CatalogSnapshot,
    _JsonNumber,
    decode_export_bytes,
)
from pglogical_py.cli import SUBCOMMANDS, build_parser
from pglogical_py.errors import CatalogError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures")


def _fixture() -> str:
    for major in ("pg15", "pg16", "pg17", "pg18"):
        d = os.path.join(FIXTURES, major, "basic")
        if os.path.isfile(os.path.join(d, "catalog.json.gz")):
            return d
    pytest.skip("no basic fixture")


def _catalog() -> Dict[str, Any]:
    with open(os.path.join(_fixture(), "catalog.json.gz"), "rb") as f:
        return decode_export_bytes(f.read())


def _user_table(d: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """A user table of the fixture and one of its attribute rows."""
    for c in d["pg_class"]:
        if int(c["oid"]) >= 16384 and c.get("relkind") == "r":
            for a in d["pg_attribute"]:
                if a["attrelid"] == c["oid"] and int(a["attnum"]) == 1:
                    return c, a
    pytest.skip("no user table in the fixture")


def test_float_literals_kept_where_read() -> None:
    d = _catalog()
    c, a = _user_table(d)
    # a float elsewhere (reltuples of a big table: row_to_json writes 1e+06) keeps its
    # literal text in decode_export_bytes (the redo mode's reader) ...
    c["reltuples"] = "@@RELTUPLES@@"
    text = json.dumps(d).replace('"@@RELTUPLES@@"', "1e+06")
    exact = decode_export_bytes(text.encode())
    row = next(r for r in exact["pg_class"] if r["oid"] == c["oid"])
    assert isinstance(row["reltuples"], _JsonNumber) and row["reltuples"] == "1e+06"
    # ... and a snapshot built from the fast parse is the snapshot of the exact one
    fast = CatalogSnapshot.from_bytes(gzip.compress(text.encode()))
    slow = CatalogSnapshot.from_dict(exact)
    for oid in slow.user_relation_oids():
        a1, a2 = fast.relation_by_oid(oid), slow.relation_by_oid(oid)
        assert [vars_of(x) for x in a1.tupdesc.attrs] == [vars_of(x) for x in a2.tupdesc.attrs]
        assert a1.relname == a2.relname and a1.replident_attnums == a2.replident_attnums
    assert [fast.format_type(o) for o in slow.type_oids()] == \
        [slow.format_type(o) for o in slow.type_oids()]


def vars_of(obj: Any) -> Dict[str, Any]:
    slots = getattr(type(obj), "__slots__", ())
    return {k: getattr(obj, k) for k in slots} if slots else dict(vars(obj))


def test_attmissingval_number_text_is_exact() -> None:
    """A numeric missing value exported by row_to_json (``[1.50]``) prints 1.50, not 1.5."""
    d = _catalog()
    c, a = _user_table(d)
    a.update(atttypid=1700, atthasmissing=True, attlen=-1, attbyval=False,
             attmissingval="@@MISSING@@")
    a.pop("attmissingval_text", None)
    raw = json.dumps(d).replace('"@@MISSING@@"', "[1.50]").encode()
    snap = CatalogSnapshot.from_bytes(raw)
    att = snap.relation_by_oid(int(c["oid"])).tupdesc.attrs[0]
    assert att.missing_text == "1.50"


def test_types_built_on_first_lookup() -> None:
    d = _catalog()
    snap = CatalogSnapshot.from_dict(d)
    assert snap._types == {}
    t = snap.type_info(23)
    assert t is snap.type_info(23) and t.typname == "int4" and snap.format_type(23) == "integer"
    assert set(snap.type_oids()) == {int(r["oid"]) for r in d["pg_type"]}
    assert snap.has_type(1184) and not snap.has_type(4242424)
    with pytest.raises(CatalogError):
        snap.type_info(4242424)
    # a bad pg_type row is a CatalogError naming the type when it is looked up
    bad = copy.deepcopy(d)
    for r in bad["pg_type"]:
        if int(r["oid"]) == 25:
            del r["typlen"]
    snap = CatalogSnapshot.from_dict(bad, source="bad.json")
    assert snap.format_type(23) == "integer"
    with pytest.raises(CatalogError, match="type 25") as ei:
        snap.type_info(25)
    assert "bad.json" in str(ei.value)


def test_enum_labels_and_range_subtype_lazy() -> None:
    d = _catalog()
    enum_oid = 4242001
    d["pg_type"].append({"oid": enum_oid, "typname": "mood", "typnamespace": 2200,
                         "typtype": "e", "typlen": 4, "typbyval": True})
    d["pg_enum"] = [{"oid": 4242002, "enumtypid": enum_oid, "enumlabel": "ok"},
                    {"oid": 4242003, "enumtypid": enum_oid, "enumlabel": "sad"}]
    snap = CatalogSnapshot.from_dict(d)
    assert snap.type_info(enum_oid).enum_labels == {4242002: "ok", 4242003: "sad"}
    rng = next((r for r in d["pg_range"]), None)
    if rng is not None:
        assert snap.type_info(int(rng["rngtypid"])).range_subtype == int(rng["rngsubtype"])


def _run_main(build: Any, argv: List[str]) -> Tuple[Any, str, str]:
    e, o = io.StringIO(), io.StringIO()
    with redirect_stderr(e), redirect_stdout(o):
        try:
            ns = build().parse_args(argv)
            r: Any = sorted((k, repr(v)) for k, v in vars(ns).items())
        except SystemExit as x:
            r = x.code
    return r, e.getvalue(), o.getvalue()


@pytest.mark.parametrize("argv", [
    ["decode", "-h"], ["decode"], ["decode", "w", "--catalog", "c", "--bogus"],
    ["decode", "w", "--catalog", "c", "--format", "xml"], ["decode", "w", "--catalog", "c"],
    ["waldump", "-h"], ["catalog", "-h"], ["catalog"],
])
@pytest.mark.parametrize("columns", ["30", "80", "200"])
def test_single_subcommand_parser_reads_the_same(argv: List[str], columns: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the named subcommand is imported; what it parses and prints is the full
    parser's (help, errors, usage naming every subcommand), at any terminal width."""
    monkeypatch.setenv("COLUMNS", columns)
    assert argv[0] in SUBCOMMANDS
    full = _run_main(build_parser, argv)
    single = _run_main(lambda: build_parser(argv[0]), argv)
    assert single == full


def test_decode_startup_imports(tmp_path: Any) -> None:
    """A decode imports neither the other subcommands nor platform, secrets, tempfile,
    shutil (nor, on PyPy, ctypes) and makes no spill directory until it spills."""
    d = _fixture()
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    out = os.path.join(str(tmp_path), "out.tsv")
    code = (
        "import sys\n"
        "from pglogical_py.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        "heavy = ['pglogical_py.cli.waldump', 'pglogical_py.cli.catalog', 'platform',\n"
        "         'secrets', 'tempfile', 'shutil', 'pickle']\n"
        "if sys.implementation.name == 'pypy':\n"
        "    heavy.append('ctypes')\n"
        "print(rc, sorted(m for m in heavy if m in sys.modules))\n"
    )
    argv = ["decode", os.path.join(d, "wal"), "--catalog", os.path.join(d, "catalog.json.gz"),
            "--slot-state", os.path.join(d, "slot.state"),
            "--end-lsn", str(meta.get("end_lsn")), "-O", out, "--no-progress"]
    env = dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code] + argv, capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[0] == "0 []"
    assert os.path.getsize(out) > 0
    assert os.listdir(str(tmp_path)) == ["out.tsv"]  # no private spill directory


def test_float_output_imports_fractions_when_it_needs_it() -> None:
    """fractions (and the decimal it imports, pure Python under PyPy) is imported by
    the rare float8 output path that needs exact arithmetic, not by the decoder's
    modules."""
    code = ("import sys; import pglogical_py.cli.decode, pglogical_py.types.float, "
            "pglogical_py.plugins.test_decoding; "
            "from pglogical_py.types.float import double_to_shortest; "
            "a = 'fractions' in sys.modules or 'decimal' in sys.modules; "
            "double_to_shortest(0.1); b = 'fractions' in sys.modules; double_to_shortest(2.5); "
            "print(a, b, 'fractions' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False", "True"]


def test_reexec_path_imports_little() -> None:
    """``python -m pglogical_py`` imports ``_runtime`` before PyPy re-executes it: that
    process (replaced at once) imports neither typing nor argparse nor the CLI."""
    code = ("import sys; before = set(sys.modules); import pglogical_py._runtime; "
            "print(' '.join(sorted(set(sys.modules) - before)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    new = set(r.stdout.split())
    assert "pglogical_py._runtime" in new
    assert not new & {"typing", "argparse", "pglogical_py.cli", "re", "collections"}, new
