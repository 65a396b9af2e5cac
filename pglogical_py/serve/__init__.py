"""A walsender over captured WAL: PostgreSQL's replication protocol served from an archive.

Mirrors: replication/walsender.c and the backend around it (tcop/backend_startup.c,
libpq/auth.c, libpq/auth-scram.c, libpq/pqformat.c, replication/repl_gram.y), for the
clients of a logical walsender -- ``pg_recvlogical``, libpq's walreceiver in a
PostgreSQL subscriber, any pgoutput client.  ``pglogical-py serve`` (cli/serve.py) is the
command; docs/serve.md the guide.

Modules
    ``protocol``  the wire: messages in and out, a connection's buffers (pqcomm.c,
                  pqformat.c)
    ``auth``      trust, password and SCRAM-SHA-256 (auth.c, auth-scram.c)
    ``repl_gram`` replication commands (repl_scanner.l, repl_gram.y)
    ``gucs``      the settings a session reports and shows (guc_tables.c)
    ``archive``   what the WAL archive says about the server that wrote it
    ``slots``     the served slots, persisted in ``--slot-dir`` (slot.c)
    ``sql``       the SQL a replication connection's clients send
    ``walsender`` one connection: startup, commands, streaming (walsender.c)
    ``server``    the listener, one thread per connection

This package is a driver (it may use the adapters and the session); nothing in the core
imports it.
"""
