"""Every mechanism on one line: what the puzzles said, and what the tuned text study says
at each size, against the margin.

The puzzles' verdicts (`comparisons.decide`) are counted over each mechanism's primary
rows (speed and the longer lists, each task and data regime). The text verdicts are the
primary rows of `text_design.decide_tuned` (each arm at its own best rate against the
reference at its own, test loss at the end), one frame per size. The text effects are
written in ONE unit, bits per character: a difference of d nats per character is
d / ln 2 bits (ln 2 nats = 1 bit; 0.0693 nats is 0.1 bits), so they read beside the
book's bits-per-character table. The margin is the registered one, `text_design.MARGIN`
nats (about 0.0144 bits).

`tuned_differences` gives the per-seed paired differences behind those verdicts, the
pairs `decide_tuned` tests, for a figure of their spread (`plotting.tuned`).
"""
from __future__ import annotations

import math

import pandas as pd

from ..study.text_recipe import best_scale
from . import text_design as td
from .report import MINUS, signed_number

MECHANISMS = {
    "layernorm": "LayerNorm", "postnorm": "post-norm", "bias": "biases", "abs_pos": "learned positions",
    "gelu_mlp": "GELU MLP", "geglu": "GeGLU", "silu_mlp": "SiLU MLP", "mha": "MHA",
    "mha_matched": "MHA matched", "mqa": "MQA",
} | {f"base {t:,.0f}": f"rotation base {t:,.0f}" for t in td.BASES}
"""Arm label (as `decide_tuned` names a comparison) -> the mechanism's name in the card."""
PUZZLE_LABELS = {arm: arm for arm in MECHANISMS if not arm.startswith("base ")} | {
    f"base {t:,.0f}": f"rope_theta={t:,.0f}" for t in td.BASES}
"""Arm label -> the puzzles' `control` label of the same mechanism."""
NOT_RUN, PENDING = "not run", "pending"
DIGITS = 4  # bits per character: the analysis' grid, 1e-4 nats, is 0.00014 bits
BITS_PER_NAT = 1 / math.log(2)
PUZZLE_COLUMNS = ("control", "primary", "verdict")
TUNED_COLUMNS = ("comparison", "endpoint", "effect", "ci_low", "ci_high", "verdict")
SIZE_CELLS = ("verdict", "bits", "low_bits", "high_bits", "text", "margin")
CARD_COLUMNS = ["mechanism", "arm", "puzzles"] + [f"{size}_{c}" for size in td.SIZES for c in SIZE_CELLS]


def _require(frame: pd.DataFrame, columns, name: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} lacks column(s) {missing}; the scorecard reads {list(columns)}")


def puzzle_summary(rows: pd.DataFrame) -> str:
    """One mechanism's primary puzzle verdicts in words: "8 rows: 3 worse, none better,
    2 equivalent" (the rest undecided, at chance or rarely solved; a post hoc decision,
    one only the corrected analysis makes, is counted apart as the book's counts do);
    `not run` for a mechanism the puzzles never trained."""
    if rows.empty:
        return NOT_RUN
    post_hoc = rows.post_hoc.astype(bool) if "post_hoc" in rows else pd.Series(False, index=rows.index)
    count = rows.verdict[~post_hoc].value_counts()
    words = [f"{int(count.get(kind, 0)) or 'none'} {kind}" for kind in ("worse", "better", "equivalent")]
    more = f" ({int(post_hoc.sum())} more post hoc)" if post_hoc.any() else ""
    return f"{len(rows)} row{'s' if len(rows) != 1 else ''}: " + ", ".join(words) + more


def margin_score(ci_low: float, ci_high: float, margin: float = td.MARGIN) -> str:
    """The interval against ±margin: `beyond` (wholly past one end: an effect at least
    the margin), `within` (inside both: smaller than the margin), else `undecided`;
    `pending` while the row has no interval."""
    if math.isnan(ci_low) or math.isnan(ci_high):
        return "pending"
    if ci_low > margin or ci_high < -margin:
        return "beyond"
    return "within" if -margin < ci_low and ci_high < margin else "undecided"


def _bits(x: float) -> str:
    if math.isinf(x):
        return f"{MINUS if x < 0 else '+'}∞"
    return signed_number(x, DIGITS, plus=True)


def _primary(verdicts: pd.DataFrame, size: str) -> pd.DataFrame:
    """The primary rows of one size's tuned verdicts, one per comparison."""
    _require(verdicts, TUNED_COLUMNS, f"the tuned verdicts at {size}")
    if "size" in verdicts.columns and set(verdicts["size"]) - {size}:
        raise ValueError(f"column size of the tuned verdicts at {size} holds {sorted(set(verdicts['size']))}")
    rows = verdicts[verdicts.endpoint == td.PRIMARY]
    if rows.comparison.duplicated().any():
        raise ValueError(f"column comparison repeats at {size}: pass one size's verdicts per argument")
    return rows.set_index("comparison")


def waiting_words(stage: str | None) -> str:
    """A pending row's cell: `pending`, and what it waits for when `decide_tuned`'s stage
    says ("pending: 9 of 10 stage-one seeds", "pending: sent on, 4 of 30 added seeds",
    "pending: rate not chosen yet")."""
    if not isinstance(stage, str) or not stage:
        return PENDING
    if stage == "rate selection pending":
        return f"{PENDING}: rate not chosen yet"
    return f"{PENDING}: " + stage.replace("continued: ", "sent on, ").replace(" so far", "")


def _text_cells(rows: pd.DataFrame, arm: str, size: str) -> dict:
    """One size's cells of the card for `arm`; `pending` where it has no primary row yet
    (every mechanism of the card is an arm of the tuned study at both sizes)."""
    if arm not in rows.index:
        word = PENDING
        return {f"{size}_verdict": word, f"{size}_bits": math.nan, f"{size}_low_bits": math.nan,
                f"{size}_high_bits": math.nan, f"{size}_text": word, f"{size}_margin": word}
    r = rows.loc[arm]
    bits, lo, hi = (float(r[c]) * BITS_PER_NAT for c in ("effect", "ci_low", "ci_high"))
    if not (math.isnan(lo) or math.isnan(hi)):
        text = f"{r.verdict}: {_bits(bits)} [{_bits(lo)}, {_bits(hi)}] bits per character"
    else:
        text = waiting_words(r.get("stage")) if r.verdict == PENDING else f"{r.verdict}: no interval yet"
    return {f"{size}_verdict": str(r.verdict), f"{size}_bits": bits, f"{size}_low_bits": lo,
            f"{size}_high_bits": hi, f"{size}_text": text,
            f"{size}_margin": margin_score(float(r.ci_low), float(r.ci_high))}


def scorecard(puzzle_decisions: pd.DataFrame, tuned_verdicts_S: pd.DataFrame,
              tuned_verdicts_M: pd.DataFrame) -> pd.DataFrame:
    """One row per mechanism of `MECHANISMS` (`CARD_COLUMNS`): the puzzles summarised,
    then at S and at M the text verdict, its effect and interval in bits per character
    (arm minus reference: positive is worse), both in words, and the interval against
    the margin. A mechanism a size did not run reads `not run` in every word column."""
    _require(puzzle_decisions, PUZZLE_COLUMNS, "the puzzle decisions")
    puzzles = puzzle_decisions[puzzle_decisions.primary.astype(bool)]
    text = {"S": _primary(tuned_verdicts_S, "S"), "M": _primary(tuned_verdicts_M, "M")}
    rows = []
    for arm, name in MECHANISMS.items():
        row = {"mechanism": name, "arm": arm,
               "puzzles": puzzle_summary(puzzles[puzzles.control == PUZZLE_LABELS[arm]])}
        for size in td.SIZES:
            row |= _text_cells(text[size], arm, size)
        rows.append(row)
    return pd.DataFrame(rows, columns=CARD_COLUMNS)


def card_table(card: pd.DataFrame) -> pd.DataFrame:
    """The scorecard as a chapter shows it: one row per mechanism, the puzzles' count and
    each size's text verdict with its effect and interval in bits per character (arm minus
    reference: positive is worse), and how that interval sits against the margin."""
    out = card.set_index("mechanism")[["puzzles", "S_text", "S_margin", "M_text", "M_margin"]]
    return out.rename(columns={"S_text": "text, S", "S_margin": "S against the margin",
                               "M_text": "text, M", "M_margin": "M against the margin"})


SELECTED = " ✓"


def bracket_means(runs: pd.DataFrame) -> pd.DataFrame:
    """Each size's and arm's bracket so far, one row per rate tried: the mean validation
    loss over seeds 0-2 (nats per character; NaN while some of them are still to run),
    how many are in, and `best`, true at the selected rate once it is interior (the
    runner's own rule, `text_recipe.best_scale`). Rows: S first, the reference first, then
    the arms in the scorecard's order. `runs` is `decide_tuned`'s frame."""
    runs = td.check_frame(runs)
    stats = (runs[runs.seed.isin(td.LR_SEEDS)].groupby(["size", "arm", "lr_scale"]).loss_val
             .agg(["mean", "count"]).reset_index())
    complete = stats["count"] == len(td.LR_SEEDS)
    stats["mean"] = stats["mean"].where(complete)
    stats["best"] = False
    for _, g in stats.groupby(["size", "arm"]):
        best = best_scale(dict(zip(g.lr_scale, g["mean"]))) if complete[g.index].all() else None
        stats.loc[g.index, "best"] = (g.lr_scale == best).to_numpy()
    order = {arm: i for i, arm in enumerate([td.REFERENCE, *MECHANISMS])}
    rank = stats["size"].ne("S").astype(int) * len(order) + stats.arm.map(order).fillna(len(order))
    return stats.assign(rank=rank).sort_values(["rank", "lr_scale"], kind="stable").drop(columns="rank")


def selected_loss(runs: pd.DataFrame, arm: str = td.REFERENCE, size: str = "S",
                  column: str = "loss_end") -> float | None:
    """An arm's mean `column` (nats per character) over the selection seeds at its selected
    rate at `size`; None while its bracket is open. The default: the reference's test loss."""
    rate = settled_rates(runs, size).get(arm)
    if rate is None:
        return None
    frame = td.check_frame(runs)
    at = frame[(frame.arm == arm) & (frame["size"] == size) & (frame.lr_scale == rate)
               & frame.seed.isin(td.LR_SEEDS)]
    return float(at[column].mean())


def unplanned_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs the tuned study's stages do not call for yet: past the selection seeds, a
    run at a rate that is neither its arm's selected rate nor the reference's (both chosen
    at its size), or at M for an arm whose S bracket is open. Empty while the runner has
    kept its order (the text chapter says so)."""
    frame = td.check_frame(runs)
    means = bracket_means(runs)
    chosen = means[means.best]
    own = set(zip(chosen["size"], chosen.arm, chosen.lr_scale))
    reference = dict(zip(chosen.loc[chosen.arm == td.REFERENCE, "size"],
                         chosen.loc[chosen.arm == td.REFERENCE, "lr_scale"]))
    settled_at_s = set(chosen.loc[chosen["size"] == "S", "arm"])
    beyond = ~frame.seed.isin(td.LR_SEEDS)
    cells = zip(frame["size"], frame.arm, frame.lr_scale)
    planned_rate = pd.Series([(z, a, r) in own or reference.get(z) == r for z, a, r in cells],
                             index=frame.index)
    early_m = frame["size"].ne("S") & ~frame.arm.isin(settled_at_s)
    return frame[(beyond & ~planned_rate) | early_m]


def rate_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Each arm's learning-rate bracket as the book shows it, one row per size and arm:
    the mean validation loss over seeds 0-2 at each rate tried, in bits per character
    ("2 of 3 seeds" where some are still to run), the selected rate marked ✓ once it
    is interior, and the bracket's state: `settled at ×k`, or `open` while the best sits
    at an edge of the rates tried or a rate lacks seeds. `runs` is `decide_tuned`'s frame."""
    means = bracket_means(runs)
    scales = sorted(means.lr_scale.unique())
    out = []
    for (size, arm), g in means.groupby(["size", "arm"], sort=False):
        row = {"size": size, "mechanism": MECHANISMS.get(arm, "reference" if arm == td.REFERENCE else arm)}
        cells = {r.lr_scale: f"{int(r.count)} of {len(td.LR_SEEDS)} seeds" if r.mean != r.mean else
                 f"{r.mean * BITS_PER_NAT:.{DIGITS}f}" + (SELECTED if r.best else "") for r in g.itertuples()}
        row |= {f"×{k:g}": cells.get(k, "") for k in scales}
        best = g.lr_scale[g.best]
        row["bracket"] = f"settled at ×{best.iloc[0]:g}" if len(best) else "open"
        out.append(row)
    return pd.DataFrame(out).set_index(["size", "mechanism"])


def settled_rates(runs: pd.DataFrame, size: str = "S") -> dict[str, float]:
    """Arm -> its selected rate at `size`, for every arm whose bracket has settled (best
    rate interior: `bracket_means`), the reference included."""
    means = bracket_means(runs)
    chosen = means[means.best & (means["size"] == size)]
    return dict(zip(chosen.arm, chosen.lr_scale))


def at_best_rates(runs: pd.DataFrame, size: str = "S") -> pd.DataFrame:
    """The runs of `size` at each settled arm's selected rate (`settled_rates`): the runs
    the primary comparisons pair, every seed so far, with their `arm` label."""
    runs = td.check_frame(runs)
    rate = runs.arm.map(settled_rates(runs, size))
    return runs[(runs["size"] == size) & (runs.lr_scale == rate)]


def text_verdict(verdicts: pd.DataFrame, arm: str, size: str = "S") -> pd.Series:
    """The primary row of `arm` at `size` in `decide_tuned`'s verdicts (effect and interval
    in nats per character; `BITS_PER_NAT` converts); a KeyError names an arm it lacks."""
    rows = _primary(verdicts[verdicts["size"] == size], size)
    if arm not in rows.index:
        raise KeyError(f"no primary row for {arm!r} at {size}; the rows are {sorted(rows.index)}")
    return rows.loc[arm]


DIFFERENCE_COLUMNS = ["size", "arm", "seed", "lr_reference", "lr_arm", "difference"]


def tuned_differences(runs: pd.DataFrame, endpoint: str = td.PRIMARY) -> pd.DataFrame:
    """Per size, arm and seed the paired difference arm − reference on `endpoint` (nats per
    character, on `decide_tuned`'s grid), each at its own best rate: the pairs the
    registered rule tests, every seed run so far. An arm is left out until its bracket,
    and the reference's, has settled (best rate interior: `bracket_means`); before that a
    best rate so far may still move. `runs` is `decide_tuned`'s frame (`text_design.COLUMNS`)."""
    if endpoint not in td.COLUMNS[-4:]:
        raise ValueError(f"endpoint must be one of {list(td.COLUMNS[-4:])}, got {endpoint!r}")
    runs = td.check_frame(runs)
    best = td.best_rates(runs)
    means = bracket_means(runs)
    settled = set(zip(means.loc[means.best, "size"], means.loc[means.best, "arm"]))
    out = []
    for (size, arm), lr in best.items():
        ref_lr = best.get((size, td.REFERENCE), math.nan)
        if arm == td.REFERENCE or math.isnan(ref_lr) or not {(size, arm), (size, td.REFERENCE)} <= settled:
            continue
        pair = td._pairs(runs, size, arm, lr, ref_lr, endpoint)  # the very pairs decide_tuned tests
        out += [{"size": size, "arm": arm, "seed": int(s), "lr_reference": ref_lr, "lr_arm": lr,
                 "difference": float(d) * td.UNIT} for s, d in zip(pair.seed, pair.d)]
    return pd.DataFrame(out, columns=DIFFERENCE_COLUMNS)


__all__ = ["MECHANISMS", "NOT_RUN", "PENDING", "scorecard", "waiting_words", "card_table", "bracket_means",
           "rate_table", "puzzle_summary", "margin_score", "tuned_differences", "settled_rates",
           "at_best_rates", "text_verdict", "CARD_COLUMNS",
           "DIFFERENCE_COLUMNS", "BITS_PER_NAT"]
