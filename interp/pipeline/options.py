"""What ``interp run`` does, as data: the model, one config per registered stage, where the run
goes and which stages run. A manifest records it; ``--from-manifest`` and ``--resume`` read it back.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import Field

from interp.config import config, fields_of, from_jsonable, option, require
from interp.errors import ConfigError
from interp.model.spec import ModelSpec
from interp.pipeline import rundir
from interp.pipeline.rundir import RUN_NAME
from interp.pipeline.stages import STAGES, stage, stage_names


@config
class RunOptions:
    """The options of one run.

    ``stages`` maps a stage name to its config; a registered stage left out gets its config's
    defaults. ``quick`` applies each config's ``for_quick`` (a smaller run of the same measures),
    except to the fields named in ``explicit`` as ``"stage.field"`` (set by a flag: a flag wins
    over --quick).
    """

    model: ModelSpec = Field(default_factory=ModelSpec)
    stages: dict[str, Any] = Field(default_factory=dict)
    out_dir: str = option(default="reports", flag="--out")
    """folder for run directories"""
    run_name: str | None = option(default=None, flag="--name")
    """run name: letters, digits, '.', '_', '-' (default: a timestamp)"""
    quick: bool = option(default=False)
    """fewer probes and a smaller ablation corpus: minutes, not a quarter hour"""
    skip: tuple[str, ...] = option(default=())
    """stage to leave out (repeatable)"""
    resume: bool = option(default=False)
    """continue a run given by --name, skipping finished stages"""
    explicit: tuple[str, ...] = option(default=(), cli=False)
    """the stage fields a user set explicitly, as "stage.field" (--quick leaves them as they are)"""

    def __post_init__(self) -> None:
        require(
            self,
            "run_name",
            self.run_name is None or bool(RUN_NAME.fullmatch(self.run_name)),
            "1-100 letters, digits, '.', '_' or '-', starting with a letter or digit (no '/', no '..')",
        )
        require(self, "out_dir", bool(self.out_dir) and "\0" not in self.out_dir, "a folder path")
        require(
            self,
            "skip",
            all(name in stage_names() for name in self.skip),
            f"stage names among {', '.join(stage_names())}",
        )
        unknown = sorted(set(self.stages) - set(stage_names()))
        if unknown:
            raise ConfigError(
                f"stages has no stage {unknown[0]!r}; stages are {', '.join(stage_names())}"
            )
        full = {}
        for st in STAGES:
            given = self.stages.get(st.name, st.config())
            if not isinstance(given, st.config):
                raise ConfigError(
                    f"stages[{st.name!r}] must be a {st.config.__name__}, got {type(given).__name__}"
                )
            full[st.name] = given
        object.__setattr__(self, "stages", full)

    def __getattr__(self, name: str) -> Any:
        """``options.collect`` is ``options.stages["collect"]``."""
        stages = self.__dict__.get("stages") or {}
        if name in stages:
            return stages[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def with_stage(self, name: str, config: Any) -> RunOptions:
        """These options with one stage's config replaced."""
        return dataclasses.replace(self, stages={**self.stages, name: config})

    def stage_config(self, name: str) -> Any:
        """The config a stage runs with under these options (``quick`` applied)."""
        config = self.stages[name]
        if not self.quick:
            return config
        keep = tuple(e.partition(".")[2] for e in self.explicit if e.partition(".")[0] == name)
        return config.for_quick(keep=keep)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOptions:
        """The options recorded in a manifest back as objects (a manifest written before stages were
        a mapping, with one key per stage, reads too)."""
        if not isinstance(data, dict):
            raise ConfigError(f"{cls.__name__} must be a JSON object, got {type(data).__name__}")
        data = dict(data)
        stages = data.pop("stages", None) or {}
        if not isinstance(stages, dict):
            raise ConfigError(f"options.stages is a JSON {rundir.json_type(stages)}, not an object")
        stages = dict(stages)
        for name in stage_names():
            if name in data:
                stages[name] = data.pop(name)
        for name, value in stages.items():
            if not isinstance(value, dict):
                raise ConfigError(
                    f"options.{name} is a JSON {rundir.json_type(value)}, not an object"
                )
        unknown = sorted(set(stages) - set(stage_names()))
        if unknown:
            raise ConfigError(
                f"stages has no stage {unknown[0]!r} (recorded by another version of interp)"
            )
        unknown = sorted(set(data) - set(fields_of(cls)))
        if unknown:
            raise ConfigError(
                f"{cls.__name__} has no field {unknown[0]!r} (recorded by another version of interp)"
            )
        model = from_jsonable(ModelSpec, data.pop("model", {}))
        configs = {name: from_jsonable(stage(name).config, value) for name, value in stages.items()}
        return cls(model=model, stages=configs, **data)
