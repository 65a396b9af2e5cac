"""The test kit from a built wheel, in a fresh virtualenv, with no source checkout.

``pip wheel`` builds pglogical_py's wheel from this tree; a new venv installs
``<wheel>[test]`` (pytest, hypothesis, psycopg from the package index); then, from a
directory outside the checkout, a process whose first import is
``pglogical_py.testing.strategies`` draws a workload, writes it with
``walbuilder.write`` and checks ``peek`` against ``expected()``: the kit needs nothing
from the source tree (no fixtures).

Slow and needs the package index: it runs only with ``PGLOGICAL_WHEEL_TEST=1``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent("""
    from pglogical_py.testing.strategies import workloads
    import tempfile, pglogical_py, pglogical_py.testing.strategies as s
    from hypothesis import given, settings
    from pglogical_py.testing import walbuilder
    assert "site-packages" in s.__file__, s.__file__

    @settings(max_examples=5, deadline=None, database=None)
    @given(workloads())
    def check(w):
        with tempfile.TemporaryDirectory() as d:
            built = walbuilder.write(w, d)
            got = list(pglogical_py.peek(built.wal_dir, catalog=built.catalog_path,
                                         slot_state=built.slot_state_path))
            assert got == built.expected()

    check()
    print("ok", s.__file__)
""")


@pytest.mark.slow
def test_the_kit_works_from_a_wheel_in_a_fresh_venv() -> None:
    if os.environ.get("PGLOGICAL_WHEEL_TEST") != "1":
        pytest.skip("set PGLOGICAL_WHEEL_TEST=1 (builds a wheel, installs from the index)")
    with tempfile.TemporaryDirectory() as tmp:
        dist = os.path.join(tmp, "dist")
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist,
                        ROOT], check=True, timeout=600)
        (wheel,) = [os.path.join(dist, f) for f in os.listdir(dist) if f.endswith(".whl")]
        venv = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=600)
        py = os.path.join(venv, "bin", "python")
        subprocess.run([py, "-m", "pip", "install", "-q", wheel + "[test]"], check=True,
                       timeout=900)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        first = subprocess.run(
            [py, "-c", "from pglogical_py.testing.strategies import workloads"],
            cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr
        out = subprocess.run([py, "-c", SCRIPT], cwd=tmp, env=env, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.startswith("ok "), out.stdout
