"""A stage that is not part of interp, built as a built-in one is: its package declares its
config, its tables (its own ``tables.tsv``, in the schema's form), its entry point and its report
section. The stage contract test registers it with one line and drives it through every command,
the report and the docs."""

from importlib.resources import files

from interp.pipeline.contract import ReportSection, Stage
from interp.pipeline.tables import read_schema
from toy_stage.config import ToyConfig

SCHEMA = read_schema(files("toy_stage").joinpath("tables.tsv").read_text(encoding="utf-8"))

STAGE = Stage(
    "toy",
    "Count each head's features.",
    ToyConfig,
    "toy_stage.stage:run_stage",
    reads=("collect",),
    tables=("toy",),
    schema=tuple(SCHEMA.values()),
    sections=(ReportSection("toy", "toy_stage.report:section", after="features"),),
)
