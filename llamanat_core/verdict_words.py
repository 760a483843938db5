"""The study's verdicts in generic words: `verdict_sentence(row)` for a row of
`comparisons.decide`, chosen by the verdict alone, so they can say only what the row
decided. A chapter's own findings are written by its author, one sentence each, from the
row's numbers (`decision_tables.row_facts`) with a claim beside it; these generic words
are for a page that lists rows rather than reads them. Better or worse
only where the interval excludes no difference; equivalent only where it lies inside the
margin; an undecided row says that the interval holds both no difference and a
difference beyond the margin, never that the two do not differ.

    >>> row = comparisons.decision_row(decisions, "matrix", "postnorm", "addition", "finite", "speed")
    >>> verdict_sentence(row)
    'post-norm takes more steps than llama to solve addition on the finite set: ×2.03 the
     steps [1.13, 4.10], decided on 10 seeds'
"""
from __future__ import annotations

import math

import numpy as np

from .decision_tables import decision_effect_text, margin_text

NAMES = {
    "llama": "llama", "layernorm": "LayerNorm", "postnorm": "post-norm",
    "abs_pos": "learned absolute positions", "gelu_mlp": "the GELU MLP",
    "mha": "full multi-head attention", "mqa": "multi-query attention", "bias": "biases",
    "untied": "untied embeddings",
}
"""How prose names each row (the code's names stay in tables and code)."""

REGIME_PHRASES = {"finite": "on the finite set", "fresh": "on fresh items"}
TASK_PHRASES = {
    "speed": "{task} {where}",
    "length_8": "recall with 8 pairs {where} at the end of training",
    "length_12": "recall with 12 pairs {where} at the end of training",
    "test_acc@1200": "{task} {where} at 1,200 steps",
}


def row_name(label: str) -> str:
    """A row's name in prose: `postnorm` → post-norm, `rope_theta=10` → base 10,
    `llama copy` → copy answers (the alphabet's rows differ in the answer only)."""
    label = str(label)
    if label.startswith("rope_theta="):
        return "base " + label.removeprefix("rope_theta=")
    for answer in ("copy", "name"):
        if label.endswith(" " + answer):
            return f"{answer} answers"
    return NAMES.get(label, label)


def _seeds(row) -> str:
    n = int(row.n)
    pending = "so far" in str(row.stopped)
    return f"{n} seeds so far, more being added" if pending else f"{n} seeds"


def _count(row, arm: str):
    k = row.get(f"{arm}_solved", math.nan)
    return None if k is None or not np.isfinite(k) else int(k)


def _solved(row) -> str:
    """Solved k of n for both arms of a speed row, reference first: `llama solves 32 of 40
    seeds, the GELU MLP 0 of 40`; empty when the row has no counts."""
    k_r, k_c = _count(row, "reference"), _count(row, "control")
    if row.metric != "speed" or k_r is None or k_c is None:
        return ""
    ref, ctl = row_name(row.reference), row_name(row.control)
    return f"{ref} {_verb(ref, 'solve')} {k_r} of {int(row.n)} seeds, {ctl} {k_c} of {int(row.n)}"


def _with_solved(row, text: str) -> str:
    solved = _solved(row)
    return f"{text}; {solved}" if solved else text


def _model(row) -> str:
    """The alphabet compares answers within one model: say which."""
    if str(row.reference).endswith((" copy", " name")):
        return f" (model {row_name(str(row.reference).rsplit(' ', 1)[0])})"
    return ""


def _verb(name: str, verb: str) -> str:
    """`take` → takes after a singular name; the plural names (biases, copy answers) end in s."""
    return verb if name.endswith("s") else verb + "s"


def verdict_sentence(row) -> str:
    """One sentence saying what a row of `comparisons.decide` decided, with its effect,
    interval and seeds; the words are chosen by the verdict and nothing else. A speed row
    ends with both arms' solve counts: solved k of n comes before any ratio. A decision only
    the corrected analysis makes says it is post hoc."""
    text = _with_solved(row, _verdict_clause(row))
    if bool(row.get("post_hoc", False)):
        text += f" (post hoc: the registered analysis read it {row.registered_verdict})"
    return text


def _verdict_clause(row) -> str:
    where = REGIME_PHRASES.get(row.regime, f"({row.regime})")
    if row.verdict == "absent":
        return f"the study has no {row.metric} row for {row_name(row.control)} on {row.task} {where}"
    if row.verdict == "not learned":
        what = TASK_PHRASES[row.metric].format(task=row.task, where=where)
        return f"every row is at chance on {what}"
    ref, ctl = row_name(row.reference), row_name(row.control)
    if row.verdict == "both at chance":
        learns = _verb(ref, "learn")
        return f"neither {ctl} nor {ref} {learns} {row.task} {where} beyond chance ({_seeds(row)})"
    what = TASK_PHRASES[row.metric].format(task=row.task, where=where) + _model(row)
    speed = row.metric == "speed"
    effect = decision_effect_text(row)
    effect = effect.replace(" [", " the steps [", 1) if speed else effect + " points"
    if row.verdict in ("better", "worse"):
        more = row.verdict == "worse"
        fewer, higher = ("more", "lower") if more else ("fewer", "higher")
        lead = (f"{ctl} {_verb(ctl, 'take')} {fewer} steps than {ref} to solve {what}" if speed
                else f"{ctl} {_verb(ctl, 'score')} {higher} than {ref} on {what}")
        return f"{lead}: {effect}, decided on {_seeds(row)}"
    margin = f"the margin {margin_text(row)}"
    if row.verdict == "equivalent":
        lead = (f"{ctl} and {ref} take equivalent numbers of steps to solve {what}" if speed
                else f"{ctl} and {ref} score equivalently on {what}")
        return f"{lead}: {effect}, inside {margin} ({_seeds(row)})"
    if row.verdict == "rarely solved":
        never = {"lower": ctl, "upper": ref}.get(str(row.get("bound", "") or ""))
        bound = f", a bound as {never} never {_verb(never, 'solve')}" if never else ""
        return (f"{ctl} and {ref} solve {what} on too few seeds to compare their speed: the capped "
                f"ratio {decision_effect_text(row)}{bound} ({_seeds(row)})")
    if row.verdict == "mostly at chance":
        return (f"{ctl} and {ref} are both at chance on most seeds of {what} ({int(row.uninformative)} of "
                f"{int(row.n)}), so {effect} shows no equivalence")
    if row.verdict == "undecided":
        lead = "the study cannot tell whether " + (
            f"{ctl} {_verb(ctl, 'take')} fewer or more steps than {ref} to solve {what}" if speed
            else f"{ctl} {_verb(ctl, 'score')} higher or lower than {ref} on {what}")
        return f"{lead}: {effect} holds both no difference and differences beyond {margin} ({_seeds(row)})"
    raise ValueError(f"unknown verdict {row.verdict!r}; expected one of comparisons.decide's")


def verdict_word(row) -> str:
    """The verdict alone as a chapter may glue it in a sentence: decided worse, undecided, …"""
    if row.verdict in ("better", "worse"):
        return f"decided {row.verdict}"
    return str(row.verdict)

