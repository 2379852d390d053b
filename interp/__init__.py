"""interp: what each attention head of a transformer does, and how much the model needs it."""

from interp.rundir import RunTables, load_run

__version__ = "0.1.0"
__all__ = ["load_run", "RunTables", "__version__"]
