"""errors.py and lsn.py: picklable typed errors that name file and LSN; LSN text form."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pglogical_py import errors
from pglogical_py.lsn import format_lsn, parse_lsn, xid_precedes

# the error hierarchy; PglogicalWarning (a WARNING PostgreSQL decodes on) is no error
ALL_ERRORS = [getattr(errors, name) for name in errors.__all__
              if issubclass(getattr(errors, name), errors.PglogicalError)]


def test_the_only_public_class_outside_the_hierarchy_is_the_warning() -> None:
    others = [name for name in errors.__all__
              if not issubclass(getattr(errors, name), errors.PglogicalError)]
    assert others == ["PglogicalWarning"]
    assert issubclass(errors.PglogicalWarning, Warning)
    assert not issubclass(errors.PglogicalWarning, errors.PglogicalError)


@pytest.mark.parametrize("cls", ALL_ERRORS)
def test_every_error_pickles_with_its_fields(cls: type) -> None:
    err = cls("bad thing", lsn=0x1_0000_00B0, file="000000010000000100000000", xid=735)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert (back.lsn, back.file, back.xid, back.message) == (err.lsn, err.file, 735, "bad thing")
    assert str(back) == str(err)
    assert "1/B0" in str(back) and "000000010000000100000000" in str(back)
    assert isinstance(back, errors.PglogicalError)


def test_error_without_position_is_just_the_message() -> None:
    assert str(errors.UsageError("nope")) == "nope"


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_lsn_round_trip(lsn: int) -> None:
    text = format_lsn(lsn)
    assert parse_lsn(text) == lsn
    hi, lo = text.split("/")
    assert hi == hi.upper() and not (len(hi) > 1 and hi.startswith("0"))
    assert not (len(lo) > 1 and lo.startswith("0"))


@pytest.mark.parametrize("bad", ["", "0", "0/", "/1", "G/1", "123456789/0", "0/x"])
def test_bad_lsn_text_is_a_usage_error(bad: str) -> None:
    with pytest.raises(errors.UsageError):
        parse_lsn(bad)


def test_xid_comparison_wraps_modulo_2_32() -> None:
    assert xid_precedes(100, 200)
    assert not xid_precedes(200, 100)
    # across the wraparound point, 2**32 - 10 precedes 5
    assert xid_precedes(2**32 - 10, 5)
    # permanent xids compare plainly
    assert xid_precedes(2, 2**32 - 10)
