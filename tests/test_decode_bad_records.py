"""Malformed record bodies reaching the decoder become typed errors naming LSN and file.

The records are real (fixtures/pg15/basic); only their main data is cut short, as a
CRC-valid but malformed body would be.  The real decoder and context handle them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pglogical_py.adapters.catalog_files import load_catalog
from pglogical_py.adapters.files import iter_segments
from pglogical_py.errors import DecodingError
from pglogical_py.logical.logical import LogicalDecodingContext
from pglogical_py.logical.snapbuild import SnapBuildState
from pglogical_py.plugins.test_decoding import TestDecoding
from pglogical_py.wal.xlogreader import XLogReader

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pg15" / "basic"


class _Truncated:
    """A real record whose main data keeps only its first 3 bytes."""

    def __init__(self, rec: Any) -> None:
        self._rec = rec
        self.main_data = rec.main_data[:3]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rec, name)


@pytest.mark.skipif(not FIXTURE.exists(), reason="no fixture")
@pytest.mark.parametrize("rmgr,record_type", [("Standby", "RUNNING_XACTS"),
                                              ("Transaction", "COMMIT")])
def test_truncated_body_is_a_decoding_error_naming_lsn_and_file(
    rmgr: str, record_type: str
) -> None:
    catalog = load_catalog(str(FIXTURE / "catalog.json.gz"))
    ctx = LogicalDecodingContext(TestDecoding(), catalog, database=catalog.database_oid)
    decoder = ctx.decoder
    # decode normally up to the first such record met once the snapshot is consistent
    for rec in XLogReader(iter_segments([str(FIXTURE / "wal")])):
        if (rec.rmgr_name, rec.record_type) == (rmgr, record_type) and (
            decoder.builder.state == SnapBuildState.CONSISTENT
        ):
            break
        decoder.process_record(rec)
    else:
        pytest.fail("no %s/%s after the consistent point" % (rmgr, record_type))
    with pytest.raises(DecodingError) as info:
        decoder.process_record(_Truncated(rec))
    assert info.value.lsn == rec.lsn
    assert info.value.file == rec.segment
    assert rec.segment in str(info.value)


@pytest.mark.skipif(not FIXTURE.exists(), reason="no fixture")
def test_truncated_commit_in_the_reader_is_a_decoding_error_naming_lsn_and_file() -> None:
    """A commit decoded in the reader (``xact_fast``) with its main data cut short
    either declines it (the general path then raises, as above) or raises the same
    DecodingError, to which the reader adds the record's LSN and file."""
    catalog = load_catalog(str(FIXTURE / "catalog.json.gz"))
    ctx = LogicalDecodingContext(TestDecoding(), catalog, database=catalog.database_oid)
    decoder = ctx.decoder
    for rec in XLogReader(iter_segments([str(FIXTURE / "wal")])):
        if (rec.rmgr_name, rec.record_type) == ("Transaction", "COMMIT") and (
            decoder.builder.state == SnapBuildState.CONSISTENT and rec.info & 0x80
        ):
            break
        decoder.process_record(rec)
    else:
        pytest.fail("no COMMIT with xinfo after the consistent point")
    raw, off = rec.raw, rec._main_off
    # too short for xl_xact_commit + xinfo: declined, nothing done
    assert not decoder.xact_fast(raw, 0, rec.info, off, 3, rec.xid, rec.lsn, rec.end_lsn)
    # xinfo present, the rest cut short: the parse fails as the general path's does
    with pytest.raises(DecodingError, match="malformed transaction record") as info:
        decoder.xact_fast(raw, 0, rec.info, off, 13, rec.xid, rec.lsn, rec.end_lsn)
    assert info.value.lsn is None  # the reader names the record (test_decode_ingest)
