"""Click options built from config fields (interp.config): one option per field, its help the
field's docstring, its default None (not given), so that a command applies only what the user
set (:func:`given_values`)."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any, Literal

import click
from click.core import ParameterSource

from interp.config import fields_of, flag_of, help_of
from interp.executors.placement import Placement


def base_type(hint: Any) -> tuple[Any, bool]:
    """(the type a value of the field has, whether the field is a tuple of them)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is tuple:
        return typing.get_args(hint)[0], True
    return hint, False


def click_type(base: Any) -> Any:
    if typing.get_origin(base) is Literal:
        return click.Choice([str(a) for a in typing.get_args(base)])
    return base if base in (int, float, str) else str


def field_options(
    cls: type,
    dest: Callable[[str], str] = lambda name: name,
    flags: Callable[[str, str], list[str]] = lambda name, flag: [flag],
) -> Callable[[Any], Any]:
    """A decorator adding one option per CLI field of config ``cls``. ``dest(name)`` is the
    parameter name the command receives, ``flags(name, flag)`` the option's names. Every
    option defaults to None (not given): the command applies only what the user set."""
    hints = typing.get_type_hints(cls)

    def decorate(fn: Any) -> Any:
        for name, info in reversed(_own_fields_first(cls)):
            flag = flag_of(cls, name)
            if flag is None:
                continue
            base, multiple = base_type(hints[name])
            default = info.default if info.default is not None and info.default != () else None
            shown = (
                f"  [default: {_shown(default)}]" if default is not None and not multiple else ""
            )
            if base is bool:
                on, _, off = flag.partition("/")
                names = (
                    [flag] if off else [f"{n}/--no-{n.removeprefix('--')}" for n in flags(name, on)]
                )
                fn = click.option(*names, dest(name), default=None, help=help_of(info) + shown)(fn)
                continue
            fn = click.option(
                *flags(name, flag),
                dest(name),
                type=click_type(base),
                multiple=multiple,
                default=None,
                help=help_of(info)
                + (" (repeatable)" if multiple and "repeatable" not in help_of(info) else "")
                + shown,
            )(fn)
        return fn

    return decorate


def _own_fields_first(cls: type) -> list[tuple[str, Any]]:
    """The config's fields, its own before those it inherits (the placement fields: where and on
    how many threads a stage runs), each group in declaration order."""
    own = getattr(cls, "__annotations__", {})
    fields = list(fields_of(cls).items())
    return [f for f in fields if f[0] in own] + [f for f in fields if f[0] not in own]


def placement_options(fn: Any) -> Any:
    """`interp run`'s --threads, --executor, --address, --workers: for every stage that has the
    field (the stages that run the model); --<stage>-<flag> sets one stage's (and wins)."""
    hints = typing.get_type_hints(Placement)
    for name, info in reversed(list(fields_of(Placement).items())):
        flag = flag_of(Placement, name)
        if flag is None:  # a field set only in a config file
            continue
        base, _ = base_type(hints[name])
        fn = click.option(
            flag,
            f"placement__{name}",
            type=click_type(base),
            default=None,
            help=f"{help_of(info)} (every stage that runs the model; --<stage>{flag[1:]} sets one "
            "stage's)",
        )(fn)
    return fn


def _shown(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def given_values(
    cls: type, values: dict[str, Any], dest: Callable[[str], str] = lambda name: name
) -> dict[str, Any]:
    """The fields of ``cls`` the user set on the command line (or in the environment)."""
    ctx = click.get_current_context()
    out = {}
    for name in fields_of(cls):
        key = dest(name)
        if key in values and ctx.get_parameter_source(key) in (
            ParameterSource.COMMANDLINE,
            ParameterSource.ENVIRONMENT,
        ):
            value = values[key]
            if isinstance(value, (tuple, list)) and not value:
                continue
            out[name] = tuple(value) if isinstance(value, list) else value
    return out


def model_flags(name: str, flag: str) -> list[str]:
    return [flag, "-m"] if name == "name" else [flag]


def model_dest(name: str) -> str:
    """The parameter name a model field's option gives the command (beside the stages' own)."""
    return f"model__{name}"
