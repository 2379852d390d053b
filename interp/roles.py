"""The role catalogue: one entry per head archetype.

Every consumer (the classifier's label set, the CLI's choices, the report's palette and legend)
reads this one mapping, so adding a role is one entry here plus the evidence that measures it.
A head is both where it looks and what it writes, so roles come in three kinds:

- ``looks`` (where its attention goes): every such role but ``first_token`` describes what a
  head does with its *non-sink* attention (see interp.collect.features); ``first_token`` is kept
  for heads whose attention off the first position is too little to do anything else
  (interp.classify.primary); ``mixed`` has no feature of its own: it is a blend of the others
  (interp.classify.mixture); ``frequent_token`` is named by a rule on its feature where the
  classifier finds no archetype (interp.classify.frequent);
- ``writes`` (what its output does, read from its weights and its output size,
  interp.weights): ``copying``, ``copy_suppression``, ``successor``, and ``inactive`` for a
  head that attends but writes almost nothing;
- ``task`` (what it does on a task that names positions, interp.Task): ``mover``,
  ``negative_mover``, ``inhibitor``, read from the task's attention, effects, weights and
  composition together.

How the kinds combine into one primary role and a second one is interp.classify.combine's. Two
labels name no archetype: ``unexplained`` (no evidence suffices) and ``unmeasured`` (no role can
be given: the features that could decide it were not measured, interp.classify.unmeasured).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Role:
    name: str
    # the feature that measures it: a features-table feature for a role of where a head looks
    # (positional and syntactic: a feature group, the best of its features counts), a weights-table
    # score for one of what it writes; None for task roles and the labels that name no role
    feature: str | None
    description: str
    colour: str
    kind: str | None = "looks"  # looks | writes | task; None: names no role
    # named by a rule on its feature once the classifier has called a head unexplained, not a
    # column of the classifier (interp.classify.frequent)
    by_rule: bool = False


UNEXPLAINED = "unexplained"
UNMEASURED = "unmeasured"

ROLES: dict[str, Role] = {
    role.name: role
    for role in [
        Role("previous_token", "previous_token", "leans on the token right before", "#1f77b4"),
        Role("current_token", "current_token", "attends to itself", "#17becf"),
        Role("next_token", "next_token", "leans on the token right after (encoders)", "#9edae5"),
        Role(
            "first_token",
            "first_token",
            "parks its attention on the first token (BOS / [CLS]) and does little else: an attention sink",
            "#ff7f0e",
        ),
        Role("delimiter", "delimiter", "piles weight on punctuation and [SEP]", "#ffbb78"),
        Role(
            "frequent_token",
            "frequent_token",
            "piles weight on the corpus's commonest token types (the, of, punctuation, newlines) "
            "wherever they stand",
            "#c49c94",
            by_rule=True,
        ),
        Role(
            "duplicate_token",
            "duplicate_token",
            "attends to earlier copies of the current token",
            "#2ca02c",
        ),
        Role(
            "induction",
            "induction",
            "attends to the token after an earlier copy of the current token",
            "#d62728",
        ),
        Role(
            "syntactic",
            "syntactic",
            "links a word to its syntactic partner (best relation)",
            "#9467bd",
        ),
        Role(
            "local",
            "local",
            "attends within a short window before the query, not just q-1",
            "#8c564b",
        ),
        Role(
            "positional",
            "positional",
            "attends to a fixed position: absolute k != 0, or a fixed distance before the end",
            "#bcbd22",
        ),
        Role("broad", "broad", "spreads attention evenly over the context; averages", "#e377c2"),
        Role(
            "mixed",
            None,
            "splits its attention among two or more archetypes, none dominant (the roles table's "
            "components names them with their shares)",
            "#8c6d31",
        ),
        Role(
            "copying",
            "copying",
            "writes the token it attends to: its OV circuit maps a token to itself through the "
            "embedding and unembedding",
            "#74c476",
            "writes",
        ),
        Role(
            "copy_suppression",
            "copying",
            "writes against the token it attends to: its OV circuit maps a token to minus itself",
            "#fc9272",
            "writes",
        ),
        Role(
            "successor",
            "successor",
            "writes the next item of an ordinal sequence (1 -> 2, Monday -> Tuesday)",
            "#bcbddc",
            "writes",
        ),
        Role(
            "inactive",
            "output_size",
            "attends but writes almost nothing: its output is tiny beside the residual stream",
            "#525252",
            "writes",
        ),
        Role(
            "mover",
            None,
            "on a task: attends from the scored position to a named token and copies it, and the "
            "task needs it",
            "#08519c",
            "task",
        ),
        Role(
            "negative_mover",
            None,
            "on a task: attends from the scored position to a named token and writes against it",
            "#a50f15",
            "task",
        ),
        Role(
            "inhibitor",
            None,
            "on a task: attends to a named earlier token and composes into the movers' queries",
            "#54278f",
            "task",
        ),
        Role(UNEXPLAINED, None, "no evidence suffices to name a role", "#b0b0b0", None),
        Role(
            UNMEASURED,
            None,
            "no role can be given: features that could decide it were not measured (a probe suite "
            "skipped or not asked for; the roles column unmeasured names them)",
            "#e4e4e4",
            None,
        ),
    ]
}

# Roles measured by a feature group, the best of whose features counts: role -> the prefix of the
# features' names (interp.collect.features names them; the report, which has no torch, reads this).
FEATURE_GROUP_PREFIX: dict[str, str] = {"syntactic": "syntactic:", "positional": "position:"}

ROLE_NAMES: tuple[str, ...] = tuple(ROLES)  # every label a head can carry
NO_ROLE: tuple[str, ...] = (UNEXPLAINED, UNMEASURED)  # labels that name no archetype
NAMED_ROLES: tuple[str, ...] = tuple(name for name in ROLES if name not in NO_ROLE)
# where a head looks, each measured by a feature of its own (mixed is a blend of them)
LOOKS: tuple[str, ...] = tuple(
    r.name for r in ROLES.values() if r.kind == "looks" and r.feature is not None and not r.by_rule
)
WRITES: tuple[str, ...] = tuple(r.name for r in ROLES.values() if r.kind == "writes")
TASK: tuple[str, ...] = tuple(r.name for r in ROLES.values() if r.kind == "task")
# where a head looks, named by the attention classifier and the sink rule (or unexplained): each
# with a score_<role> column in the roles table, the probabilities of where it looks
SCORED_ROLES: tuple[str, ...] = LOOKS + (UNEXPLAINED,)


def palette() -> dict[str, str]:
    """Role name -> colour, in catalogue order (what every figure's legend uses)."""
    return {name: role.colour for name, role in ROLES.items()}
