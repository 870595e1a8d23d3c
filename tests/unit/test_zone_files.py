"""A hosting pool's files held as columns (zonegen.model.ZoneFiles) read as the tuple of
ZoneFiles they replace: the same files, in the same order, however they are asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.zonegen.model import ZoneFile, ZoneFiles

ITEMS = [
    {"origin": "a.example.", "file": "a.example.zone", "serial": 1, "records": 12, "bytes": 700},
    {"origin": "b.example.", "file": "b.example.zone", "serial": 1, "records": 3, "bytes": 200},
    {"origin": "c.example.", "file": "other.zone", "serial": 7, "records": 5, "bytes": 300},
]


def as_tuple(folder: Path) -> tuple[ZoneFile, ...]:
    return tuple(
        ZoneFile(i["origin"], folder / i["file"], i["serial"], i["records"], i["bytes"])
        for i in ITEMS
    )


def test_the_columns_read_as_the_tuple_of_files(tmp_path: Path) -> None:
    files, expected = ZoneFiles(tmp_path, ITEMS), as_tuple(tmp_path)
    assert len(files) == 3 and list(files) == list(expected) and files == expected
    assert files[0] == expected[0] and files[-1] == expected[-1]
    assert files[-1].path == tmp_path / "other.zone"  # a name of its own is kept
    assert files[1:] == expected[1:] and files[:5] == expected
    with pytest.raises(IndexError):
        files[3]
    assert files != expected[:2]


def test_a_file_put_first_comes_first_and_the_pool_is_left_as_it_was(tmp_path: Path) -> None:
    pool = ZoneFiles(tmp_path, ITEMS)
    catalog = ZoneFile("catalog.invalid.", tmp_path / "cat.zone", 1, 4, 100)
    files = pool.with_first(catalog)
    assert files == (catalog, *as_tuple(tmp_path))
    assert files[0] is catalog and len(files) == 4 and files[1].origin == "a.example."
    assert len(pool) == 3 and pool[0].origin == "a.example."
