"""The ``pglogical-py`` command line.

Mirrors: the front ends PostgreSQL ships for the same jobs: ``pg_waldump``
(``waldump``), ``pg_recvlogical`` / ``pg_logical_slot_peek_changes`` (``decode``),
``postgres`` as a logical walsender (``serve``),
and catalog export (``catalog``).

NOTES
    Each subcommand lives in its own module (``pglogical_py.cli.<name>``) exposing
    ``add_parser(subparsers)`` and ``run(args) -> int``; they are imported lazily so
    that ``pglogical-py waldump`` never imports the decoding core: when the first
    argument names a subcommand, only that module is imported and only its parser is
    built (start-up: ``decode`` does not pay for waldump's rmgr tables); otherwise
    (``-h``, a typo, nothing) all of them, for the full help and error text.  The
    single-command parser names every subcommand in its usage, as the full one does,
    so even an error the top-level parser reports reads the same.  argparse asks the
    terminal width (``shutil``, whose import pulls in bz2, lzma and threading: ~15 ms
    on PyPy) for every formatter, including the one ``add_argument`` builds only to
    check a metavar; ``_Parser`` gives that check a fixed width, so the width is
    asked only when help or an error is printed.

    Errors.  Every ``PglogicalError`` becomes one line on stderr (``pglogical-py:
    error: ...``, naming the file and LSN it is about) and the exit status of its
    class (``exit_status``: ``EXIT_STATUSES``, listed in the README's "When things go
    wrong"): never a bare traceback.  An error may carry an ``output_detail`` (a
    decode that wrote part of its output: where a consumer resumes), printed as a
    second line.  A broken pipe (``| head``) ends the command quietly, status 0, with
    standard output pointed at /dev/null so that the interpreter's last flush cannot
    complain.  SIGTERM and SIGHUP (when not ignored) unwind the command as Ctrl-C does
    (exit status 128 + the signal, 130 for Ctrl-C), so its ``finally`` blocks remove
    the spill run (adapters/parquet_spill.py); SIGKILL cannot be caught: the next run
    reclaims what it leaves.

    Warnings.  A ``PglogicalWarning`` (PostgreSQL 18's pgoutput ``skipped loading
    publication "x"``) is one line on stderr, ``pglogical-py: warning: ...``, as
    PostgreSQL prints its WARNINGs -- not Python's ``file:line: Class: text`` form --
    each distinct message once, whatever the caller's warning filters say.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import warnings
from typing import Any, List, Optional, Sequence

from .._runtime import reexec_tuned, release_jit
from ..errors import (
    CatalogError,
    OutputError,
    PglogicalError,
    PglogicalWarning,
    SpillError,
    UsageError,
    WalError,
)

SUBCOMMANDS = ("waldump", "decode", "catalog", "serve")


class _Parser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose ``add_argument`` check formats with a fixed width."""

    _checking = False

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        self._checking = True
        try:
            return super().add_argument(*args, **kwargs)
        finally:
            self._checking = False

    def _get_formatter(self) -> argparse.HelpFormatter:
        if self._checking:
            # only _format_args(action, None) is asked: no text, no line width
            formatter: Any = self.formatter_class  # (typeshed's protocol omits width)
            return formatter(prog=self.prog, width=80)  # type: ignore[no-any-return]
        return super()._get_formatter()


def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    """The command-line parser; with ``command`` (a subcommand's name) only that
    subcommand's module is imported and its parser built (see NOTES)."""
    parser = _Parser(
        prog="pglogical-py",
        description="PostgreSQL logical decoding, offline, on captured WAL.",
    )
    if command in SUBCOMMANDS:
        names: Sequence[str] = (command,)
        sub = parser.add_subparsers(dest="command", required=True, prog=parser.prog,
                                    metavar="{%s}" % ",".join(SUBCOMMANDS))
    else:
        names = SUBCOMMANDS
        # prog: what argparse would format from a usage with no positionals
        sub = parser.add_subparsers(dest="command", required=True, prog=parser.prog)
    for name in names:
        try:
            module = importlib.import_module("pglogical_py.cli.%s" % name)
        except ImportError:
            continue
        module.add_parser(sub)
    return parser


#: exit statuses (README, "When things go wrong"); argparse's own usage errors exit 2 too
EXIT_OK = 0
EXIT_ERROR = 1  # decoding cannot go on (DecodingError, UnknownTypeError, ...)
EXIT_USAGE = 2  # bad arguments, paths or settings (UsageError)
EXIT_WAL = 3  # the WAL is damaged, short, missing a segment or not WAL (WalError)
EXIT_CATALOG = 4  # the catalog is unreadable or lacks what the WAL needs (CatalogError)
EXIT_IO = 5  # the output or the spill files cannot be written (OutputError, SpillError)
EXIT_INTERRUPTED = 130  # Ctrl-C; SIGTERM and SIGHUP give 128 + the signal (143, 129)

#: error class -> exit status, the first match wins
EXIT_STATUSES = ((UsageError, EXIT_USAGE), (WalError, EXIT_WAL), (CatalogError, EXIT_CATALOG),
                 (OutputError, EXIT_IO), (SpillError, EXIT_IO), (PglogicalError, EXIT_ERROR))


def exit_status(err: PglogicalError) -> int:
    """The exit status of an error (``EXIT_STATUSES``)."""
    for cls, status in EXIT_STATUSES:
        if isinstance(err, cls):
            return status
    return EXIT_ERROR


def _quiet_stdout() -> None:
    """After a broken pipe: standard output to /dev/null (the interpreter flushes it
    at exit, which would report the pipe again)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's capture)
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread like Ctrl-C's KeyboardInterrupt, so
    that ``finally`` blocks run (the spill run's removal); ``args[0]``: the signal."""


def _on_terminate(signum: int, frame: Any) -> None:
    signal.signal(signum, signal.SIG_DFL)  # a second one ends the process at once
    raise Terminated(signum)


def _show_warning(message: Any, category: Any, filename: str, lineno: int,
                  file: Any = None, line: Optional[str] = None) -> None:
    print("pglogical-py: warning: %s" % message, file=sys.stderr if file is None else file)


def main(argv: Optional[List[str]] = None) -> int:
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        warnings.filterwarnings("default", category=PglogicalWarning)
        return _main(argv)


def _main(argv: Optional[List[str]] = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(words[0] if words else None)
    args = parser.parse_args(argv)
    release_jit()  # the command runs with the JIT parameters tune_jit chose
    saved = []
    for sig in (signal.SIGTERM, signal.SIGHUP):  # kept: SIG_IGN (nohup), a caller's handler
        if signal.getsignal(sig) == signal.SIG_DFL:
            try:
                saved.append((sig, signal.signal(sig, _on_terminate)))
            except ValueError:  # not the main thread: signals stay as they are
                break
    try:
        rc: int = args.run(args)
        return rc
    except PglogicalError as err:
        print("pglogical-py: error: %s" % err, file=sys.stderr)
        detail = getattr(err, "output_detail", None)
        if detail:
            print("pglogical-py: %s" % detail, file=sys.stderr)
        return exit_status(err)
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Terminated as t:
        return 128 + int(t.args[0])
    finally:
        for sig, handler in saved:
            signal.signal(sig, handler)


def console_main() -> int:
    """The ``pglogical-py`` command: ``main`` after the PyPy start-up tuning
    (``_runtime.reexec_tuned``)."""
    reexec_tuned(sys.argv[1:])
    return main()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
