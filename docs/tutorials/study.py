# %% [markdown]
# # Two models in a study
#
# A question about several models, corpora, seeds or settings is one study file: `interp study`
# makes every combination an ordinary run, skips the runs already finished, and writes tables
# that line the runs up ([Studies](../how-to/studies.md)).
#
# The two models here are tiny random-init models of two families (Llama and Qwen2, 2 layers x 4
# heads) that this tutorial builds, so that it runs in a minute: their heads mean nothing, and the
# tables below show what a study gives, not findings. Name packaged or your own models instead
# (`models = ["smollm2-135m", "minilm-l6"]`).

# %%
import os
import tempfile
import warnings

os.chdir(tempfile.mkdtemp(prefix="interp-tutorial-"))  # a scratch folder: runs land in ./reports
warnings.filterwarnings("ignore", message="IProgress not found")  # no widgets needed here

# %%
from interp.model.tiny import build_tiny

build_tiny("llama", "tiny-llama")
build_tiny("qwen2", "tiny-qwen2", n_kv_heads=1)

# %% [markdown]
# ## The study file
#
# Models x corpora x seeds x variants; `[settings]` apply to every run. These runs are `--quick`
# and leave the report stage out; a variant would add runs with a changed stage config beside the
# plain ones (`[variants.zero.ablate]` `ablations = ["zero"]`).

# %%
from pathlib import Path

Path("two-models.toml").write_text(
    """
name = "two-models"
models = ["./tiny-llama", "./tiny-qwen2"]
seeds = [0]

[settings]
quick = true
skip = ["report"]
"""
)

# %% [markdown]
# ## Running it
#
# On the command line this is `interp study two-models.toml`; run it again after a stop and it
# continues where it was. Here the notebook calls the same command.

# %%
import subprocess
import sys

done = subprocess.run(
    [sys.executable, "-m", "interp", "study", "two-models.toml", "-q"],
    capture_output=True,
    text=True,
    check=True,
)
print(done.stdout)

# %% [markdown]
# ## What it compares
#
# `comparison/` holds the cross-run tables, computed from the runs' tables only. `role_shares`
# lines models of different depths up by relative depth (first, middle and last third of the
# layers): the share of that depth's heads carrying each role.

# %%
import pandas as pd

study = Path("reports/two-models")
shares = pd.read_csv(study / "comparison" / "role_shares.csv")
shares.pivot_table(index=["depth", "role"], columns="run", values="share", fill_value=0)

# %% [markdown]
# `matched_heads` has one row per head and run (role, confidence, every role score, the effect the
# run's report shows): pivot on the model (or the run) to read a head across runs. Both models
# being random, expect no textbook role here: random weights mostly spread attention evenly.

# %%
matched = pd.read_csv(study / "comparison" / "matched_heads.csv")
matched.pivot_table(
    index=["layer", "head"],
    columns="model",
    values=["role", "confidence", "effect"],
    aggfunc="first",
)

# %% [markdown]
# Each run is an ordinary run directory, so everything else works on it too:

# %%
import interp

runs = sorted(p.parent for p in study.rglob("manifest.json"))
interp.load_run(runs[0])

# %% [markdown]
# `study.html` shows the same tables and the role shares by depth as a figure, self-contained
# like a report.

# %%
print(study / "study.html")
