"""Many runs as one study: ``interp study STUDY.toml``.

A study is models x corpora x seeds x variants, written as TOML::

    name = "two-models"
    models = ["smollm2-135m", "./my-model"]
    corpora = [[], ["treebank.conllu"]]      # each a list of --corpus files; [] is the built-in probes
    seeds = [0, 1]
    [settings]                                # every run: RunOptions fields and stage configs
    quick = true
    skip = ["report"]
    [settings.stages.collect]
    n_syntax = 200
    [variants.zero.ablate]                    # optional: named changes to stage configs
    ablations = ["zero"]

Each combination is one ordinary run (``<out>/<study name>/<model>/<corpus>-seed<S>[-<variant>]``),
made by :func:`interp.pipeline.execute.run_pipeline` with ``--resume``: a run whose stages are
all recorded with the planned configs is skipped without loading its model, and one that was
stopped half-way continues from its last finished stage, so a study survives being stopped and
started again. A run that fails with a user error is recorded as failed and the study goes on.
Each model is loaded once for all its runs. With ``--executor ray`` the pending runs are Ray
tasks instead, several at once, each loading its model (:mod:`interp.pipeline.study_ray`). The
coordinator alone writes ``study.json`` (the plan and each run's state, after every run) and,
at the end, the cross-run comparison (:mod:`interp.report.study`): tables under
``comparison/`` and ``study.html``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from interp.config import config, from_jsonable, option
from interp.errors import ConfigError, InterpError, InterpWarning, RunError
from interp.model.spec import ModelSpec, model_slug
from interp.pipeline import rundir
from interp.pipeline.execute import run_pipeline
from interp.pipeline.options import RunOptions
from interp.pipeline.results import load_run
from interp.pipeline.stages import STAGES
from interp.report import study as R
from interp.report.html import render_html

STUDY_FILE = "study.json"
# A variant's name ends its runs' names (cut to 100 characters with the rest of the name).
VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@config
class StudyConfig:
    """A study: which runs, and the settings they share."""

    name: str = option(default="study")
    """the study's folder name (letters, digits, '.', '_', '-')"""
    models: tuple[str, ...] = option(default=())
    """the models, each as `interp run --model` takes it"""
    corpora: tuple[tuple[str, ...], ...] = option(default=((),))
    """probe corpora: each entry a list of corpus files for one run ([] for the built-in probes only)"""
    seeds: tuple[int, ...] = option(default=(0,))
    """seeds: each run sets every stage's seed to one of them"""
    settings: dict[str, Any] = option(default={})
    """every run's options: quick, skip, model (device, dtype) and stages.<stage>.<field>"""
    variants: dict[str, dict[str, Any]] = option(default={})
    """named changes to stage configs ({name: {stage: {field: value}}}); each is a run of its own, beside the run
    without changes"""
    out: str = option(default="reports")
    """folder under which the study's folder is made"""

    def __post_init__(self) -> None:
        if not self.models:
            raise ConfigError('a study needs at least one model: models = ["..."]')
        if not self.corpora:
            raise ConfigError(
                "corpora is empty, so the study has no run: give at least one entry ([] for the "
                "built-in probes only)"
            )
        if not self.seeds:
            raise ConfigError("seeds is empty, so the study has no run: give at least one seed")
        rundir.check_run_name(self.name)
        unknown = sorted(set(self.settings) - {"quick", "skip", "model", "stages"})
        if unknown:
            raise ConfigError(
                f"settings has no key {unknown[0]!r}; use quick, skip, model or stages"
            )
        _check_stage_tables("settings.stages", self.settings.get("stages") or {})
        for variant, changes in self.variants.items():
            if not VARIANT_NAME.fullmatch(variant):
                raise ConfigError(
                    f"variant name {variant!r} is not allowed (it names runs): use letters, digits, "
                    f"'.', '_' or '-', starting with a letter or digit"
                )
            _check_stage_tables(f"variants.{variant}", changes)


def _check_stage_tables(where: str, tables: Any) -> None:
    """``where`` must map stage names to tables of their fields (a misspelled stage, read as
    nothing, would leave its runs at the defaults without a word)."""
    if not isinstance(tables, dict):
        raise ConfigError(f"{where} must be a table of stages, got {tables!r}")
    names = [st.name for st in STAGES]
    for name, fields in tables.items():
        if name not in names:
            raise ConfigError(f"{where} has no stage {name!r}; stages are {', '.join(names)}")
        if not isinstance(fields, dict):
            raise ConfigError(f"{where}.{name} must be a table of fields, got {fields!r}")


def read_study(path: str | Path) -> StudyConfig:
    """A study file (TOML) as a checked StudyConfig; a missing or malformed file is one line."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no study file at {path}: give a .toml file (see `interp study --help`)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not a valid TOML study file ({exc})") from None
    return from_jsonable(StudyConfig, data)


def plan(study: StudyConfig) -> list[dict[str, Any]]:
    """Every run of the study: model, corpora, seed, variant and the run's name (checked: no two
    runs share a run directory)."""
    runs = []
    labels = corpus_labels(study.corpora)
    for model in study.models:
        for corpora, label in zip(study.corpora, labels):
            for seed in study.seeds:
                for variant in (None, *study.variants) if study.variants else (None,):
                    name = f"{label}-seed{seed}" + (f"-{variant}" if variant else "")
                    runs.append(
                        {
                            "model": model,
                            "corpora": list(corpora),
                            "seed": seed,
                            "variant": variant,
                            "run": rundir.check_run_name(name[:100]),
                        }
                    )
    _check_distinct(runs)
    return runs


def corpus_labels(corpora: tuple[tuple[str, ...], ...]) -> list[str]:
    """Each corpora entry's label in its runs' names: its files' stems joined by ``+``
    (``builtin`` for none); an entry whose label an earlier one took is numbered (``same-2``),
    so that ``a/same.txt`` and ``b/same.txt`` make two runs, not one."""
    labels: list[str] = []
    for corpora_ in corpora:
        label = "+".join(Path(c).stem for c in corpora_) or "builtin"
        unique = next(
            n
            for n in (label, *(f"{label}-{i}" for i in range(2, len(labels) + 3)))
            if n not in labels
        )
        labels.append(unique)
    return labels


def _check_distinct(runs: list[dict[str, Any]]) -> None:
    """ConfigError when two planned runs would share one run directory (names cut to 100
    characters, two models with one folder name): the second would overwrite the first."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in runs:
        key = (model_slug(entry["model"]), entry["run"])
        if key in seen:
            first = seen[key]
            raise ConfigError(
                f"two runs of the study would share the run directory {key[0]}/{key[1]} "
                f"({_described(first)} and {_described(entry)}): shorten the variant names, or give "
                f"the models or corpus files names that differ"
            )
        seen[key] = entry


def _described(entry: dict[str, Any]) -> str:
    parts = [f"model {entry['model']}", f"corpora {entry['corpora']}", f"seed {entry['seed']}"]
    return ", ".join(parts + ([f"variant {entry['variant']}"] if entry["variant"] else []))


def run_options(study: StudyConfig, entry: dict[str, Any]) -> RunOptions:
    """The RunOptions of one planned run."""
    settings = study.settings
    changes = study.variants.get(entry["variant"], {}) if entry["variant"] else {}
    stages = {}
    for st in STAGES:
        fields = {**(settings.get("stages") or {}).get(st.name, {}), **changes.get(st.name, {})}
        fields.update(st.config.run_wide(entry["seed"], builtin=True))
        stages[st.name] = from_jsonable(st.config, fields).with_corpora(tuple(entry["corpora"]))
    model = from_jsonable(ModelSpec, {**(settings.get("model") or {}), "name": entry["model"]})
    return RunOptions(
        model=model,
        stages=stages,
        out_dir=str(Path(study.out) / study.name),
        run_name=entry["run"],
        quick=bool(settings.get("quick", False)),
        skip=tuple(settings.get("skip", ())),
    )


def run_dir_of(options: RunOptions) -> Path:
    """The run directory of a study's run (every run of a study has a name)."""
    if options.run_name is None:
        raise ValueError("a study's run has a name")
    return rundir.run_path(options.out_dir, model_slug(options.model.name), options.run_name)


def complete(run_dir: Path, options: RunOptions) -> bool:
    """Whether every stage the run should have is recorded with the planned config."""
    try:
        recorded = rundir.read_manifest(run_dir).get("stages", {})
    except InterpError:
        return False
    for st in STAGES:
        if st.name in options.skip:
            continue
        entry = recorded.get(st.name)
        if not isinstance(entry, dict) or entry.get("config") != rundir.jsonable(
            options.stage_config(st.name)
        ):
            return False
    return True


def run_study(
    study: StudyConfig,
    progress: bool = True,
    executor: str = "local",
    address: str | None = None,
    workers: int | None = None,
) -> Path:
    """Run (or continue) every run of the study, then write the comparison; return the study folder.

    ``executor="ray"``: the pending runs are Ray tasks, several at once (:mod:`interp.pipeline.study_ray`),
    on the cluster at ``address`` (None: one started here), at most ``workers`` at a time."""
    root = rundir.check_out_dir(study.out) / study.name
    entries = plan(study)  # every run named and configured before anything is made
    planned = [run_options(study, entry) for entry in entries]
    _say_renamed(study)
    root.mkdir(parents=True, exist_ok=True)
    pending = []
    for entry, options in zip(entries, planned):
        target = run_dir_of(options)
        entry["run_dir"] = str(target)
        if complete(target, options):
            entry["status"] = "complete"
        else:
            pending.append((entry, options))
    if executor == "ray":
        _on_ray(root, study, entries, pending, address, workers)
    else:
        _locally(root, study, entries, pending, progress)
    _record(root, study, entries)
    write_comparison(root, study, entries)
    failed = [e for e in entries if e.get("status") == "failed"]
    if failed:
        raise RunError(
            f"{len(failed)} of {len(entries)} runs of study {study.name} failed (first: {label(failed[0])}: "
            f"{failed[0]['error']}); fix it and run `interp study` again: finished runs are kept"
        )
    return root


def _say_renamed(study: StudyConfig) -> None:
    """A warning for each corpora entry whose runs are numbered (its files' names repeat another's)."""
    for corpora, label in zip(study.corpora, corpus_labels(study.corpora)):
        plain = "+".join(Path(c).stem for c in corpora) or "builtin"
        if label != plain:
            warnings.warn(
                f"study {study.name}: the runs on corpora {list(corpora)} are named {label}-seed..., "
                f"as another entry's files have the same names",
                InterpWarning,
                stacklevel=2,
            )


def _on_ray(
    root: Path,
    study: StudyConfig,
    entries: list[dict[str, Any]],
    pending: list,
    address: str | None,
    workers: int | None,
) -> None:
    from interp.pipeline.study_ray import run_all

    def done(entry: dict[str, Any], outcome: dict[str, Any]) -> None:
        entry.update(outcome)
        if outcome["status"] == "failed":
            print(
                f"study {study.name}: run {entry['run']} of {entry['model']} failed: {outcome['error']}",
                file=sys.stderr,
            )
        _record(root, study, entries)

    record = run_all(pending, address, workers, done)
    for entry, _ in pending:
        entry["executor"] = record


def _locally(
    root: Path, study: StudyConfig, entries: list[dict[str, Any]], pending: list, progress: bool
) -> None:
    from interp.model.load import load_model  # torch, only when a run is made

    models: dict[str, Any] = {}
    for entry, options in pending:
        target = Path(entry["run_dir"])
        start = time.perf_counter()
        try:
            if entry["model"] not in models:
                models[entry["model"]] = load_model(options.model)
            options = _resumed(options, target)
            run_pipeline(options, model=models[entry["model"]], progress=progress)
            entry["status"] = "complete"
        except InterpError as exc:
            entry["status"], entry["error"] = "failed", str(exc)
            print(
                f"study {study.name}: run {entry['run']} of {entry['model']} failed: {exc}",
                file=sys.stderr,
            )
        entry["seconds"] = round(time.perf_counter() - start, 1)
        _record(root, study, entries)


def _resumed(options: RunOptions, target: Path) -> RunOptions:
    return dataclasses.replace(options, resume=(target / rundir.MANIFEST).exists())


def _record(root: Path, study: StudyConfig, entries: list[dict[str, Any]]) -> None:
    rundir.write_text(
        root / STUDY_FILE, json.dumps({"config": rundir.jsonable(study), "runs": entries}, indent=1)
    )


def label(entry: dict[str, Any]) -> str:
    return f"{model_slug(entry['model'])}/{entry['run']}"


def write_comparison(root: Path, study: StudyConfig, entries: list[dict[str, Any]]) -> Path:
    """The cross-run tables (csv under ``comparison/``) and ``study.html``."""
    done = [e for e in entries if e.get("status") == "complete"]
    runs = {label(e): load_run(e["run_dir"]) for e in done}
    model_of = {label(e): model_slug(e["model"]) for e in done}
    tables = {
        "role_shares": R.role_shares(runs),
        "role_changes": R.role_changes(runs, model_of),
        "effect_spread": R.effect_spread(runs),
        "matched_heads": R.matched_heads(runs, model_of),
    }
    out = root / "comparison"
    out.mkdir(exist_ok=True)
    for name, frame in tables.items():
        rundir.write_text(out / f"{name}.csv", frame.to_csv(index=False))
    figure = R.shares_figure(tables["role_shares"], out / "figures")
    shown = [
        {k: e.get(k) for k in ("model", "run", "seed", "variant", "status", "error")}
        for e in entries
    ]
    doc = R.study_document(
        study.name,
        shown,
        tables["role_shares"],
        tables["role_changes"],
        tables["effect_spread"],
        tables["matched_heads"],
        figure,
    )
    page = root / "study.html"
    rundir.write_text(page, render_html(doc))
    return page
