"""The SQL a replication connection's clients send, answered with the rows they expect.

Mirrors: what ``exec_simple_query`` would answer in a database walsender for the
statements PostgreSQL's own clients send there: ``ALWAYS_SECURE_SEARCH_PATH_SQL``
(fe_utils/connect.h: ``SELECT pg_catalog.set_config('search_path', '', false);``, sent by
libpq's walreceiver -- libpqwalreceiver.c ``libpqrcv_connect`` -- and pg_recvlogical's
streamutil.c ``GetConnection``), and an empty query (EmptyQueryResponse).

NOTES
    A statement is matched against the ``HANDLERS`` in order; the first that takes it
    returns a ``Result`` (columns, rows, command tag).  A handler raising ``PgError``
    answers with that error.  What no handler takes is refused with an ErrorResponse,
    SQLSTATE 0A000 (feature_not_supported), naming the statement -- the connection
    stays usable, as after any failed statement.

    A subscriber (CREATE SUBSCRIPTION, its apply and table-sync workers) sends more:
    ``SELECT t.pubname FROM pg_catalog.pg_publication t WHERE t.pubname IN (...)``
    (subscriptioncmds.c ``check_publications``) and the table list of
    ``fetch_table_list`` -- answered from the archive's catalog (serve/publications.py).
    Table synchronisation (tablesync.c: ``BEGIN READ ONLY ISOLATION LEVEL REPEATABLE
    READ``, ``COPY ... TO STDOUT`` and its ``pg_class`` / ``pg_attribute`` /
    ``pg_get_publication_tables`` queries, sent when ``copy_data = true``) is refused
    with a message pointing to ``copy_data = false``: an archive holds changes, not
    the tables' contents.

INVARIANTS
    * A statement is never half-answered: a Result or an error, then ReadyForQuery.
"""

from __future__ import annotations

import re
from typing import Any, Callable, List, Optional

from .protocol import TEXTOID, Column, PgError, Result
from .publications import publication_queries

#: a handler: (statement text, session) -> Result, or None when it is not its statement
Handler = Callable[[str, Any], Optional[Result]]

_SET_CONFIG = re.compile(
    r"^\s*SELECT\s+(?:pg_catalog\s*\.\s*)?set_config\s*\(\s*'((?:[^']|'')*)'\s*,\s*"
    r"'((?:[^']|'')*)'\s*,\s*(false|true)\s*\)\s*;?\s*$", re.IGNORECASE | re.DOTALL)


def set_config(text: str, session: Any) -> Optional[Result]:
    """``SELECT pg_catalog.set_config(name, value, is_local)``: the setting changed for the
    session (is_local outside a transaction block lasts as long), its new value back."""
    m = _SET_CONFIG.match(text)
    if m is None:
        return None
    name = m.group(1).replace("''", "'")
    value = m.group(2).replace("''", "'")
    session.gucs.set(name, value, startup=False)
    shown = session.gucs.get(name)
    return Result([Column("set_config", TEXTOID)], [[shown]], "SELECT 1")


_PUBLICATION = re.compile(
    r"\bpg_publication(?:_tables|_rel|_namespace)?\b|\bpg_get_publication_tables\b|"
    r"\bpg_catalog\s*\.\s*pg_class\b|\bpg_catalog\s*\.\s*pg_attribute\b",
    re.IGNORECASE)
_TABLESYNC = re.compile(r"^\s*(COPY\b|BEGIN\s+READ\s+ONLY\s+ISOLATION\s+LEVEL\s+REPEATABLE"
                        r"\s+READ\b)", re.IGNORECASE)


def subscriber_queries(text: str, session: Any) -> Optional[Result]:
    """The subscriber's catalog queries (serve/publications.py)."""
    return publication_queries(text, session)


def refuse_tablesync(text: str, session: Any) -> Optional[Result]:
    """Table synchronisation and the catalog queries not answered (see the NOTES)."""
    if _TABLESYNC.match(text):
        raise PgError("0A000", "table synchronization is not served: the archive holds "
                      "changes, not the tables' contents",
                      hint="Create the subscription with copy_data = false, after "
                           "copying the tables as they were at the slot's position.")
    if _PUBLICATION.search(text):
        raise PgError("0A000", "this catalog query is not served: an archive answers "
                      "the queries of CREATE SUBSCRIPTION with copy_data = false",
                      detail="Statement: %s" % _shorten(text),
                      hint="Create the subscription with copy_data = false.")
    return None


#: the handlers in order; ``register`` adds one before the refusals
HANDLERS: List[Handler] = [set_config, subscriber_queries, refuse_tablesync]


def register(handler: Handler, first: bool = True) -> None:
    """Add a handler (first, or just before the refusals)."""
    if first:
        HANDLERS.insert(0, handler)
    else:
        HANDLERS.insert(len(HANDLERS) - 1, handler)


def _shorten(text: str, limit: int = 200) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[:limit - 3] + "..."


def execute(text: str, session: Any) -> Optional[Result]:
    """exec_simple_query in a database walsender: the Result, None for an empty query
    (EmptyQueryResponse), else the refusal."""
    if not text.strip(" \t\n\r\f\v;"):
        return None
    for handler in HANDLERS:
        result = handler(text, session)
        if result is not None:
            return result
    raise PgError("0A000", "pglogical-py serve does not execute this SQL statement: %s"
                  % _shorten(text),
                  hint="A replication connection to an archive answers the replication "
                       "commands (IDENTIFY_SYSTEM, CREATE_REPLICATION_SLOT, "
                       "START_REPLICATION, ...) and SELECT pg_catalog.set_config(...).")


__all__ = ["HANDLERS", "Handler", "Result", "execute", "register", "set_config"]
