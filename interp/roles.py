"""The role catalogue: one entry per head archetype.

Every consumer (the classifier's label set, the CLI's choices, the report's palette and legend)
reads this one mapping, so adding a role is one entry here plus the feature that measures it.
Every role but ``first_token`` describes what a head does with its *non-sink* attention (see
interp.collect.features); ``first_token`` is kept for heads whose attention off the first position is
too little to do anything else (interp.classify.primary). Two labels name no archetype:
``unexplained`` (the classifier's: none holds) and ``unmeasured`` (no role can be given: the
features that could decide it were not measured, interp.classify.unmeasured).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Role:
    name: str
    # the features-table feature that measures it (positional and syntactic: a family of
    # features, the best one counts); None for unexplained
    feature: str | None
    description: str
    colour: str


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
        Role(UNEXPLAINED, None, "no archetype holds with confidence", "#b0b0b0"),
        Role(
            UNMEASURED,
            None,
            "no role can be given: features that could decide it were not measured (a probe suite "
            "skipped or not asked for; the roles column unmeasured names them)",
            "#e4e4e4",
        ),
    ]
}

# Roles measured by a family of features, the best of which counts: role -> the prefix of the
# features' names (interp.collect.features names them; the report, which has no torch, reads this).
FEATURE_FAMILY_PREFIX: dict[str, str] = {"syntactic": "syntactic:", "positional": "position:"}

ROLE_NAMES: tuple[str, ...] = tuple(ROLES)  # every label a head can carry
NO_ROLE: tuple[str, ...] = (UNEXPLAINED, UNMEASURED)  # labels that name no archetype
NAMED_ROLES: tuple[str, ...] = tuple(name for name in ROLES if name not in NO_ROLE)
# what the classifier and the sink rule name, each with a score_<role> column in the roles table
SCORED_ROLES: tuple[str, ...] = tuple(name for name in ROLES if name != UNMEASURED)


def palette() -> dict[str, str]:
    """Role name -> colour, in catalogue order (what every figure's legend uses)."""
    return {name: role.colour for name, role in ROLES.items()}
