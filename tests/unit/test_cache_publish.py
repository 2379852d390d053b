"""The trained-model cache when several processes write one entry: the first complete one stays.

Runs, a study's workers and a parallel test session can all find an entry missing and train it.
An entry that is complete when another writer finishes must not be removed under a reader.
"""

from __future__ import annotations

import json
import os

import pytest

from interp.synthetic.cache import atomic_dir, read_meta


def _has(name: str):
    return lambda target: (target / name).exists()


def test_a_new_entry_appears_whole(tmp_path):
    target = tmp_path / "entry"
    with atomic_dir(target, ".t-", _has("done")) as tmp:
        (tmp / "done").write_text("mine")
        assert not target.exists()
    assert (target / "done").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]  # no folder left beside it


def test_a_complete_entry_written_meanwhile_is_kept_and_ours_dropped(tmp_path):
    target = tmp_path / "entry"
    with atomic_dir(target, ".t-", _has("done")) as tmp:
        (tmp / "done").write_text("mine")
        target.mkdir()  # another process finishes first
        (target / "done").write_text("theirs")
        opened = (target / "done").open()  # and a reader has it open
    assert (target / "done").read_text() == "theirs"
    assert os.fstat(opened.fileno()).st_ino == (target / "done").stat().st_ino
    opened.close()
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]


def test_a_stale_entry_is_replaced(tmp_path):
    target = tmp_path / "entry"
    target.mkdir()
    (target / "old").write_text("stale")
    with atomic_dir(target, ".t-", _has("done")) as tmp:
        (tmp / "done").write_text("mine")
    assert sorted(p.name for p in target.iterdir()) == ["done"]
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]


def test_an_entry_that_takes_the_name_after_the_check_is_kept(tmp_path):
    """The other writer renames its entry in between our check and our rename: ours fails to
    take the name, and the entry found complete then is kept."""
    target = tmp_path / "entry"
    checks = []

    def complete(t):
        checks.append(t.exists())
        if len(checks) == 1:  # the other writer lands right after our first look
            t.mkdir()
            (t / "done").write_text("theirs")
            return False
        return (t / "done").exists()

    with atomic_dir(target, ".t-", complete) as tmp:
        (tmp / "done").write_text("mine")
    assert (target / "done").read_text() == "theirs"
    assert checks == [False, True]
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]


def test_a_failed_block_leaves_nothing(tmp_path):
    target = tmp_path / "entry"
    with pytest.raises(RuntimeError), atomic_dir(target, ".t-", _has("done")) as tmp:
        (tmp / "done").write_text("half")
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_a_record_being_replaced_reads_as_missing(tmp_path):
    assert read_meta(tmp_path / "gone", "toy.json", {}) is None
    (tmp_path / "toy.json").write_text(json.dumps({"steps": 3}))
    assert read_meta(tmp_path, "toy.json", {}) == {"steps": 3}


def test_a_record_of_another_model_reads_as_missing(tmp_path):
    (tmp_path / "toy.json").write_text(json.dumps({"version": 2, "steps": 3, "curve": [1.0]}))
    assert read_meta(tmp_path, "toy.json", {"version": 2, "steps": 3}) == {
        "version": 2,
        "steps": 3,
        "curve": [1.0],
    }
    assert read_meta(tmp_path, "toy.json", {"version": 2, "steps": 4}) is None
    assert read_meta(tmp_path, "toy.json", {"version": 2, "seed": 0}) is None
