"""What the sync ledger says when it is called wrongly: one line that says what is valid, as a
ValueError or TypeError (never an enum's or an AttributeError's traceback)."""

from __future__ import annotations

import pytest

from syncledger import SyncKind, SyncLedger, max_syncs, region

KINDS = ", ".join(k.value for k in SyncKind)


@pytest.mark.parametrize(
    "call",
    [lambda: max_syncs(1, kinds=["bogus"]), lambda: SyncLedger().count("bogus")],
    ids=["max_syncs", "count"],
)
def test_an_unknown_kind_lists_the_valid_ones(call):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == f"unknown sync kind 'bogus'; the kinds are: {KINDS}"
    assert info.value.__suppress_context__  # no "during handling of ..." enum traceback


def test_kinds_that_are_not_a_list_are_a_type_error():
    with pytest.raises(TypeError, match="a kind or a list of kinds, got 5"):
        max_syncs(1, kinds=5)


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        (None, TypeError, "a region name is a string, got None"),
        ("", ValueError, "a region name must not be empty"),
        ("a/b", ValueError, "region name 'a/b' holds '/'"),
        ("/a", ValueError, "region name '/a' holds '/'"),
    ],
)
def test_a_region_name_is_one_path_component(name, error, message):
    with pytest.raises(error, match=message):
        region(name)


def test_several_names_are_one_region_that_many_levels_down():
    with pytest.raises(ValueError, match=r"region\('a', 'b'\) for one region"):
        region("a/b")
    with SyncLedger() as ledger, region("step"), region("scheduler", "prepare"):
        pass
    assert [e.region for e in ledger.region_entries] == ["step", "step/scheduler/prepare"]
