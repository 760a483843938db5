"""The text study's questions, fixed before its first run, and their decisions.

Each arm is compared with the reference (`llama`, RoPE base 10,000) seed by seed on the
held-out test loss of `train.text.TEXT_ENDPOINTS`, in nats per character:

- **primary**: `loss_end`, the loss at the end of the budget;
- **secondary**: `loss_half` (speed: the loss at half the budget), `loss_2x` and `loss_4x`
  (extrapolation to windows two and four times the training context; not defined for the
  learned position table, which has no rows there).

**The margin.** Two arms are called equivalent when the interval of their median difference
lies inside ±`TEXT_MARGIN` nats per character. The published scale: GLU variants beat a
GELU feed-forward by about 0.04 nats per subword token (Shazeer 2020), and a subword token
of English holds about four characters, so the smallest published effect among these
mechanisms is about 0.01 nats per character. A difference inside that is smaller than any
effect the papers report. The pilot (`benchmarks/text_pilot.py`: seeds 1000–1002, outside
the study; `artifacts/study/text_pilot.json`) put the reference's loss at 1.75–1.77 nats
per character with a seed spread of about 0.013, and the paired differences' spread at
0.003 (LayerNorm) to 0.03 (the GELU feed-forward): the standard error of a ten-seed mean is
then 0.001–0.01, so a quiet pair can show equivalence within ±0.01 and a noisy one is
decided only by an effect of several hundredths. Pairing matters: the paired spread is up
to five times smaller than the seed spread of one arm.

**The analysis.** The paired two-stage design of the puzzles, in the form the book
adopted before these runs finished (`paired.decide_paired`): the median paired difference,
tested by sign tests, on seeds 0–9; thirty more seeds for a primary comparison neither
decided nor equivalent on them; Holm within each family (the matrix controls; the rotation
bases) and endpoint; the interval of the median difference inverted from the same tests at
the row's Holm level. Differences under half a `TEXT_UNIT` count as ties. The secondary
endpoints are tested once, on seeds 0–9. (The registered form of the design, exact
sign-flips on the mean, was fixed when the endpoints were; its resampling check is why the
book reads every study through the median instead.)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import paired, sequential
from .comparisons import Endpoint
from .families import decide_families, pair_by_seed, second_stage, stage_pairs

TEXT_UNIT = 1e-4  # nats per character: the differences' rounding, far below any effect
TEXT_MARGIN = 0.01  # nats per character (the module's docstring says why)
REFERENCE_THETA = 10_000.0

TEXT_LOSS = Endpoint("loss_end", "loss_end", TEXT_UNIT, False, False, TEXT_MARGIN)
TEXT_SPEED = Endpoint("loss_half", "loss_half", TEXT_UNIT, False, False, TEXT_MARGIN, primary=False)
TEXT_2X = Endpoint("loss_2x", "loss_2x", TEXT_UNIT, False, False, TEXT_MARGIN, primary=False)
TEXT_4X = Endpoint("loss_4x", "loss_4x", TEXT_UNIT, False, False, TEXT_MARGIN, primary=False)
TEXT_QUESTIONS = (TEXT_LOSS, TEXT_SPEED, TEXT_2X, TEXT_4X)
def text_comparisons(results: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame, pd.DataFrame]]:
    """(family, control label, reference rows, control rows) of every text comparison at
    the reference learning rate: each matrix control, then each rotation base."""
    rows = results[results.lr_scale == 1.0]
    ref = rows[(rows.variant == "llama") & (rows.rope_theta == REFERENCE_THETA)]
    out = []
    for variant, g in rows[rows.variant != "llama"].groupby("variant", sort=False):
        out.append(("text", variant, ref, g))
    bases = rows[(rows.variant == "llama") & (rows.rope_theta != REFERENCE_THETA)]
    for theta, g in bases.groupby("rope_theta"):
        out.append(("text_sweep", f"base {theta:,.0f}", ref, g))
    return out


def text_arm(control: str) -> tuple[str, tuple]:
    """The (variant, Config overrides) of a comparison's control, from its label."""
    if control.startswith("base "):
        return "llama", (("rope_theta", float(control[5:].replace(",", ""))),)
    return control, ()


def text_added_arms(decisions: pd.DataFrame) -> list[tuple[str, tuple]]:
    """The arms (both sides) of every primary comparison undecided on its first ten seeds:
    the runs of seeds 10–39 that the stage-1 rule adds."""
    undecided = decisions.stopped.str.startswith("undecided on the first")
    go = decisions[decisions.primary.astype(bool) & undecided]
    arms = {("llama", ())} if len(go) else set()
    return sorted(arms | {text_arm(c) for c in go.comparison})


TEXT_DECISION_COLUMNS = [
    "family", "comparison", "metric", "primary", "n", "reference_value", "control_value",
    "control_lower", "effect", "ci_low", "ci_high", "margin", "p", "level", "verdict", "stopped"]
VERDICT_WORDS = {"lower": "better", "higher": "worse"}  # a lower loss is the better one


def _stages(pair: pd.DataFrame, ep: Endpoint, margin: float = TEXT_MARGIN):
    """(first ten seeds' differences, the added seeds' or None, why it stopped, pending?)."""
    _, first_pairs, added_pairs = stage_pairs(pair, ep.column)
    first = _differences(first_pairs, ep.column)
    if len(first) < len(sequential.FIRST_SEEDS):
        return first, None, f"{len(first)} of {len(sequential.FIRST_SEEDS)} first seeds so far", True
    if not ep.primary:
        return first, None, "secondary: the first 10 seeds only", False
    look = paired.first_look(first, unit=TEXT_UNIT, margin=margin)
    if look != "continue":
        return first, None, f"{look} on the first 10 seeds", False
    _, pending, waiting = second_stage(True, added_pairs)
    if pending:
        return first, None, waiting, True
    return first, _differences(added_pairs, ep.column), "two stages: 40 seeds", False


def _differences(pair: pd.DataFrame, column: str) -> np.ndarray:
    """Control − reference on `column`, seed by seed."""
    return (pair[f"{column}_c"] - pair[f"{column}_r"]).to_numpy(float)


def _one(family: str, control: str, ref: pd.DataFrame, ctl: pd.DataFrame, ep: Endpoint,
         margin: float = TEXT_MARGIN) -> dict | None:
    pair = stage_pairs(pair_by_seed(ref, ctl), ep.column)[0]
    if pair.empty:  # e.g. a learned position table on windows longer than its table
        return None
    first, added, stopped, pending = _stages(pair, ep, margin)
    used = np.concatenate([first, added]) if added is not None else first
    d = paired.decide_paired(first, added, unit=TEXT_UNIT, margin=margin,
                             two_stage=ep.primary)
    n = len(used)
    return {"family": family, "comparison": control, "metric": ep.name, "primary": ep.primary,
            "n": n, "reference_value": float(pair[f"{ep.column}_r"].iloc[:n].mean()),
            "control_value": float(pair[f"{ep.column}_c"].iloc[:n].mean()),
            "control_lower": int((paired.on_grid(used, TEXT_UNIT) < 0).sum()),
            "margin": margin, "p": 1.0 if pending else d.p, "stopped": stopped,
            "_first": first, "_added": added, "_pending": pending}


def decide_text(results: pd.DataFrame, margin: float = TEXT_MARGIN) -> pd.DataFrame:
    """Every text comparison decided on `TEXT_QUESTIONS` (see the module's docstring): one
    row per (comparison, endpoint) with the median paired difference control − reference
    (`effect`, nats per character; negative: the control's loss is lower), its interval at
    the row's Holm level, p, and the verdict (`better`, `worse`, `equivalent`, `undecided`,
    or `pending` while the row's seeds are still running). `control_lower` counts the
    seeds on which the control's loss is lower. `margin` (nats per character) replaces
    `TEXT_MARGIN` for a sensitivity analysis (`margin_sensitivity`)."""
    rows = [r for family, control, ref, ctl in text_comparisons(results) for ep in TEXT_QUESTIONS
            if (r := _one(family, control, ref, ctl, ep, margin)) is not None]
    if not rows:
        return pd.DataFrame(columns=TEXT_DECISION_COLUMNS)
    return decide_families(rows, ["family", "metric"], _finish)[TEXT_DECISION_COLUMNS]


def _finish(r: dict) -> dict:
    """One row's interval and verdict at its Holm level (`level`: the level it used)."""
    d = paired.decide_paired(r["_first"], r["_added"], unit=TEXT_UNIT, margin=r["margin"],
                             level=r["level"], two_stage=r["primary"])
    if r["_pending"]:  # the median so far, and no interval until the stage is complete
        return {"effect": d.estimate, "ci_low": np.nan, "ci_high": np.nan, "level": d.level,
                "verdict": "pending"}
    return {"effect": d.estimate, "ci_low": d.low, "ci_high": d.high, "level": d.level,
            "verdict": VERDICT_WORDS.get(d.verdict, d.verdict)}


def _registered_one(pair: pd.DataFrame, ep: Endpoint) -> dict:
    """One row under the registered rule: stage one's `sequential.continues` on whole
    `TEXT_UNIT`s; the added seeds only where that rule sends the row on and all are run."""
    d = _in_units(pair, ep.column)
    _, first_pairs, added_pairs = stage_pairs(pair, ep.column)
    first = _in_units(first_pairs, ep.column)
    span = int(np.abs(d).max()) + 1 if len(d) else 1
    out = {"_first": first, "_added": None, "_bounds": (-span, span), "_pending": False}
    if len(first) < len(sequential.FIRST_SEEDS):
        return out | {"stopped": f"{len(first)} of {len(sequential.FIRST_SEEDS)} first seeds so far",
                      "_pending": True, "p": 1.0}
    if not ep.primary:
        return out | {"stopped": "secondary: the first 10 seeds only", "p": sequential.p_value(first)}
    m = round(TEXT_MARGIN / TEXT_UNIT)
    go_on, why = sequential.continues(first, both_at_chance=False, margin=(-m, m))
    use, pending, _ = second_stage(go_on, added_pairs)
    if pending:
        return out | {"stopped": f"the registered rule adds seeds; {len(added_pairs)} of "
                                 f"{len(sequential.ADDED_SEEDS)} were run", "_pending": True, "p": 1.0}
    out["_added"] = _in_units(added_pairs, ep.column) if use else None
    return out | {"stopped": why, "p": sequential.p_value(first, out["_added"])}


def decide_text_registered(results: pd.DataFrame) -> pd.DataFrame:
    """The text study as its endpoints were registered, before any run: exact sign flips on
    the mean (`sequential`: its stage-one rule, its combined p, its interval at the row's
    Holm level, the estimate where the tails balance), Holm within the same families. A
    row the registered rule would have sent on but whose added seeds the book's rule did
    not run is `pending`. Columns as `decide_text`."""
    rows = []
    for family, control, ref, ctl in text_comparisons(results):
        for ep in TEXT_QUESTIONS:
            pair = stage_pairs(pair_by_seed(ref, ctl), ep.column)[0]
            if not pair.empty:
                rows.append({"family": family, "comparison": control, "metric": ep.name,
                             "primary": ep.primary, "margin": TEXT_MARGIN} | _registered_one(pair, ep))
    out = decide_families(rows, ["family", "metric"], _registered_verdict)
    return out[[c for c in out if not c.startswith("_") and c != "p_holm"]]


def _in_units(pair: pd.DataFrame, column: str) -> np.ndarray:
    """Control − reference on `column` in whole `TEXT_UNIT`s, seed by seed."""
    return np.round(_differences(pair, column) / TEXT_UNIT).astype(np.int64)


def _registered_verdict(r: dict) -> dict:
    first, added = r["_first"], r["_added"]
    used = first if added is None else np.concatenate([first, added])
    if r["_pending"]:
        return {"n": len(used), "effect": float(np.mean(used)) * TEXT_UNIT, "ci_low": np.nan,
                "ci_high": np.nan, "verdict": "pending"}
    lo, hi = sequential.interval(first, added, r["level"], r["_bounds"])
    centre = sequential.estimate(first, added, r["_bounds"], (lo, hi))
    verdict = paired.read_interval(lo, hi, TEXT_MARGIN / TEXT_UNIT)
    return {"n": len(used), "effect": centre * TEXT_UNIT, "ci_low": lo * TEXT_UNIT, "ci_high": hi * TEXT_UNIT,
            "verdict": VERDICT_WORDS.get(verdict, verdict)}


def registered_and_corrected(results: pd.DataFrame) -> pd.DataFrame:
    """Each text row under the registered analysis (sign flips on the mean) beside the
    book's (sign tests on the median, `decide_text`): seeds, effect, interval and verdict
    of each, and `moved`: what the correction changed (the verdict, the seeds, or nothing
    but the estimand)."""
    key = ["family", "comparison", "metric"]
    cols = ["n", "effect", "ci_low", "ci_high", "verdict"]
    reg = decide_text_registered(results)[key + ["primary"] + cols]
    cor = decide_text(results)[key + cols]
    both = reg.merge(cor, on=key, suffixes=("_registered", "_corrected"))

    def moved(r) -> str:
        if r.verdict_registered == r.verdict_corrected == "pending":
            return "both wait for seeds"
        out = []
        if r.verdict_registered != r.verdict_corrected:
            out.append(f"verdict {r.verdict_registered} -> {r.verdict_corrected}")
        if r.n_registered != r.n_corrected:
            out.append(f"seeds {r.n_registered} -> {r.n_corrected}")
        return "; ".join(out) or "nothing but the estimand (mean -> median)"
    said = [moved(r) for r in both.itertuples()]
    return both.assign(moved=pd.Series(said, index=both.index, dtype=object))


def text_differences(results: pd.DataFrame, metric: str = "loss_end") -> pd.DataFrame:
    """Every comparison's paired differences, control − reference, seed by seed (nats per
    character), at the reference learning rate: the numbers each verdict is read from,
    for their spread."""
    out = []
    for family, control, ref, ctl in text_comparisons(results):
        pair = stage_pairs(pair_by_seed(ref, ctl), metric)[0]
        out.append(pd.DataFrame({"family": family, "comparison": control, "seed": pair.seed,
                                 "difference": pair[f"{metric}_c"] - pair[f"{metric}_r"]}))
    return pd.concat(out, ignore_index=True).sort_values(["family", "comparison", "seed"], kind="stable")


def learning_rate_table(results: pd.DataFrame, seeds=(0, 1, 2)) -> pd.DataFrame:
    """The learning-rate check: each arm's mean held-out loss over `seeds` at every rate
    scale, its best scale, and the difference from the reference (control − reference)
    at the common rate and with each arm at its own best rate. `same_sign` says whether
    tuning the rate per arm keeps the direction of the difference."""
    rows = results[results.seed.isin(list(seeds))]
    means = rows.pivot_table(index=["variant", "rope_theta"], columns="lr_scale", values="loss_end")
    ref = means.loc[("llama", REFERENCE_THETA)]
    out = []
    for (variant, theta), m in means.iterrows():
        if (variant, theta) == ("llama", REFERENCE_THETA):
            continue
        label = variant if variant != "llama" else f"base {theta:,.0f}"
        at_one, at_best = m[1.0] - ref[1.0], m.min() - ref.min()
        out.append({"comparison": label, **{f"loss ×{k:g}": v for k, v in m.items()},
                    "best rate": float(m.idxmin()), "reference best rate": float(ref.idxmin()),
                    "difference at ×1": at_one, "difference at best rates": at_best,
                    "same_sign": bool(np.sign(at_one) == np.sign(at_best))})
    return pd.DataFrame(out).set_index("comparison")


def text_row(decisions: pd.DataFrame, comparison: str, metric: str = "loss_end") -> pd.Series:
    """One row of `decide_text` by its control's label; verdict `absent` (NaN numbers)
    when the row is not there yet (its runs have not started)."""
    hit = decisions[(decisions.comparison == comparison) & (decisions.metric == metric)]
    if len(hit):
        return hit.iloc[0]
    return pd.Series({c: np.nan for c in TEXT_DECISION_COLUMNS} | {"comparison": comparison,
                                                                  "metric": metric, "verdict": "absent"})


def labelled_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The text runs with each run's arm as a `label`: the variant, or `base N` for the
    reference at another rotation base (the labels of `decide_text`'s comparisons)."""
    if runs.empty:
        return runs.assign(label=pd.Series(dtype=str))
    return runs.assign(label=runs.apply(
        lambda r: r.variant if r.rope_theta == REFERENCE_THETA else f"base {r.rope_theta:,.0f}", axis=1))


def labelled_curves(runs: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """The text curves with each run's arm as a label (as `labelled_runs`)."""
    return curves.assign(label=curves.run.map(labelled_runs(runs).set_index("run").label))


# ---------------------------------------------------------------- the published findings

@dataclass(frozen=True)
class TextFinding:
    """A published finding the text study tests: the paper (`paper`, its BibTeX `key` in
    book/references.bib), the finding in words, and the study's row that tests it: a
    `decide_text` comparison (its control's label) on `metric`, with the side of the
    reference the paper puts the control on (`published`: `worse`, `better`, or
    `equivalent` for "matches")."""
    paper: str
    key: str
    finding: str
    comparison: str
    metric: str
    published: str

    def __post_init__(self):
        if self.published not in ("better", "worse", "equivalent"):
            raise ValueError(f"published must be better, worse or equivalent, got {self.published!r}")


WINDOWS = "llama, 4× its window against 1×"
"""The one finding not about two arms: the reference read on windows four times the length
it trained on, against its own loss at that length (`window_decision`)."""

TEXT_PUBLISHED = (  # literature, not measurement: each direction as its paper reports it
    TextFinding("Shazeer 2020", "shazeer2020glu", "GLU variants (SwiGLU among them) reach a lower "
                "language-model loss than a GELU feed-forward", "gelu_mlp", "loss_end", "worse"),
    TextFinding("Narang et al. 2021", "narang2021transformer", "most modifications do not transfer; "
                "GLU variants are among the few that help", "gelu_mlp", "loss_end", "worse"),
    TextFinding("Narang et al. 2021", "narang2021transformer", "RMSNorm is among the few that help, "
                "over LayerNorm", "layernorm", "loss_end", "worse"),
    TextFinding("Zhang & Sennrich 2019", "zhang2019root", "RMSNorm matches LayerNorm's quality at "
                "a lower cost", "layernorm", "loss_end", "equivalent"),
    TextFinding("Xiong et al. 2020", "xiong2020layer", "pre-norm trains faster than post-norm",
                "postnorm", "loss_half", "worse"),
    TextFinding("Su et al. 2021", "su2021roformer", "rotary positions beat learned absolute ones",
                "abs_pos", "loss_end", "worse"),
    TextFinding("Press et al. 2022", "press2022train", "a rotary model gets worse on inputs longer "
                "than it trained on", WINDOWS, "loss_4x", "worse"),
    TextFinding("Ainslie et al. 2023", "ainslie2023gqa", "grouped-query attention comes close to "
                "multi-head quality", "mha", "loss_end", "equivalent"),
    TextFinding("Shazeer 2019; Ainslie et al. 2023", "shazeer2019fast", "one key/value head (MQA) "
                "costs some quality", "mqa", "loss_end", "worse"),
)


def window_decision(results: pd.DataFrame, metric: str = "loss_4x") -> pd.Series:
    """The reference's loss on the longer window `metric` against its own loss at the
    training length, seed by seed on its first ten seeds: the median paired difference
    (longer − trained) by the same sign test, one stage at 0.05 (a reading of the
    extrapolation endpoints, outside the registered families). A row like `decide_text`'s;
    `control_lower` counts the seeds whose longer-window loss is lower."""
    rows = results[(results.lr_scale == 1.0) & (results.variant == "llama")
                   & (results.rope_theta == REFERENCE_THETA)].sort_values("seed")
    rows = rows[rows.seed.isin(sequential.FIRST_SEEDS)]
    d = (rows[metric] - rows.loss_end).dropna().to_numpy(float)
    base = {"comparison": WINDOWS, "metric": metric, "n": len(d), "margin": TEXT_MARGIN,
            "ci_low": np.nan, "ci_high": np.nan,
            "control_lower": int((paired.on_grid(d, TEXT_UNIT) < 0).sum()) if len(d) else 0}
    if len(d) < len(sequential.FIRST_SEEDS):
        return pd.Series(base | {"effect": float(np.median(d)) if len(d) else np.nan, "verdict": "pending"})
    r = paired.decide_paired(d, None, unit=TEXT_UNIT, margin=TEXT_MARGIN, two_stage=False)
    return pd.Series(base | {"effect": r.estimate, "ci_low": r.low, "ci_high": r.high,
                             "verdict": VERDICT_WORDS.get(r.verdict, r.verdict)})
