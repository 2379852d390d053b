"""Drawing the report's sections in several processes: the same sections, the same files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from interp.pipeline.results import load_run
from interp.pipeline.stages import STAGES
from interp.report import content as C
from interp.report.document import stage_sections
from interp.report.drawing import can_fork, draw_sections

needs_fork = pytest.mark.skipif(not can_fork(), reason="sections are drawn in forked workers")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@needs_fork
def test_two_processes_draw_the_same_sections_and_files_as_one(make_fake_run, tmp_path):
    run = load_run(make_fake_run(tmp_path / "run"))
    here = stage_sections(run, tmp_path / "one", STAGES, processes=1)
    forked = stage_sections(run, tmp_path / "two", STAGES, processes=2)
    assert forked == here
    assert len(here) > 3 and _files(tmp_path / "two") == _files(tmp_path / "one")


def _text_of_pid(run, figures: Path) -> C.Section | None:
    return C.section("pid", "pid", C.Text(str(os.getpid())))


def _nothing(run, figures: Path) -> C.Section | None:
    return None


class Broken(Exception):
    pass


def _broken(run, figures: Path) -> C.Section | None:
    raise Broken("the section failed")


@needs_fork
def test_sections_come_back_in_order_from_other_processes(tmp_path):
    sections = draw_sections([_text_of_pid, _nothing, _text_of_pid], None, tmp_path, processes=2)
    assert sections[1] is None
    pids = {int(s.blocks[0].text) for s in sections if s is not None}
    assert os.getpid() not in pids


def test_one_process_draws_here(tmp_path):
    sections = draw_sections([_text_of_pid, _nothing], None, tmp_path, processes=1)
    assert int(sections[0].blocks[0].text) == os.getpid() and sections[1] is None


def test_without_fork_every_section_is_drawn_here(tmp_path, monkeypatch):
    from interp.report import drawing

    monkeypatch.setattr(drawing, "can_fork", lambda: False)
    sections = draw_sections([_text_of_pid, _text_of_pid], None, tmp_path, processes=2)
    assert [int(s.blocks[0].text) for s in sections] == [os.getpid()] * 2


def test_the_report_stage_records_one_process_without_fork(fake_run, monkeypatch):
    from interp.report import drawing
    from interp.report.config import ReportConfig
    from interp.report.stage import run_stage

    monkeypatch.setattr(drawing, "can_fork", lambda: False)
    assert run_stage(fake_run, config=ReportConfig(processes=2, pdf=False)).fields() == {
        "processes": 1
    }


@needs_fork
def test_a_section_error_is_raised_to_the_caller(tmp_path):
    with pytest.raises(Broken, match="the section failed"):
        draw_sections([_nothing, _broken], None, tmp_path, processes=2)


@needs_fork
def test_the_report_stage_records_how_many_processes_drew_it(fake_run):
    from interp.report.config import ReportConfig
    from interp.report.stage import run_stage

    config = ReportConfig(processes=2, pdf=False)  # the PDF is not what these tests are about
    assert run_stage(fake_run, config=config).fields() == {"processes": 2}
    assert "fig-role_map" in (fake_run / "report.html").read_text(encoding="utf-8")
