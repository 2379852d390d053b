"""The stage contract: a stage is its package and one registry line, and it then appears in
`interp run`, its own command, the manifest, `load_run`, the report and the generated docs; a
stage command reruns with the run's recorded config, changed only by the flags given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import interp
from interp.cli import build_cli
from interp.pipeline.stages import declared, register, unregister
from tools import reference as docs  # the generator of the docs reference

ROOT = Path(__file__).resolve().parents[2]


def invoke(cli, *args):
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


@pytest.fixture()
def toy_stage():
    register(declared("toy_stage"))  # the one registry line
    yield
    unregister("toy")


def test_a_registered_stage_runs_everywhere_the_registry_reaches(toy_stage, model_dir, tmp_path):
    cli = build_cli()
    out = tmp_path / "runs"
    common = ("--model", model_dir, "--out", out, "--n-syntax", 20, "--skip", "ablate", "-q")
    assert "--toy-scale" in invoke(cli, "run", "--help").output  # its option, from its config
    assert "Writes toy." in invoke(cli, "toy", "--help").output  # its command, from its tables
    invoke(cli, "run", *common, "--skip", "report", "--name", "a", "--toy-scale", 3)
    run_dir = out / model_dir.name / "a"
    recorded = manifest(run_dir)["stages"]["toy"]
    assert recorded["config"] == {"scale": 3} and recorded["heads"] == 12  # its typed record
    toy = interp.load_run(run_dir).toy  # its table, validated against its schema
    assert len(toy) == 12 and (toy["n"] % 3 == 0).all() and str(toy["n"].dtype) == "int64"

    invoke(cli, "run", *common, "--skip", "report", "--name", "a", "--toy-scale", 3, "--resume")
    assert manifest(run_dir)["stages"]["toy"]["id"] == recorded["id"]  # finished: skipped

    invoke(cli, "run", *common, "--skip", "report", "--name", "b", "--skip", "toy")
    assert "toy" not in manifest(out / model_dir.name / "b")["stages"]
    assert interp.load_run(out / model_dir.name / "b").toy is None

    invoke(cli, "toy", run_dir, "--scale", 5, "-q")  # its own command, with a generated option
    again = interp.load_run(run_dir).toy
    assert manifest(run_dir)["stages"]["toy"]["config"] == {"scale": 5}
    assert (again["n"] == toy["n"] // 3 * 5).all()

    invoke(cli, "report", run_dir, "--no-pdf", "-q")  # its report section, where it asked
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    order = [part.partition('"')[0] for part in html.split('<section id="')[1:]]
    # after features (and the section collect put there first), before the ablate stage's
    assert order[order.index("features") :][:3] == ["features", "syntax", "toy"]
    assert 'id="toy-table"' in html

    # the generated docs: the stage, its command and options, its table's columns
    assert "| `interp toy` (toy_stage.stage) | Count each head's features." in docs.stages(ROOT)
    assert "interp toy" in docs.cli_reference(ROOT, cli) and "--toy-scale" in docs.cli_reference(
        ROOT, cli
    )
    assert "## `toy`\n\nOne row per head" in docs.columns(ROOT)


def test_the_toy_stage_is_gone_once_unregistered():
    assert "toy" not in build_cli().commands
    assert "toy" not in interp.pipeline.tables.TABLES
    assert "interp toy" not in docs.stages(ROOT)


def test_a_stage_command_reruns_with_the_recorded_config_changed_only_by_its_flags(
    model_dir, tmp_path
):
    cli = build_cli()
    out = tmp_path / "runs"
    invoke(
        cli,
        "run",
        "--model",
        model_dir,
        "--out",
        out,
        "--name",
        "q",
        "--quick",
        "--n-syntax",
        20,
        "--skip",
        "report",
        "--ablate-n-prose",
        4,
        "--max-rounds",
        1,
        "-q",
    )
    run_dir = out / model_dir.name / "q"
    record = manifest(run_dir)["stages"]["ablate"]
    quick = record["config"]
    # --quick sized what the user left alone and kept the option given (it would make it 3)
    assert quick["quick"] is True and (quick["n_prose"], quick["n_repeated"]) == (4, 3)
    assert record["resolved_config"]["n_prose"] == 4

    invoke(cli, "ablate", run_dir, "-q")
    assert manifest(run_dir)["stages"]["ablate"]["config"] == quick
    invoke(cli, "ablate", run_dir, "--top-k", 5, "-q")
    assert manifest(run_dir)["stages"]["ablate"]["config"] == {**quick, "top_k": 5}


@pytest.mark.slow
def test_the_packaged_encoder_quick_run_then_its_ablate_stage_keeps_quick(tmp_path):
    cli = build_cli()
    out = tmp_path / "runs"
    invoke(
        cli,
        "run",
        "--model",
        "minilm-l6",
        "--quick",
        "--name",
        "q",
        "--out",
        out,
        "--skip",
        "report",
        "-q",
    )
    run_dir = out / "minilm-l6" / "q"
    quick = manifest(run_dir)["stages"]["ablate"]["config"]
    invoke(cli, "ablate", run_dir, "-q")
    assert manifest(run_dir)["stages"]["ablate"]["config"] == quick and quick["quick"] is True
    invoke(cli, "ablate", run_dir, "--top-k", 5, "-q")
    assert manifest(run_dir)["stages"]["ablate"]["config"] == {**quick, "top_k": 5}


def test_wrong_option_types_are_one_line_errors_naming_the_field(model_dir, tmp_path):
    result = CliRunner().invoke(
        build_cli(),
        ["run", "--model", str(model_dir), "--out", str(tmp_path), "--n-syntax", "many"],
    )
    assert result.exit_code == 2 and "--n-syntax" in result.output
    for kwargs, field in ((dict(seed="x"), "seed"), (dict(n_syntax="many"), "n_syntax")):
        with pytest.raises(
            interp.errors.ConfigError,
            match=rf"^CollectConfig\.{field}: input should be a valid integer",
        ):
            interp.CollectConfig(**kwargs)
    with pytest.raises(
        interp.errors.ConfigError,
        match=r"^AblateConfig\.prune: input should be a valid boolean, got 'no'",
    ):
        interp.AblateConfig(prune="no")
    with pytest.raises(
        interp.errors.ConfigError, match=r"CollectConfig\.seed: .*less than or equal"
    ):
        interp.RunOptions.from_dict({"stages": {"collect": {"seed": 2**65}}})
