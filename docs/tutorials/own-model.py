# %% [markdown]
# # Your own model and a treebank
#
# `interp` reads any attention transformer of a family TransformerLens wraps: a Hugging Face
# directory, a GGUF file, or a model built in Python ([Bring your own model](../how-to/own-model.md)).
# This tutorial builds a tiny model of its own, writes a small treebank in CoNLL-U, and asks which
# heads link a word to its syntactic partner in that treebank
# ([A treebank and your own corpora](../how-to/treebank.md)).
#
# The model is random-init (2 layers, 4 query heads sharing one key/value head, the probe
# corpora's words as its vocabulary): its heads mean nothing, so read the numbers below as what
# the tables look like, not as findings. A trained model of your own goes through the same steps.

# %%
import os
import tempfile
import warnings

os.chdir(tempfile.mkdtemp(prefix="interp-tutorial-"))  # a scratch folder: runs land in ./reports
warnings.filterwarnings("ignore", message="IProgress not found")  # no widgets needed here

# %% [markdown]
# ## A model of your own
#
# `build_tiny` saves a random-init model as a Hugging Face directory (config.json, safetensors,
# tokenizer). Any directory like it is a model to `interp`: `interp run --model ./tiny-qwen2`.

# %%
import interp
from interp.model.tiny import build_tiny

path = build_tiny("qwen2", "tiny-qwen2", n_kv_heads=1)
model = interp.load_model(str(path))
print(model.name, f"{model.n_layers} layers x {model.n_heads} heads, causal: {model.causal}")

# %% [markdown]
# ## A treebank
#
# A treebank is a CoNLL-U file (Universal Dependencies): one word a line with its head and
# relation. Its gold arcs are scored apart from the built-in syntax suite, one table row per
# relation, direction and rank.

# %%
import itertools
from pathlib import Path

# "the old man near the house found the book": the subject is four words from its verb
ARCS = [(1, "det", 3), (2, "amod", 3), (3, "nsubj", 7), (4, "prep", 3), (5, "det", 6),
        (6, "pobj", 4), (7, "root", 0), (8, "det", 9), (9, "obj", 7)]  # fmt: skip
words = itertools.product(["old", "small", "big"], ["man", "dog", "boy", "cat"], ["house", "tree"],
                          ["found", "took"], ["book", "car"])  # fmt: skip
lines = []
for adj, noun, place, verb, thing in itertools.islice(words, 0, None, 4):
    sentence = ["the", adj, noun, "near", "the", place, verb, "the", thing]
    lines.append(f"# text = {' '.join(sentence)}")
    for (i, rel, head), word in zip(ARCS, sentence):
        lines.append(f"{i}\t{word}\t{word}\t_\t_\t_\t{head}\t{rel}\t_\t_")
    lines.append("")
Path("treebank.conllu").write_text("\n".join(lines) + "\n")
print(len(lines) // 11, "sentences; the first:")
print("\n".join(lines[:11]))

# %% [markdown]
# ## One run
#
# `--corpus treebank.conllu` on the command line, `CollectConfig(corpora=...)` in Python. The
# run is `--quick` and leaves the report stage out (`interp report RUN_DIR` builds it from the
# tables whenever you want it): the figures and the explorer below come from the tables too.

# %%
options = interp.RunOptions(
    quick=True,
    run_name="treebank",
    skip=("report",),
    stages={"collect": interp.CollectConfig(corpora=("treebank.conllu",))},
)
run_dir = interp.run(options, model=model, progress=False)
run = interp.load_run(run_dir)
run

# %% [markdown]
# The `syntax` table has the best heads of each treebank: `user:treebank` is yours, `syntax` the
# built-in suite. `accuracy` is the share of arcs whose most-attended word is the gold partner,
# beside the best fixed rule that needs no syntax (`best_rule`): a head is only syntactic if it
# beats that.

# %%
best = run.syntax.query("rank == 1 and corpus == 'user:treebank'")
best[
    [
        "relation",
        "direction",
        "layer",
        "head",
        "accuracy",
        "best_rule",
        "best_rule_accuracy",
        "arcs",
    ]
]

# %% [markdown]
# ## Every head at a glance
#
# The report's figures come back as matplotlib figures, and its explorer shows inline: click a
# head to see its role, its features and where it attends on the stored probes.

# %%
interp.figure(run, "role_map")

# %%
interp.explorer(run)
