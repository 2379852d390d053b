# %% [markdown]
# # Your own task: indirect objects
#
# "When Mary and John went to the store, John gave a drink to" ... *Mary*: the indirect object
# (IO), not the repeated subject (S). Wang et al. (2022) found the heads GPT-2 small uses for it:
# name movers that copy the IO from the end, S-inhibition heads that attend from the end to the
# second S. This tutorial asks SmolLM2-135M the same question with an `interp.Task`: a metric of
# your own, with data per prompt (each prompt's S name) and named positions (IO, S1, S2, END)
# ([Your own task](../how-to/own-task.md)).
#
# It ablates exactly only the heads the estimator ranks highest, on 24 prompts, so that it runs
# in a couple of minutes on a laptop CPU: read its numbers as a first look.

# %%
import os
import tempfile
import warnings

os.chdir(tempfile.mkdtemp(prefix="interp-tutorial-"))  # a scratch folder: runs land in ./reports
warnings.filterwarnings("ignore", message="IProgress not found")  # no widgets needed here

# %%
import interp

model = interp.load_model("smollm2-135m")
tok = model.tokenizer

# %% [markdown]
# ## The prompts, their fields and their named positions
#
# Each name is one token after a space. Positions count the tokenizer's ids as written (the BOS
# `interp` prepends is not counted): `END` is the last token, where the model predicts the IO.


# %%
def name_id(word):
    return tok(" " + word).input_ids[0]


def where(ids, word, nth=0):  # the nth position of a name among a prompt's ids
    return [i for i, t in enumerate(ids) if t == name_id(word)][nth]


pairs = [("Mary", "John"), ("Anna", "Tom"), ("Kate", "Paul"), ("Lisa", "Mark"),
         ("Emma", "James"), ("Alice", "Bob")]  # fmt: skip
templates = [
    "When {io} and {s} went to the store, {s} gave a drink to {io}",
    "When {s} and {io} went to the park, {s} gave a ball to {io}",
]
texts, names, s_ids = [], [], []
for template in templates:
    for io, s in pairs * 2:
        text = template.format(io=io, s=s)
        ids = tok(text).input_ids
        texts.append(text)
        names.append({"IO": where(ids, io), "S1": where(ids, s), "S2": where(ids, s, 1),
                      "END": len(ids) - 2})  # fmt: skip
        s_ids.append(name_id(s))
print(len(texts), "prompts;", texts[0], names[0])

# %% [markdown]
# ## The metric
#
# `metric(logits, tokens, s)` gets the logits at the scored positions (`END`), the token that
# follows them (the IO name) and each row's own S name from the field `s`; it returns one value
# per row, higher meaning worse: here how far the model prefers S over IO.


# %%
def s_over_io(logits, tokens, s):
    return logits.gather(1, s[:, None])[:, 0] - logits.gather(1, tokens[:, None])[:, 0]


task = interp.Task(
    "ioi",
    texts,
    positions=[(n["END"],) for n in names],
    metric=s_over_io,
    fields={"s": s_ids},
    named_positions=names,
)

# %% [markdown]
# ## One run with the task
#
# The task goes to the ablate stage; `metrics=("ioi",)` measures it alone. The roles come from
# the probe suites as in any run (a small probe set here).

# %%
options = interp.RunOptions(
    quick=True,
    run_name="ioi",
    stages={
        "collect": interp.CollectConfig(
            n_repeated=8, n_syntax=32, max_sentences=16, n_bootstrap=20
        ),
        "ablate": interp.AblateConfig(
            tasks=(task,),
            metrics=("ioi",),
            top_k=6,
            max_rounds=1,
            ig_steps=1,
            estimator_positions=0,
            prune=False,
        ),  # fmt: skip
        "report": interp.ReportConfig(pdf=False),
    },
)
run_dir = interp.run(options, model=model, progress=False)
run = interp.load_run(run_dir)
run

# %% [markdown]
# ## The task-attention table
#
# Every head's mean attention from each named position to each other one, over the task's
# prompts, with a bootstrap interval: S-inhibition-like heads show as large `END -> S2` rows,
# name movers as large `END -> IO` rows, with no hook code.

# %%
columns = ["layer", "head", "attention", "ci_low", "ci_high", "n"]
run.task_attention.query("query == 'END' and key == 'S2'").nlargest(5, "attention")[columns]

# %%
run.task_attention.query("query == 'END' and key == 'IO'").nlargest(5, "attention")[columns]

# %% [markdown]
# ## The heads that matter, and their task roles
#
# The heads whose ablation hurts the task most, measured exactly, with their role and where they
# attend from END. The classify stage runs after ablate and reads the task's effects and
# attention with what each head writes: a head that attends from END to a name, copies it and
# is needed is a `mover`; one that writes against the name it attends to is a
# `negative_mover`; one that attends to a name, matters and feeds a mover's queries is an
# `inhibitor` ([Task roles](../concepts/roles.md#task-roles)). `evidence` says what decided each
# primary role; `vs_tolerance` whether the 95% interval settles the effect against 1% of the
# intact metric.

# %%
exact = run.effects.query("metric == 'ioi' and estimator == 'exact'")
from_end = run.task_attention.query("query == 'END'").pivot_table(
    index=["layer", "head"], columns="key", values="attention"
)
roles = run.roles[["layer", "head", "role", "task_role", "task_key", "writes", "evidence"]]
heads = (
    exact.merge(roles, on=["layer", "head"])
    .join(from_end.add_prefix("END->"), on=["layer", "head"])
    .sort_values("delta", ascending=False)
)
heads[["layer", "head", "delta", "vs_tolerance", "role", "task_role", "task_key", "writes",
       "evidence", "END->IO", "END->S2"]]  # fmt: skip

# %% [markdown]
# Every head's estimate, exact or not, is in the same table (`estimator == 'attribution'`); the
# report's effect map draws them all.

# %%
interp.figure(run, "effect_maps")

# %% [markdown]
# ## Where the top head attends
#
# `interp.show` runs a prompt through the model and the explorer shows each token's attention
# inline; the most important head is selected.

# %%
top = heads.iloc[0]
shown = interp.show(run_dir, [texts[0]], heads=f"{top['layer']}.{top['head']}", model=model)
print(shown.text)

# %%
interp.explorer(run_dir, prompts_only=True)
