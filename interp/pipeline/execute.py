# Over 400 lines: a run, its resume and its replay share one run directory's checks.
"""The whole job, stage after stage from the registry (:mod:`interp.pipeline.stages`), in one run directory.

Everything that can be checked without the model is checked before it loads: the run name and
where it leads, whether the run exists (``--resume`` needs it to), every user corpus. Each stage
then writes its outputs atomically and records itself in the manifest, so an interrupted run keeps every finished stage, and
``--resume`` skips a stage whose recorded config and input hashes match and whose outputs read
back, unless a stage it reads from ran again since. A run that fails before any stage finished
leaves no directory behind, not even the folders made for it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp.config import from_jsonable
from interp.errors import ConfigError, InterpWarning, RunError
from interp.model.spec import DType, ModelSpec, model_slug
from interp.pipeline import clock, provenance, rundir
from interp.pipeline.lock import LOCK, run_lock
from interp.pipeline.options import RunOptions
from interp.pipeline.stages import STAGES, stage, stage_names
from interp.pipeline.tables import TABLES

if TYPE_CHECKING:  # the model stack loads only when a stage needs it (a report never does)
    from interp.model.load import LoadedModel


def run_pipeline(
    options: RunOptions = RunOptions(), model: LoadedModel | None = None, progress: bool = True
) -> Path:
    """Run every stage the options ask for; return the run directory.

    The run directory is made and locked (:mod:`interp.pipeline.lock`) before anything in it is
    read: a second process on the same run ends with one line naming the holder. A run that
    ends, however it ends, before any stage finished is removed with the folders made for it.
    The run's clock (:mod:`interp.pipeline.clock`) starts here, before the model loads.
    """
    with clock.run_started():
        return _run_pipeline(options, model, progress)


def _run_pipeline(options: RunOptions, model: LoadedModel | None, progress: bool) -> Path:
    from interp.model.load import load_model

    out = rundir.check_out_dir(options.out_dir)
    slug = model.slug if model is not None else model_slug(options.model.name)
    run_dir, made = _claim(out, slug, options)
    try:
        with run_lock(run_dir):
            try:
                _check_target(run_dir, options)
                check_corpora(options)
                model = model or load_model(options.model)
                options = dataclasses.replace(options, model=recorded_spec(model))
                model_hash = provenance.model_hash(model.name, model.source)
                _start(run_dir, options, model, model_hash)
                run_stages(run_dir, model, options, progress, model_hash)
            except BaseException as exc:
                if run_dir in made and not _finished(run_dir):
                    shutil.rmtree(
                        run_dir, ignore_errors=True
                    )  # nothing finished: leave nothing behind
                    # the CLI says no run was kept
                    exc.run_removed = str(run_dir)  # type: ignore[attr-defined]
                raise
    except BaseException:
        rundir.remove_dirs(
            [p for p in made if p.exists()]
        )  # the folders made for it, each only if empty
        raise
    return run_dir


def _claim(out: Path, slug: str, options: RunOptions) -> tuple[Path, list[Path]]:
    """The run directory these options name, made now if missing, and the folders made for it
    (outermost first). A run without a name takes the first timestamp name free on disk: the
    folder is made exclusively, so two runs started in the same second never share one."""
    if all(st.name in options.skip for st in STAGES):
        raise RunError(
            f"every stage is skipped (--skip {' --skip '.join(options.skip)}): nothing would run; "
            f"leave out at least one --skip"
        )
    if options.run_name is None:
        if options.resume:
            raise RunError("--resume continues a named run: give its --name")
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        for name in (stamp, *(f"{stamp}-{i}" for i in range(2, 100))):
            run_dir = rundir.run_path(out, slug, name)
            made = rundir.make_dirs(run_dir.parent)
            try:
                run_dir.mkdir()
            except FileExistsError:
                continue
            except OSError as exc:
                rundir.remove_dirs(made)
                raise RunError(
                    f"cannot create {run_dir}: {exc.strerror} (pass --out with a writable folder)"
                ) from None
            return run_dir, [*made, run_dir]
        raise RunError(f"cannot create {run_dir}: File exists (pass --out with a writable folder)")
    run_dir = rundir.run_path(out, slug, options.run_name)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunError(f"{run_dir} exists and is a file: choose another --name")
    if options.resume and not (run_dir / rundir.MANIFEST).exists():
        raise RunError(
            f"no run to resume at {run_dir}: check --out, --name and --model, or leave out --resume"
        )
    return run_dir, rundir.make_dirs(run_dir)


def _check_target(run_dir: Path, options: RunOptions) -> None:
    """The run directory, checked against what is on disk (under its lock)."""
    started = (run_dir / rundir.MANIFEST).exists()
    if options.resume and not started:
        raise RunError(
            f"no run to resume at {run_dir}: check --out, --name and --model, or leave out --resume"
        )
    if started and not options.resume:
        raise RunError(
            f"run {run_dir} exists: pass --resume to continue it or --name for a new one"
        )
    if not started and any(
        p for p in run_dir.iterdir() if not p.name.endswith(".tmp") and p.name != LOCK
    ):
        raise RunError(f"{run_dir} exists and is not a run directory: choose another --name")
    if started:
        rundir.read_manifest(run_dir)  # a corrupt manifest fails now, before the model loads


def check_corpora(options: RunOptions) -> None:
    """Read every user file a stage will read, now, so that a bad one fails before the model loads
    (each stage's ``check``; the stage reads them again: they are streamed, and this costs far
    less than a model load)."""
    for st in STAGES:
        if st.name not in options.skip and st.check:
            st.checker()(options.stage_config(st.name))


def _start(run_dir: Path, options: RunOptions, model: LoadedModel, model_hash: str | None) -> None:
    """Write the manifest of a new run, or bring a resumed run's options up to date."""
    corpora = {
        name: digest
        for st in STAGES
        for name, digest in st.inputs(options.stage_config(st.name), None).get("files", {}).items()
    }
    seeds = [seed for c in options.stages.values() if (seed := c.random_seed) is not None]
    if not (run_dir / rundir.MANIFEST).exists():
        rundir.write_manifest(
            run_dir,
            {
                "model": model.facts(),
                "provenance": provenance.provenance(
                    seeds[0] if seeds else None, model_hash, corpora
                ),
                "options": rundir.jsonable(options),
                "stages": {},
            },
        )
        return
    rundir.clear_temporaries(run_dir)
    _restore_csv_twins(run_dir)
    manifest = rundir.read_manifest(run_dir)
    manifest["options"] = rundir.jsonable(options)
    manifest.setdefault("provenance", {}).setdefault("resumed", []).append(
        dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    )
    rundir.write_manifest(run_dir, manifest)


def _restore_csv_twins(run_dir: Path) -> None:
    """Write again the csv twin of every declared table whose parquet reads back but whose csv is
    gone (the parquet is the table; the csv is its copy for spreadsheets)."""
    for name in TABLES:
        if (run_dir / f"{name}.parquet").exists() and not (run_dir / f"{name}.csv").exists():
            try:
                frame = rundir.read_table(run_dir, name)
            except RunError:
                continue  # unreadable: the stage that writes it runs again, and writes both
            if frame is None:
                continue
            with rundir.atomic_path(run_dir / f"{name}.csv") as tmp:
                frame.to_csv(tmp, index=False)


def _finished(run_dir: Path) -> bool:
    try:
        return bool(rundir.read_manifest(run_dir).get("stages"))
    except RunError:
        return False


def run_stages(
    run_dir: Path,
    model: LoadedModel | None,
    options: RunOptions,
    progress: bool,
    model_hash: str | None = None,
) -> list[str]:
    """Run the registry's stages in order (skipping ``options.skip``); return the names that ran.

    Under ``resume`` a finished stage is skipped when :meth:`Stage.done` says so: same config,
    same input hashes, outputs readable, and recorded after the current run of every stage it
    reads (roles classified from older features are stale even if classify's config is not).
    """
    ran: list[str] = []
    for st in STAGES:
        if st.name in options.skip:
            continue
        config = options.stage_config(st.name)
        inputs = st.inputs(config, model_hash)
        if options.resume and st.done(run_dir, config, inputs):
            continue
        st.run(run_dir, model, config, progress, inputs)
        ran.append(st.name)
    return ran


def rerun_stage(
    run_dir: str | Path,
    name: str,
    config: Any = None,
    model: LoadedModel | None = None,
    changes: dict[str, Any] | None = None,
    device: str | None = None,
    dtype: DType | None = None,
    progress: bool = True,
    quick: bool = False,
) -> None:
    """Run one stage again on an existing run (``interp classify RUN_DIR`` and the like).

    The stage runs with ``config``, or else with the config the run recorded for it (its last
    run's, or the run's options), changed by ``changes`` (the flags a user gave); ``quick``
    makes it the config's ``--quick`` form, the fields in ``changes`` kept. A stage that
    needs the model loads the one the run recorded (``device`` and ``dtype`` override its
    settings) unless ``model`` is given.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        rundir.read_manifest(run_dir)  # says it is no run
    with run_lock(run_dir):  # held to the end: no other process reads or writes the run meanwhile
        _rerun_stage(run_dir, name, config, model, changes, device, dtype, progress, quick)


def _rerun_stage(
    run_dir: Path,
    name: str,
    config: Any,
    model: LoadedModel | None,
    changes: dict[str, Any] | None,
    device: str | None,
    dtype: DType | None,
    progress: bool,
    quick: bool,
) -> None:
    rundir.read_manifest(run_dir)  # fail now, not after loading a model, if it is no run
    st = stage(name)
    config = recorded_config(run_dir, name) if config is None else config
    if changes:
        config = dataclasses.replace(config, **changes)
    if quick:
        config = config.for_quick(keep=tuple(changes or ()))
    check_corpora(
        RunOptions(stages={name: config}, skip=tuple(s for s in stage_names() if s != name))
    )
    model_hash = None
    if st.needs_model:
        if model is None:
            from interp.model.load import load_model

            spec = model_spec_of(run_dir, name)
            spec = dataclasses.replace(
                spec, device=device or spec.device, dtype=dtype or spec.dtype
            )
            model = load_model(spec)
        model_hash = provenance.model_hash(model.name, model.source)
    rundir.clear_temporaries(run_dir)
    st.run(run_dir, model, config, progress, st.inputs(config, model_hash))


def recorded_config(run_dir: Path, name: str) -> Any:
    """The config a stage of this run last ran with; for a stage that never ran, the one the run's
    options give it (``quick`` applied); for neither, the defaults."""
    manifest = rundir.read_manifest(run_dir)
    st = stage(name)
    where = Path(run_dir) / rundir.MANIFEST
    ran = (manifest.get("stages", {}).get(name) or {}).get("config")
    try:
        if isinstance(ran, dict):
            _no_python_tasks(ran.get("tasks"), where, name)
            return from_jsonable(st.config, ran)
        if isinstance(manifest.get("options"), dict):
            options = manifest["options"]
            recorded = (options.get("stages") or {}).get(name, options.get(name))
            if recorded is not None and not isinstance(recorded, dict):
                raise ConfigError(
                    f"options.{name} is a JSON {rundir.json_type(recorded)}, not an object"
                )
            _no_python_tasks((recorded or {}).get("tasks"), where, name)
            return RunOptions.from_dict(options).stage_config(name)
    except ConfigError as exc:
        raise RunError(
            f"{where} records a {name} config this version cannot use ({exc}); "
            f"rerun `interp run` with the options you used"
        ) from None
    return st.config()


def _no_python_tasks(tasks: Any, where: Path, name: str) -> None:
    if not isinstance(tasks, list):  # none, or of a wrong type that reading the config refuses
        return
    names = [t.get("name") for t in tasks if isinstance(t, dict)]
    if names:
        raise RunError(
            f"{where} was made with metrics defined in Python ({', '.join(map(str, names))}): rerun the {name} "
            f"stage from Python: interp.rerun_stage(run_dir, {name!r}, config=AblateConfig(tasks=...))"
        )


def recorded_spec(model: LoadedModel) -> ModelSpec:
    """The model spec a run records in its options: the one that loads the model again (a path
    made absolute), or, for a model built in Python, its name and settings (the manifest's
    ``model.spec`` is then null, and stage commands say to rerun from Python)."""
    return model.spec or ModelSpec(
        name=model.name, device=model.device, dtype=model.dtype, causal=model.causal
    )


def model_spec_of(run_dir: Path, stage_name: str | None = None) -> ModelSpec:
    """The model a run was made with, to rerun one of its stages (``stage_name``) or all of it."""
    facts: dict[str, Any] = rundir.read_manifest(run_dir).get("model", {})
    if "name" not in facts:
        raise RunError(f"{run_dir}/manifest.json names no model; rerun `interp run`")
    if facts.get("source") == "bridge":
        load = f"interp.load_model(bridge, tokenizer=tokenizer, name={facts['name']!r})"
        again = (
            f"rerun the {stage_name} stage from Python: interp.rerun_stage({str(run_dir)!r}, "
            f"{stage_name!r}, model={load})"
            if stage_name
            else f"make the run again from Python: interp.run(options, model={load})"
        )
        raise RunError(
            f"{run_dir} was made with a model built in Python ({facts['name']}), which the command line "
            f"cannot load: {again}"
        )
    spec = facts.get("spec")
    if isinstance(spec, dict):
        try:
            return from_jsonable(ModelSpec, spec)
        except (ConfigError, TypeError) as exc:
            raise RunError(
                f"{run_dir}/manifest.json records a model this version cannot load ({exc}); rerun `interp run`"
            ) from None
    raise RunError(f"{run_dir}/manifest.json names no model; rerun `interp run`")


def _list_or_empty(value: object) -> list[Any]:
    """A manifest value that should be a list, else nothing."""
    return value if isinstance(value, list) else []


def options_from_manifest(
    run_dir: str | Path, out_dir: str | None = None, run_name: str | None = None
) -> RunOptions:
    """The options of an earlier run, to make it again (``interp run --from-manifest RUN_DIR``),
    after checking that the model, the corpora and the shipped probe data are still the same
    files; differing package versions only warn (the tables may differ in the last digits)."""
    run_dir = Path(run_dir)
    manifest = rundir.read_manifest(run_dir)
    where = run_dir / rundir.MANIFEST
    recorded = manifest.get("options")
    recorded_options = recorded if isinstance(recorded, dict) else {}
    tasks = [
        t.get("name")
        for configs in (recorded_options.get("stages") or {}, recorded_options)
        for config in configs.values()
        if isinstance(config, dict)
        for t in _list_or_empty(config.get("tasks"))
        if isinstance(t, dict)
    ]
    if tasks:
        raise RunError(
            f"{where} was made with metrics defined in Python ({', '.join(map(str, tasks))}): make the run again "
            f"from Python, with the same interp.Task objects in AblateConfig(tasks=...)"
        )
    try:
        options = RunOptions.from_dict(manifest["options"])
    except KeyError:
        raise RunError(
            f"{where} records no options (an older interp wrote it); rerun `interp run` with the options you used"
        ) from None
    except (ConfigError, TypeError) as exc:
        raise RunError(
            f"{where} holds options this version cannot use ({exc}); rerun `interp run` with the options you used"
        ) from None
    model_spec_of(run_dir)  # a model built in Python cannot be loaded by name
    _check_same_inputs(manifest, where)
    for (
        name,
        config,
    ) in options.stages.items():  # what each stage measured about itself, to replay it
        options = options.with_stage(
            name, config.for_replay(manifest.get("stages", {}).get(name) or {})
        )
    return dataclasses.replace(
        options, out_dir=out_dir or options.out_dir, run_name=run_name, resume=False
    )


def _check_same_inputs(manifest: dict[str, Any], where: Path) -> None:
    recorded = manifest.get("provenance", {})
    facts = manifest.get("model", {})
    where_now = (facts.get("spec") or {}).get("name") or facts.get("name", "")
    now = provenance.model_hash(where_now, facts.get("source", ""))
    if recorded.get("model_hash") and now != recorded["model_hash"]:
        raise RunError(
            f"the model {facts.get('name')} is not the file the run in {where.parent} used "
            f"(its content hash changed); restore that model to reproduce the run"
        )
    for path, digest in (recorded.get("corpus_hashes") or {}).items():
        try:
            same = provenance.file_hash(path) == digest
        except OSError:
            same = False
        if not same:
            raise RunError(
                f"corpus {path} is missing or changed since the run in {where.parent}; restore it to reproduce the run"
            )
    if recorded.get("data_hash") and recorded["data_hash"] != provenance.data_hash():
        warnings.warn(
            "the shipped probe data differ from the run's: the tables will differ",
            InterpWarning,
            stacklevel=2,
        )
    versions = recorded.get("versions") or {}
    changed = [
        f"{k} {v} -> {provenance.package_versions().get(k)}"
        for k, v in versions.items()
        if provenance.package_versions().get(k) != v
    ]
    if changed:
        warnings.warn(
            f"package versions differ from the run's ({', '.join(changed)}): tables may differ slightly",
            InterpWarning,
            stacklevel=2,
        )
