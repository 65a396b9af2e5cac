"""Client authentication: trust, password (cleartext) and SCRAM-SHA-256.

Mirrors: libpq/auth.c (``ClientAuthentication``, ``CheckPasswordAuth``,
``recv_password_packet``, ``auth_failed``), libpq/auth-sasl.c (``CheckSASLAuth``),
libpq/auth-scram.c (the server side of RFC 5802 / 7677: ``read_client_first_message``,
``build_server_first_message``, ``verify_client_proof``, ``verify_final_nonce``,
``build_server_final_message``, ``scram_mock_salt``, ``scram_verify_plain_password``)
and common/scram-common.c / common/saslprep.c (the keys and SASLprep).

NOTES
    ``--auth`` picks one method for every connection, as a pg_hba.conf with one line
    would: ``trust`` (default: no password asked), ``password`` (the client sends its
    password in clear: AuthenticationCleartextPassword) or ``scram-sha-256``
    (AuthenticationSASL, mechanism SCRAM-SHA-256; -PLUS needs TLS, which the server
    does not speak).  The passwords are ``--password-file``'s: one ``user:secret`` per
    line (``#`` comments, blank lines ignored), where ``secret`` is the password or a
    SCRAM secret as pg_authid keeps it (``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:
    <ServerKey>``, from ``SELECT rolpassword FROM pg_authid``): the server then never
    holds the password itself, and both methods check against it.  A password given in
    clear gets a SCRAM secret with a random salt and 4096 iterations (scram_iterations'
    default) when the file is read.

    Failures are PostgreSQL's: FATAL 28P01 ``password authentication failed for user
    "NAME"`` for a wrong password and for a user the file does not name (with SCRAM
    the exchange runs to its end first with a salt derived from the user name, as
    ``scram_mock_salt`` does, so that the answer does not tell which); FATAL 08P01 for
    a malformed message.  A client that closes the connection when asked for a
    password (libpq without one) ends the connection quietly (``ClientGone``).

INVARIANTS
    * A connection is authenticated only after a password or proof matched the user's
      secret; nothing from the password file is ever sent or logged.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import stringprep
import time
import unicodedata
from typing import Dict, Optional, Tuple

from ..errors import UsageError
from .protocol import (
    AUTH_LIMIT,
    SMALL_LIMIT,
    Connection,
    PgError,
    ProtocolViolation,
    Reader,
    auth_request,
    cstring,
)

METHODS = ("trust", "password", "scram-sha-256")
MECHANISM = "SCRAM-SHA-256"
#: scram_iterations' default (16+; 15's SCRAM_DEFAULT_ITERATIONS)
DEFAULT_ITERATIONS = 4096
#: SCRAM_RAW_NONCE_LEN / SCRAM_DEFAULT_SALT_LEN
NONCE_LEN = 18
SALT_LEN = 16

AUTH_REQ_OK = 0
AUTH_REQ_PASSWORD = 3
AUTH_REQ_SASL = 10
AUTH_REQ_SASL_CONT = 11
AUTH_REQ_SASL_FIN = 12


class ScramSecret:
    """A parsed SCRAM-SHA-256 secret (parse_scram_secret)."""

    __slots__ = ("iterations", "salt", "stored_key", "server_key")

    def __init__(self, iterations: int, salt: bytes, stored_key: bytes,
                 server_key: bytes) -> None:
        self.iterations = iterations
        self.salt = salt
        self.stored_key = stored_key
        self.server_key = server_key

    @classmethod
    def parse(cls, text: str) -> Optional[ScramSecret]:
        """``SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>``, or None."""
        try:
            method, rest = text.split("$", 1)
            if method != MECHANISM:
                return None
            iters_salt, keys = rest.split("$", 1)
            iters, salt = iters_salt.split(":", 1)
            stored, server = keys.split(":", 1)
            secret = cls(int(iters), base64.b64decode(salt, validate=True),
                         base64.b64decode(stored, validate=True),
                         base64.b64decode(server, validate=True))
        except (ValueError, TypeError):
            return None
        if secret.iterations <= 0 or len(secret.stored_key) != 32 \
                or len(secret.server_key) != 32:
            return None
        return secret

    @classmethod
    def build(cls, password: str, salt: Optional[bytes] = None,
              iterations: int = DEFAULT_ITERATIONS) -> ScramSecret:
        """pg_be_scram_build_secret."""
        salt = os.urandom(SALT_LEN) if salt is None else salt
        salted = salted_password(password, salt, iterations)
        client_key = _hmac(salted, b"Client Key")
        return cls(iterations, salt, hashlib.sha256(client_key).digest(),
                   _hmac(salted, b"Server Key"))

    def text(self) -> str:
        b64 = base64.b64encode
        return "%s$%d:%s$%s:%s" % (MECHANISM, self.iterations, b64(self.salt).decode(),
                                   b64(self.stored_key).decode(),
                                   b64(self.server_key).decode())

    def verify_plain(self, password: str) -> bool:
        """scram_verify_plain_password."""
        salted = salted_password(password, self.salt, self.iterations)
        return hmac.compare_digest(_hmac(salted, b"Server Key"), self.server_key)


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


def saslprep(password: str) -> str:
    """pg_saslprep (RFC 4013), as PostgreSQL applies it: the prepared password, or
    the password unchanged when it is not valid SASLprep input."""
    if all(ord(c) < 0x80 for c in password):
        return password  # ASCII: pg_saslprep's fast path
    mapped = []
    for c in password:
        if stringprep.in_table_b1(c):
            continue
        mapped.append(" " if stringprep.in_table_c12(c) else c)
    out = unicodedata.normalize("NFKC", "".join(mapped))
    if not out:
        return password
    prohibited = (stringprep.in_table_c12, stringprep.in_table_c21, stringprep.in_table_c22,
                  stringprep.in_table_c3, stringprep.in_table_c4, stringprep.in_table_c5,
                  stringprep.in_table_c6, stringprep.in_table_c7, stringprep.in_table_c8,
                  stringprep.in_table_c9, stringprep.in_table_a1)
    for c in out:
        if any(test(c) for test in prohibited):
            return password
    randal = [stringprep.in_table_d1(c) for c in out]
    if any(randal):
        if any(stringprep.in_table_d2(c) for c in out) or not (randal[0] and randal[-1]):
            return password
    return out


def salted_password(password: str, salt: bytes, iterations: int) -> bytes:
    """scram_SaltedPassword: PBKDF2-HMAC-SHA-256 of the SASLprepped password."""
    return hashlib.pbkdf2_hmac("sha256", saslprep(password).encode("utf-8"), salt,
                               iterations)


def read_password_file(path: str) -> Dict[str, ScramSecret]:
    """``--password-file``: user -> SCRAM secret (see the module's NOTES)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as err:
        raise UsageError(f"cannot read password file {path}: {err.strerror}",
                         file=path) from None
    out: Dict[str, ScramSecret] = {}
    for n, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        user, sep, secret = text.partition(":")
        if not sep or not user or not secret:
            raise UsageError(f"password file {path} line {n}: expected user:password",
                             file=path)
        parsed = ScramSecret.parse(secret) if secret.startswith(MECHANISM + "$") else None
        if secret.startswith(MECHANISM + "$") and parsed is None:
            raise UsageError(f'password file {path} line {n}: invalid SCRAM secret for '
                             f'user "{user}"', file=path)
        out[user] = parsed if parsed is not None else ScramSecret.build(secret)
    return out


def auth_failed(user: str) -> PgError:
    """auth_failed for password and SCRAM authentication."""
    return PgError("28P01", f'password authentication failed for user "{user}"',
                   severity="FATAL")


class Authenticator:
    """``--auth`` with ``--password-file``'s secrets (see the module's NOTES)."""

    def __init__(self, method: str = "trust",
                 secrets: Optional[Dict[str, ScramSecret]] = None,
                 timeout: float = 60.0) -> None:
        if method not in METHODS:
            raise UsageError(f"--auth {method!r} is not one of {', '.join(METHODS)}")
        if method != "trust" and secrets is None:
            raise UsageError(f"--auth {method} needs --password-file")
        self.method = method
        self.secrets = dict(secrets or {})
        #: authentication_timeout: the client has this long to authenticate
        self.timeout = timeout
        self._mock_nonce = os.urandom(16)

    def authenticate(self, conn: Connection, user: str) -> None:
        """ClientAuthentication: returns when the client is who it says (the caller
        sends AuthenticationOk), else raises a FATAL ``PgError`` (or ``ClientGone``)."""
        if self.method == "trust":
            return
        deadline = time.monotonic() + self.timeout
        if self.method == "password":
            self._password(conn, user, deadline)
        else:
            self._scram(conn, user, deadline)

    # -- helpers ---------------------------------------------------------------------

    @staticmethod
    def _read(conn: Connection, deadline: float, what: str) -> Reader:
        conn.flush(deadline)
        msg = conn.read_message(lambda kind: AUTH_LIMIT if kind == ord("p") else SMALL_LIMIT,
                                deadline)
        if msg is None:
            raise PgError("08006", "canceling authentication due to timeout",
                          severity="FATAL")
        kind, payload = msg
        if kind != ord("p"):
            raise ProtocolViolation(f"expected {what} response, got message type {kind}")
        return Reader(payload)

    def _password(self, conn: Connection, user: str, deadline: float) -> None:
        """CheckPasswordAuth: AuthenticationCleartextPassword, then the password."""
        conn.send(auth_request(AUTH_REQ_PASSWORD))
        buf = self._read(conn, deadline, "password")
        data = buf.rest()
        if not data.endswith(b"\0") or data.index(b"\0") != len(data) - 1:
            raise ProtocolViolation("invalid password packet size")
        if data == b"\0":
            raise PgError("28P01", "empty password returned by client", severity="FATAL")
        password = data[:-1].decode("utf-8", "surrogateescape")
        secret = self.secrets.get(user)
        if secret is None or not secret.verify_plain(password):
            raise auth_failed(user)

    def _scram(self, conn: Connection, user: str, deadline: float) -> None:
        """CheckSASLAuth with the SCRAM-SHA-256 mechanism (auth-scram.c)."""
        conn.send(auth_request(AUTH_REQ_SASL, cstring(MECHANISM) + b"\0"))
        buf = self._read(conn, deadline, "SASL")
        mech = buf.string()
        if mech != MECHANISM:
            raise ProtocolViolation("client selected an invalid SASL authentication "
                                    "mechanism")
        length = buf.int32()
        first = buf.take(length) if length >= 0 else b""
        buf.end()
        secret = self.secrets.get(user)
        doomed = secret is None
        if secret is None:
            secret = self._mock_secret(user)
        client_nonce, client_first_bare, gs2 = _parse_client_first(first)
        server_nonce = base64.b64encode(os.urandom(NONCE_LEN)).decode()
        nonce = client_nonce + server_nonce
        server_first = "r=%s,s=%s,i=%d" % (nonce, base64.b64encode(secret.salt).decode(),
                                         secret.iterations)
        conn.send(auth_request(AUTH_REQ_SASL_CONT, server_first.encode()))
        buf = self._read(conn, deadline, "SASL")
        final = buf.rest().decode("utf-8", "surrogateescape")
        without_proof, proof = _parse_client_final(final, gs2, nonce)
        auth_message = ",".join((client_first_bare, server_first, without_proof)).encode()
        client_signature = _hmac(secret.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        ok = hmac.compare_digest(hashlib.sha256(client_key).digest(), secret.stored_key)
        if doomed or not ok:
            raise auth_failed(user)
        server_signature = _hmac(secret.server_key, auth_message)
        conn.send(auth_request(AUTH_REQ_SASL_FIN,
                               b"v=" + base64.b64encode(server_signature)))

    def _mock_secret(self, user: str) -> ScramSecret:
        """scram_mock_salt: a salt derived from the user name and a server nonce."""
        salt = hashlib.sha256(user.encode("utf-8") + self._mock_nonce).digest()[:SALT_LEN]
        return ScramSecret(DEFAULT_ITERATIONS, salt, b"\0" * 32, b"\0" * 32)



def _malformed(detail: str) -> ProtocolViolation:
    return ProtocolViolation("malformed SCRAM message", detail=detail)


def _attr(part: str, attr: str) -> str:
    """read_attribute_value: ``a=value``."""
    if not part or part[0] != attr:
        raise _malformed(f'Expected attribute "{attr}" but found "{part[:1]}".')
    if len(part) < 2 or part[1] != "=":
        raise _malformed(f'Expected character "=" for attribute "{attr}".')
    return part[2:]


def _parse_client_first(data: bytes) -> Tuple[str, str, str]:
    """read_client_first_message: (client nonce, client-first-message-bare, gs2 header)."""
    if not data:
        raise _malformed("The message is empty.")
    text = data.decode("utf-8", "surrogateescape")
    flag = text[:1]
    if flag == "p":
        raise _malformed("The client selected SCRAM-SHA-256 without channel binding, but "
                         "the SCRAM message includes channel binding data.")
    if flag not in ("n", "y"):
        raise _malformed(f'Unexpected channel-binding flag "{flag}".')
    if text[1:2] != ",":
        raise _malformed(f'Comma expected, but found character "{text[1:2]}".')
    rest = text[2:]
    authzid, sep, bare = rest.partition(",")
    if not sep:
        raise _malformed("Attribute expected, but found end of string.")
    if authzid:
        raise ProtocolViolation("client uses authorization identity, but it is not "
                                "supported")
    gs2 = text[:2 + len(authzid) + 1]
    parts = bare.split(",")
    if parts[0].startswith("m="):
        raise PgError("08P01", "client requires an unsupported SCRAM extension",
                      severity="FATAL")
    _attr(parts[0], "n")
    if len(parts) < 2:
        raise _malformed("Attribute expected, but found end of string.")
    nonce = _attr(parts[1], "r")
    if not nonce or any(not (0x21 <= ord(c) <= 0x7E) or c == "," for c in nonce):
        raise ProtocolViolation("non-printable characters in SCRAM nonce")
    return nonce, bare, gs2


def _parse_client_final(text: str, gs2: str, nonce: str) -> Tuple[str, bytes]:
    """read_client_final_message: (client-final-message-without-proof, proof)."""
    parts = text.split(",")
    cbind = _attr(parts[0], "c")
    try:
        decoded = base64.b64decode(cbind, validate=True).decode("utf-8", "surrogateescape")
    except ValueError:
        raise _malformed("Malformed channel binding data.") from None
    if decoded != gs2:
        raise ProtocolViolation("SCRAM channel binding check failed")
    if len(parts) < 2:
        raise _malformed("Attribute expected, but found end of string.")
    got_nonce = _attr(parts[1], "r")
    if got_nonce != nonce:
        raise ProtocolViolation("invalid SCRAM response", detail="Nonce does not match.")
    rest = parts[2:]
    while rest and not rest[0].startswith("p="):
        rest = rest[1:]  # extensions before the proof
    if not rest:
        raise _malformed("Attribute expected, but found end of string.")
    try:
        proof = base64.b64decode(_attr(rest[0], "p"), validate=True)
    except ValueError:
        raise _malformed("Malformed proof in client-final-message.") from None
    if len(proof) != 32:
        raise _malformed("Malformed proof in client-final-message.")
    if len(rest) > 1:
        raise _malformed("Garbage found at the end of client-final-message.")
    without_proof = text[:text.rindex(",p=")]
    return without_proof, proof


__all__ = ["Authenticator", "METHODS", "ScramSecret", "read_password_file", "saslprep",
           "salted_password"]
