"""``.ci/summary.py``: the end of ``make test`` reads what pytest really printed.

A small suite (one passing, one failing test) is run by pytest with ``--durations`` as
``make test`` runs it; the summary must give pytest's last line, the failed test and only
the durations table's rows (the run's own summary line is not a "slow test")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_SUITE = '''
import time

def test_slow():
    time.sleep(0.05)

def test_broken():
    assert 1 + 1 == 3
'''


def _pytest_log(tmp_path: Path) -> Path:
    (tmp_path / "test_tiny.py").write_text(_SUITE)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--durations=3", "test_tiny.py"], cwd=str(tmp_path),
                       capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST")})
    assert p.returncode == 1, p.stdout + p.stderr
    log = tmp_path / "run.log"
    log.write_text(p.stdout)
    return log


def test_summary_gives_the_result_the_failures_and_only_duration_rows(tmp_path: Path) -> None:
    log = _pytest_log(tmp_path)
    out = subprocess.run([sys.executable, str(ROOT / ".ci" / "summary.py"), "Tiny=%s" % log,
                          "Gone=%s" % (tmp_path / "missing.log")],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("== Tiny: 1 failed, 1 passed in ")
    assert "   FAILED test_tiny.py::test_broken - assert (1 + 1) == 3" in lines
    slow = [ln for ln in lines if ln.startswith("   ") and "s call" in ln]
    assert slow and all("test_tiny.py::" in ln for ln in slow)
    assert any("test_tiny.py::test_slow" in ln for ln in slow)
    assert not any("passed" in ln for ln in lines[1:] if not ln.startswith("== "))
    assert lines[-1].startswith("== Gone: no log (")
