"""Run directories never reach outside --out, never overwrite a user's file, and say why a write failed."""

from __future__ import annotations

import pytest

from interp.errors import RunError
from interp.model.spec import model_slug
from interp.pipeline import rundir


def test_a_directory_in_the_way_is_named_as_such(tmp_path):
    (tmp_path / "report.html").mkdir()
    with pytest.raises(RunError, match="a directory of that name is in the way") as err:
        rundir.write_text(tmp_path / "report.html", "<html>")
    assert "disk space" not in str(err.value)
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary left behind


@pytest.mark.parametrize(
    "name", ["../x", "/abs", "a/b", "..", ".", "", ".hidden", "a\nb", "-flag", "x" * 101]
)
def test_run_names_are_one_safe_component(tmp_path, name):
    with pytest.raises(RunError, match="is not allowed"):
        rundir.run_path(tmp_path, "model", name)


def test_a_symbolic_link_out_of_out_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "model").symlink_to(tmp_path)
    with pytest.raises(RunError, match="leads outside"):
        rundir.run_path(tmp_path / "out", "model", "run")
    assert rundir.run_path(tmp_path / "out", "other", "run") == tmp_path / "out" / "other" / "run"


def test_model_slugs_are_safe_names():
    assert model_slug("../../etc/passwd") == "passwd"
    assert model_slug("./models/Café Model.gguf") == "Caf--Model.gguf"
    assert model_slug("org/name") == "name" and model_slug("...") == "model"


def test_compare_may_replace_an_html_page_only(tmp_path):
    page = tmp_path / "old.html"
    page.write_text("<!DOCTYPE html><html></html>")
    assert rundir.check_out_file(page) == page
    (tmp_path / "notes.html").write_text("my notes")
    with pytest.raises(RunError, match="not an HTML page"):
        rundir.check_out_file(tmp_path / "notes.html")
    (tmp_path / "link.html").symlink_to(tmp_path / "notes.html")
    with pytest.raises(RunError, match="not an HTML page"):
        rundir.check_out_file(tmp_path / "link.html")


def test_made_folders_are_removed_innermost_first_and_only_when_empty(tmp_path):
    made = rundir.make_dirs(tmp_path / "a" / "b" / "c")
    assert made == [tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"]
    (tmp_path / "a" / "keep").write_text("x")
    rundir.remove_dirs(made)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["keep"]


def test_manifests_carry_their_format_and_refuse_a_newer_one(tmp_path):
    rundir.write_manifest(tmp_path, {"stages": {}})
    assert rundir.read_manifest(tmp_path)["format"] == rundir.MANIFEST_FORMAT
    (tmp_path / "manifest.json").write_text('{"format": 3, "stages": {}}')
    with pytest.raises(RunError, match="newer interp"):
        rundir.read_manifest(tmp_path)
