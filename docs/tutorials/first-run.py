# %% [markdown]
# # A first run
#
# This tutorial runs the whole pipeline on the packaged SmolLM2-135M (30 layers x 9 heads):
# collect every head's attention features, label each head with a role, measure what removing a
# head does, and write the report. It then reads the tables, draws two of the report's figures and
# looks at where chosen heads attend on a prompt of your own.
#
# To run in about two minutes on a laptop CPU (the tests run it), it reads fewer probes than even
# `--quick`, ablates only the heads the estimator ranks highest (an estimator that reads only
# the sweep's sentences) and draws no pruning curve. The
# real thing is one command, `interp run --model smollm2-135m` (about ten minutes on two cores),
# or the same call below without the smaller settings.

# %%
import os
import tempfile
import warnings

os.chdir(tempfile.mkdtemp(prefix="interp-tutorial-"))  # a scratch folder: runs land in ./reports
warnings.filterwarnings("ignore", message="IProgress not found")  # no widgets needed here

# %%
import interp

model = interp.load_model("smollm2-135m")
print(model.name, f"{model.n_layers} layers x {model.n_heads} heads")

# %% [markdown]
# ## One run
#
# `interp.run` is `interp run`: collect, ablate, classify, report, each stage with its config.

# %%
options = interp.RunOptions(
    quick=True,
    run_name="first-run",
    stages={
        "collect": interp.CollectConfig(
            n_repeated=16, n_syntax=100, max_sentences=40, n_bootstrap=50
        ),
        "ablate": interp.AblateConfig(
            top_k=3, max_rounds=1, ig_steps=1, estimator_positions=0, prune=False
        ),
        "report": interp.ReportConfig(pdf=False),
    },
)
run_dir = interp.run(options, model=model, progress=False)

# %% [markdown]
# A run is a folder of tables, figures and the report; in a notebook it shows what it holds.

# %%
run = interp.load_run(run_dir)
run

# %% [markdown]
# ## Roles
#
# Each head gets a primary role with a calibrated confidence, its sink mass (how much of its
# attention it parks on the first token) beside it, and how stable the role is when the probes are
# resampled ([Roles and their evidence](../concepts/roles.md), [Sinks](../concepts/sinks.md)).

# %%
run.roles.sort_values("confidence", ascending=False)[
    ["layer", "head", "role", "confidence", "sink_mass", "stability"]
].head(10)

# %% [markdown]
# The features behind a role: `raw` is the share of all the head's attention on the feature's
# targets (TransformerLens' `detect_head` score), `value` the same off the sink, `baseline` what a
# head without preference scores. Select a head with `run.roles["head"]`, never `run.roles.head`
# (that is pandas' method).

# %%
induction = run.features.query("feature == 'induction'").nlargest(5, "raw")
induction[["layer", "head", "raw", "value", "baseline", "ci_low", "ci_high"]]

# %%
interp.figure(run, "role_map")

# %% [markdown]
# ## Effects
#
# Every head's effect on each metric, estimated by attribution for all heads and measured exactly
# (mean ablation) for the few the estimator ranks highest: `delta` > 0 means the model got worse
# without the head, with a 95% bootstrap interval over the evaluation sequences
# ([Effects and estimators](../concepts/effects.md)).

# %%
exact = run.effects.query("estimator == 'exact'")
exact.sort_values("delta", ascending=False)[
    ["layer", "head", "metric", "delta", "ci_low", "ci_high", "vs_tolerance", "selected"]
].head(10)

# %%
interp.figure(run, "effect_maps")

# %% [markdown]
# ## The report and your own prompts
#
# `report.html` is one self-contained page (no network); `interp report RUN_DIR` rebuilds it from
# the tables. `interp.show` runs prompts of your own through the model and stores every head's
# pattern on them; the explorer then shows them inline: click a head, hover over a token.

# %%
print(run_dir / "report.html")

# %%
best = induction.iloc[0]  # the head with the largest induction score, on a repeated sentence
shown = interp.show(
    run_dir,
    ["The cat sat on the old mat by the door. The cat sat on the old mat by the door."],
    heads=f"{best['layer']}.{best['head']}",
    model=model,
)
print(shown.text)

# %%
interp.explorer(run_dir, prompts_only=True)
