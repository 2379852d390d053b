"""What every config of the toolkit is made of: a frozen pydantic dataclass, validated on every
construction (from Python, from the CLI, from a manifest's JSON, and by ``dataclasses.replace``).

A stage's config lives in its own package (``interp.collect.config``, ...), subclasses
:class:`StageConfig` (the hooks the pipeline calls: ``--quick``, ``--from-manifest``, the run-wide
``--seed`` and ``--no-builtin``) and is declared with its stage (:mod:`interp.pipeline.contract`). Each field is declared with :func:`option`: its type
is checked strictly (``seed="x"`` or ``prune="no"`` is refused, not coerced), its range by the
constraints given there (``ge``, ``le``), and its help text is the field's docstring. The CLI
makes one option of every field (``n_syntax`` -> ``--n-syntax``) unless ``cli=False``; a
field whose value names a file the stage reads is marked ``file=True`` so that ``--resume``
notices when that file changes; one that says only where the work runs (an executor, its
workers) and by design never changes what the stage writes is marked ``placement=True``, and
``--resume`` does not compare it. A wrong value is a :class:`ConfigError` of one line naming the
config, the field, what it expects and what it got.

Nothing here imports torch: the report stage and ``interp --help`` stay light.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, cast

import pydantic
from pydantic import ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonDict
from pydantic_core import ErrorDetails

from interp.errors import ConfigError

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # the type checker reads the configs' fields from it (typing has it from 3.11)
    from typing_extensions import dataclass_transform

# Lists are accepted wherever a tuple is declared (JSON has no tuples): see _tuples.
_PYDANTIC = ConfigDict(
    strict=True, extra="forbid", arbitrary_types_allowed=True, use_attribute_docstrings=True
)
# Counts and seeds: beyond this no loop, array or RNG of the toolkit makes sense.
MAX_INT = 2**31 - 1

C = TypeVar("C", bound="StageConfig")


class StageConfig:
    """The base of every stage's config: the hooks the pipeline calls on it, each doing nothing
    here. A stage's config is a :func:`config` dataclass that subclasses this and overrides the
    hooks that mean something for it."""

    def for_quick(self: C, keep: tuple[str, ...] = ()) -> C:
        """The config under ``--quick``: a smaller run of the same measures. The fields named in
        ``keep`` (the ones a user set) stay as they are: an option given wins over --quick."""
        return self

    def for_replay(self: C, record: Mapping[str, Any]) -> C:
        """The config that makes a recorded stage again exactly (``--from-manifest``), given the
        stage's record in the manifest (what it measured about itself)."""
        return self

    @classmethod
    def run_wide(cls, seed: int | None, builtin: bool) -> dict[str, Any]:
        """Field values that ``interp run``'s run-wide options give this stage: ``--seed`` (None:
        not given) and ``--no-builtin`` (``builtin`` false). A stage's own option wins."""
        return {}

    def with_corpora(self: C, corpora: tuple[str, ...]) -> C:
        """The config reading these probe corpora too (a study's ``corpora``)."""
        return self

    @property
    def random_seed(self) -> int | None:
        """The seed the stage's randomness starts from (recorded in the run's provenance), or
        None when it draws nothing at random."""
        return None

    def replaced(self: C, changes: Mapping[str, Any], keep: tuple[str, ...] = ()) -> C:
        """This config with ``changes`` applied, except to the fields named in ``keep``."""
        kept = {k: v for k, v in changes.items() if k not in keep}
        return dataclasses.replace(cast(Any, self), **kept)  # a subclass is a config dataclass


def option(
    *,
    default: Any = dataclasses.MISSING,
    flag: str | None = None,
    cli: bool = True,
    file: bool = False,
    placement: bool = False,
    **constraints: Any,
) -> Any:
    """A config field: its default, its CLI flag (``None``: from the name), whether it is an option
    at all, whether it names a file the stage reads, whether it only places the work (see
    :func:`without_placement`), and pydantic constraints (``ge``, ``le``)."""
    extra: JsonDict = {"flag": flag, "cli": cli, "file": file, "placement": placement}
    return Field(default, json_schema_extra=extra, **constraints)


T = TypeVar("T", bound=type)


@dataclass_transform(frozen_default=True, field_specifiers=(option, Field))
def config(cls: T) -> T:
    """Make ``cls`` a frozen, strictly validated config dataclass whose errors are one line."""
    made: Any = pydantic.dataclasses.dataclass(frozen=True, config=_PYDANTIC)(cls)
    _inherit_docstrings(made)
    init = made.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *map(_tuples, args), **{k: _tuples(v) for k, v in kwargs.items()})
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            raised = (error.get("ctx") or {}).get("error")
            if isinstance(
                raised, ConfigError
            ):  # from __post_init__ (require): it names its field already
                raise raised from None
            name, message, got, flag = _described(made, error)
            raise ConfigError(f"{made.__name__}.{name}: {message}, got {got}{flag}") from None

    made.__init__ = __init__
    return cast(T, made)


def _inherit_docstrings(cls: type) -> None:
    """Give an inherited field its help text: pydantic reads the docstrings of a class' own
    fields only (a stage config that builds on :class:`interp.executors.placement.Placement`)."""
    for name, info in fields_of(cls).items():
        if info.description:
            continue
        for base in cls.__mro__[1:]:
            inherited = getattr(base, "__pydantic_fields__", {}).get(name)
            if inherited is not None and inherited.description:
                info.description = inherited.description
                break


def _tuples(value: Any) -> Any:
    """JSON and TOML have lists where a config has tuples (nested too)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _described(cls: type, error: ErrorDetails) -> tuple[str, str, str, str]:
    """The parts of a one-line message for the first error pydantic found: the field (``a.0``
    for an item of a tuple), what it expects, what it got, and the option to change."""
    loc = [str(part) for part in error["loc"]]
    message = error["msg"]
    flag = flag_of(cls, loc[0]) if loc and loc[0] in fields_of(cls) else None
    got = "nothing" if error["type"] == "missing" else repr(error["input"])
    return (
        ".".join(loc) or "?",
        message[0].lower() + message[1:],
        got,
        f" (option {flag})" if flag else "",
    )


def require(config: Any, name: str, ok: bool, rule: str) -> None:
    """Raise ConfigError "<field> must be <rule>, got <value>" (naming its option) unless ``ok``:
    for the rules that involve several fields or a catalogue, checked in ``__post_init__``."""
    if ok:
        return
    flag = flag_of(type(config), name)
    value = getattr(config, name)
    shown = list(value) if isinstance(value, tuple) else value
    raise ConfigError(
        f"{name} must be {rule}, got {shown!r}" + (f" (option {flag})" if flag else "")
    )


def fields_of(cls: type) -> dict[str, FieldInfo]:
    """The config's fields in declaration order, as pydantic knows them."""
    return dict(cast(Any, cls).__pydantic_fields__)


def extra(info: FieldInfo) -> dict[str, Any]:
    return info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}


def flag_of(cls: type, name: str) -> str | None:
    """The CLI flag of a field (``--n-syntax`` for ``n_syntax``), or None when it has none."""
    info = fields_of(cls).get(name)
    if info is None or not extra(info).get("cli", True):
        return None
    return extra(info).get("flag") or "--" + name.replace("_", "-")


def help_of(info: FieldInfo) -> str:
    return " ".join((info.description or "").split())


def file_fields(config: Any) -> list[str]:
    """The paths a config names in its ``file=True`` fields (a single path or a tuple of them)."""
    paths: list[str] = []
    for name, info in fields_of(type(config)).items():
        value = getattr(config, name)
        if extra(info).get("file") and value:
            paths.extend(value if isinstance(value, tuple) else (value,))
    return [str(p) for p in paths]


def without_placement(cls: type, data: Any) -> Any:
    """A config's JSON form without its ``placement=True`` fields: what decides whether a recorded
    stage is the same as the one asked for (a run whose sweep ran on Ray workers is done for a
    resume on one process, the tables being identical by design)."""
    if not isinstance(data, dict):
        return data
    placed = {name for name, info in fields_of(cls).items() if extra(info).get("placement")}
    return {k: v for k, v in data.items() if k not in placed}


def from_jsonable(cls: type, data: Any) -> Any:
    """A config from its JSON form (a manifest): lists become tuples, nested configs are rebuilt;
    an unknown field or a wrong type is a ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError(f"{cls.__name__} must be a JSON object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(data) - set(fields_of(cls)))
    if unknown:
        raise ConfigError(
            f"{cls.__name__} has no field {unknown[0]!r} (recorded by another version of interp)"
        )
    return cls(**{k: _from_json_value(hints[k], v) for k, v in data.items()})


def _from_json_value(hint: Any, value: Any) -> Any:
    options = (
        typing.get_args(hint)
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
        else (hint,)
    )
    for candidate in options:
        if (
            isinstance(candidate, type)
            and dataclasses.is_dataclass(candidate)
            and isinstance(value, dict)
        ):
            return from_jsonable(candidate, value)
    return value
