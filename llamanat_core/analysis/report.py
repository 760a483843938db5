"""Shared tables and formatters for every chapter: seed tables, chance floors, numbers
for prose, glue, and the sentences whose shape depends on what a run found.

Chapters hold narrative; what they compute from the study goes through here, so a
table means the same thing on every page. Figures are drawn by `llamanat_core.book.plotting`;
which gaps are decided comes only from `llamanat_core.analysis.comparisons` (this module
describes, it does not decide).

Conventions: mean and *population* standard deviation over seeds, every seed's value
shown. Accuracy tables state the chance floor (`stats.chance_floor`): the accuracy of a
model that has learnt the answer's format but not the task.
"""
from __future__ import annotations

import math
import re
import sys

import numpy as np
import pandas as pd

from ..train.loop import Budget

METRIC_NAMES = {
    "test_acc": "test accuracy",
    "test_acc_8": "accuracy at 8 pairs",
    "test_acc_12": "accuracy at 12 pairs",
    "val_loss": "validation loss",
    "final_loss": "final training loss",
}


# ---------------------------------------------------------------- formatters
# One name per format, used by every table and sentence below.

MINUS = "\u2212"
"""The minus sign the prose prints (−0.38); tables and tick labels use it too, never "-"."""

def pct(x: float, digits: int = 1) -> str:
    """0.715 -> '71.5%'"""
    return f"{100 * float(x):.{digits}f}%"


# ---------------------------------------------------------------- chance floors
# The floors themselves are stats.chance_floor's; here only how a table or sentence shows one.

def chance_label(x: float) -> str:
    """A chance floor as a fraction for prose and legends: 0.25 -> '1/4', 0.001 -> '1/1,000'."""
    n = round(1 / x)
    if not math.isclose(1 / n, x, rel_tol=1e-9):
        raise ValueError(f"{x!r} is not one chance in a whole number")
    return f"1/{n:,}"


def final(df: pd.DataFrame) -> pd.DataFrame:
    """Rows at the last checkpoint of each run."""
    return df[df["final"].astype(bool)].reset_index(drop=True)


def at_step(df: pd.DataFrame, step: int | None) -> pd.DataFrame:
    if step is None:
        return final(df)
    out = df[df.step == step]
    if out.empty:
        raise ValueError(f"no checkpoint at step {step}; have {sorted(df.step.unique())}")
    return out.reset_index(drop=True)


def _group_key(by):
    return [by] if isinstance(by, str) else list(by)


def seed_table(df: pd.DataFrame, by="variant", value: str = "test_acc", step: int | None = None,
               order=None) -> pd.DataFrame:
    """One row per group: mean, population std, n and every seed's value (columns seed 0 ...)."""
    d = at_step(df, step)
    keys = _group_key(by)
    if d.duplicated(keys + ["seed"]).any():
        raise ValueError(f"several rows per ({', '.join(keys)}, seed): filter to one measurement first")
    wide = d.pivot_table(index=keys, columns="seed", values=value, aggfunc="first")
    wide.columns = [f"seed {s}" for s in wide.columns]
    vals = wide.to_numpy(dtype=float)
    table = pd.DataFrame({"mean": np.nanmean(vals, axis=1), "std": np.nanstd(vals, axis=1, ddof=0),
                          "n": np.sum(~np.isnan(vals), axis=1)}, index=wide.index)
    table = pd.concat([table, wide], axis=1)
    if order is not None:
        table = table.reindex([o for o in order if o in table.index])
    return table


def thousands(table: pd.DataFrame) -> pd.DataFrame:
    """Integers of a table written with thousands separators (102528 -> '102,528'), for
    tables shown beside formatted prose; other columns are left alone."""
    out = table.copy()
    for c in out.columns:
        if pd.api.types.is_integer_dtype(out[c]) and not pd.api.types.is_bool_dtype(out[c]):
            out[c] = [integer_text(v) for v in out[c]]
    return out


def signed_number(x: float, digits: int, plus: bool = False) -> str:
    """`x` to `digits` decimals with thousands separators and a true minus sign (and, with
    `plus`, a plus sign on positive values); a value that rounds to zero is written
    without a sign (0.000, not −0.000)."""
    text = f"{x:,.{digits}f}"
    if float(text.replace(",", "")) == 0:
        return text.lstrip("-")
    return text.replace("-", MINUS) if x < 0 else ("+" if plus else "") + text


def readable(table: pd.DataFrame, digits: int, index_digits: int | None = None) -> pd.DataFrame:
    """A numeric table written as the prose writes numbers: floats to `digits` decimals
    (the index's to `index_digits`, by default the same) with a true minus sign, integers
    with thousands separators."""
    def cell(v, places=digits):
        if isinstance(v, (float, np.floating)):
            return signed_number(float(v), places)
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            return signed_number(float(v), 0)
        return v
    out = table.map(cell)
    places = digits if index_digits is None else index_digits
    out.index = pd.Index([cell(v, places) for v in table.index], name=table.index.name)
    out.columns = pd.Index([cell(v) for v in table.columns], name=table.columns.name)
    return out


def matrix(values, rows: str, columns: str, digits: int = 3) -> pd.DataFrame:
    """A small 2-D tensor or array as a table a reader can print: rows and columns
    numbered and named (`rows`="query", `columns`="key"), booleans as 1 and 0, numbers
    as `readable` writes them (−∞ for a masked score)."""
    a = np.asarray(values.detach() if hasattr(values, "detach") else values)
    a = a.astype(int) if a.dtype == bool else a
    table = pd.DataFrame(a, index=pd.Index(range(a.shape[0]), name=rows),
                         columns=pd.Index(range(a.shape[1]), name=columns))
    out = readable(table, digits).replace({"−inf": "−∞", "inf": "∞"})
    out.index, out.columns = table.index, table.columns  # positions, not formatted numbers
    return out


def _myst_glue():
    """myst_nb's `glue`. Importing it imports nbformat and so jsonschema, which imports
    rfc3987_syntax when that is installed (JupyterLab's dependencies install it); that
    compiles 38 grammars, 1.3 s of every chapter's kernel, for a check of IRI formats
    that no chapter runs. It is hidden for that one import, so jsonschema leaves the
    check out."""
    hide = "jsonschema" not in sys.modules and "rfc3987_syntax" not in sys.modules
    if hide:
        sys.modules["rfc3987_syntax"] = None  # `import rfc3987_syntax` raises ImportError
    try:
        from myst_nb.ext.glue import glue  # what myst_nb.glue imports when first called
    finally:
        if hide:
            del sys.modules["rfc3987_syntax"]
    return glue


_HYPHEN_MINUS = re.compile(r"(?<![\w.])-(?=\d)")  # "-0.27", "[-3, 1]"; not "4-pair", "1e-3"


def glue_all(values: dict) -> None:
    """Glue each value for `{glue:text}` in Markdown, as a plain Python str/int/float. In
    text, a negative number's hyphen becomes the minus sign the prose prints."""
    glue = _myst_glue()

    for name, value in values.items():
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, (str, int, float)):
            raise TypeError(f"glue {name!r}: expected str/int/float, got {type(value).__name__}")
        if isinstance(value, str):
            value = _HYPHEN_MINUS.sub(MINUS, value)
        glue(name, value, display=False)


# ---------------------------------------------------------------- tiny numbers in prose
# Added for the norm and RoPE chapters: differences at float-rounding size, glued as text.

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def sci(x: float, digits: int = 1) -> str:
    """A number for prose in scientific form: '2.4 × 10⁻⁷'; an exact zero is '0'."""
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    exp = math.floor(math.log10(abs(x)))
    mant = round(x / 10 ** exp, digits)
    if abs(mant) >= 10:
        mant, exp = mant / 10, exp + 1
    return f"{mant:.{digits}f}" + ("" if exp == 0 else f" × 10{str(exp).translate(_SUPERSCRIPT)}")


def within(x: float) -> str:
    """The power of ten just above a float-rounding difference, for prose: '10⁻⁶'; an exact
    zero is '0'. The digits of such a difference depend on the CPU's kernels (one attention
    check came out 2.3e-09 on an AVX-512 CPU and 2.8e-09 on an AVX2 one), the bound not."""
    x = abs(float(x))
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    return "10" + str(math.ceil(math.log10(x))).translate(_SUPERSCRIPT)


def below(x: float, bound: float = 1e-6) -> str:
    """A float-rounding difference for display: '< 10⁻⁶' when |x| is under `bound` (its
    digits, even whether it is exactly 0, depend on the CPU's kernels), `sci(x)` if not."""
    return f"< {within(bound)}" if abs(float(x)) < bound else sci(x)


def seed_list_text(seeds, empty: str = "none") -> str:
    """Seeds for prose: '0 to 9' when they run without a gap, '0, 2, 5' otherwise, '3'
    for one; `empty` when there are none."""
    seeds = sorted(int(x) for x in seeds)
    if not seeds:
        return empty
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]} to {seeds[-1]}"
    return ", ".join(map(str, seeds))


def and_list(words, empty: str = "–", start: bool = False) -> str:
    """Words for prose: 'a', 'a and b', 'a, b and c'; `empty` when there are none. `start`:
    the list opens a sentence, so its first letter is a capital (the rest kept: "MHA")."""
    words = [str(w) for w in words]
    if not words:
        return empty
    text = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return text[:1].upper() + text[1:] if start else text


# ---------------------------------------------------------------- ranges in prose
# Shared by the chapters: one treatment of a missing value everywhere.

def span(values, digits: int = 2, percent: bool = False) -> str:
    """The range of some values for prose, joined by an en dash: '0.12–0.40'; one number
    when both ends round alike ('0.40'); '–' when there are none (NaN is dropped). With
    `percent`, fractions written as percentages with one sign ('40–60%')."""
    vals = np.asarray(values, dtype=float).ravel()
    vals = vals[~np.isnan(vals)]
    if vals.size == 0:
        return "–"
    scale, unit = (100.0, "%") if percent else (1.0, "")
    lo, hi = f"{scale * vals.min():.{digits}f}", f"{scale * vals.max():.{digits}f}"
    return (lo if lo == hi else f"{lo}–{hi}") + unit


def seed_range_text(values, digits: int = 3) -> str:
    """One quantity over seeds for prose: 'm in every seed' when every seed rounds alike,
    'm (seeds range a to b)' otherwise, m the mean, all to `digits` significant figures;
    seeds whose value is not finite are counted ('..., not finite in 1 of 3 seeds')."""
    vals = [float(v) for v in values]
    ok = [v for v in vals if math.isfinite(v)]
    if not ok:
        return f"not finite in any of {len(vals)} seeds"
    lo, hi = _significant(min(ok), digits), _significant(max(ok), digits)
    mean = _significant(sum(ok) / len(ok), digits)
    s = f"{mean} in every seed" if lo == hi else f"{mean} (seeds range {lo} to {hi})"
    if len(ok) < len(vals):
        s += f", not finite in {len(vals) - len(ok)} of {len(vals)} seeds"
    return s


def _significant(v: float, digits: int = 3) -> str:
    """`digits` significant figures, without exponent notation up to 10^6."""
    if abs(v) >= 10 ** digits:
        return f"{v:,.0f}"
    return f"{float(f'{v:.{digits}g}'):g}" if v else "0"


def overflow_text(overflow_layers) -> str:
    """Where a stack's stream stopped being finite, across seeds, as a phrase; a seed whose
    stream stayed finite is None (or NaN)."""
    layers = [v for v in overflow_layers if v is not None and v == v]  # drop None and NaN
    n = len(list(overflow_layers))
    if not layers:
        return f"stays finite through every layer in all {n} seeds"
    lo, hi = int(min(layers)), int(max(layers))
    where = f"at depth {lo}" if lo == hi else f"between depth {lo} and {hi}"
    return f"overflows float32 (the values become inf, then NaN) {where} in {len(layers)} of {n} seeds"


# ---------------------------------------------------------------- sentences whose shape follows the data
# A chapter glues these whole: which branch holds depends on the run (the committed study,
# a reader's own seeds, weights that are or are not there), so the words live here, tested.

UNSOLVED_AT = 0.4
"""A seed at or below this test accuracy has not solved its task: far under the solve
threshold (`train.loop.Budget.solve_at`), above recall's chance of a quarter so that a seed
stuck at chance counts."""


def split_rows(final_rows: pd.DataFrame, high: float | None = None, low: float = UNSOLVED_AT) -> pd.Series:
    """Per (task, regime, variant) row of runs at their last checkpoint: does one seed end
    at `high` (the solve threshold by default) or more and another at `low` or less?"""
    high = Budget().solve_at if high is None else high
    if not low < high:
        raise ValueError(f"low ({low}) must lie below high ({high})")
    return final_rows.groupby(["task", "regime", "variant"]).test_acc.agg(
        lambda a: bool((a >= high).any() and (a <= low).any()))


def split_text(final_rows: pd.DataFrame, high: float | None = None, low: float = UNSOLVED_AT) -> str:
    """The limits page's sentence on rows whose seeds split into solved and unsolved
    (`split_rows`), at the one step every row was read at."""
    high = Budget().solve_at if high is None else high
    steps = sorted(final_rows.step.unique())
    if len(steps) != 1:
        raise ValueError(f"final_rows must be read at one step, got steps {steps}")
    split = split_rows(final_rows, high, low)
    if not split.any():
        return (f"No row of the matrix has one seed at {high:.0%} or more and another at "
                f"{low:.0%} or less, so the means sit near their seeds.")
    return (f"In {int(split.sum())} of {len(split)} rows of the matrix (variant, task and "
            f"data regime), at least one seed is at {high:.0%} or more at step "
            f"{int(steps[0]):,} and another at {low:.0%} or less: within this budget "
            "some seeds solve the task and others do not, and such a row's mean sits "
            "between two clusters of seeds rather than near either.")


def weights_checked_text(trained, tasks=("recall", "addition")) -> str:
    """Which committed reference weights a check also ran on: `trained` the tasks whose
    weights were found, out of `tasks`."""
    trained = [t for t in tasks if t in set(trained)]
    if len(trained) == len(tasks):
        return ("The committed reference weights (seed 0, trained on the finite set of "
                "recall and of addition, saved where each run stopped) are checked as well, "
                "in the last rows; on addition that is the graded task itself, six-token "
                "chains on the test set.")
    if not trained:
        return ("No trained reference weights are committed in artifacts/weights, so "
                "every row uses random weights.")
    return (f"Of the committed reference weights only the {trained[0]} "
            "model is present; it is checked in the last row.")


def identical_tokens_text(same: pd.DataFrame) -> str:
    """Cached against recomputed generation, one row per model (columns `identical`,
    `tokens compared`, `tokens that differ`), in a sentence."""
    n_same, n = int(same["identical"].sum()), len(same)
    n_tokens, n_diff = int(same["tokens compared"].sum()), int(same["tokens that differ"].sum())
    if n_same == n:
        return (f"All {n} models give identical tokens with and without the "
                f"cache: {n_tokens:,} tokens compared, none differs.")
    return (f"{n_same} of {n} models give identical tokens with and "
            f"without the cache; {n_diff:,} of {n_tokens:,} tokens differ.")


def count_of_text(counts, n: int) -> str:
    """How many of `n` each of several cases kept, for prose: 'all 40' when every case
    kept all, '36 to 40 of 40' otherwise."""
    counts = [int(c) for c in counts]
    if all(c == n for c in counts):
        return f"all {n}"
    return f"{min(counts)} to {max(counts)} of {n}"


def machine_text(machine: dict) -> str:
    """The machine a timing was measured on: 'CPU (8 cores, load average 0.3 while
    measuring), torch 2.5.1, 1 thread'; the load is left out when it was not recorded."""
    load = machine.get("load_average_1min")
    return (f"{machine['cpu']} ({machine['cores']} cores"
            + (f", load average {load:.1f} while measuring" if load is not None else "")
            + f"), torch {machine['torch']}, {machine['threads']} thread"
            + ("s" if machine["threads"] != 1 else ""))


# ---------------------------------------------------------------- sizes and settings in tables

def integer_text(x) -> str:
    """A whole number with thousands separators, for glued prose: 6,738,415,616 (however
    large: `count_text` abbreviates, this does not)."""
    if float(x) != int(x):
        raise ValueError(f"integer_text takes a whole number, got {x!r}")
    return f"{int(x):,}"


def count_text(x: float) -> str:
    """A count of parameters or tokens for a table: '1.4T', '175B', '6.7B' from a billion
    up (whole billions from a hundred billion), the whole number with thousands separators
    below ('102,528')."""
    if x >= 1e12:
        return f"{x / 1e12:.1f}T"
    if x >= 1e9:
        return f"{x / 1e9:.0f}B" if x >= 1e11 else f"{x / 1e9:.1f}B"
    return f"{int(x):,}"


def shape_text(x) -> str:
    """What a module takes or gives, for a trace table: a tensor's shape '(2, 14, 64)',
    several joined by commas, anything else its repr."""
    if isinstance(x, (tuple, list)):
        return ", ".join(shape_text(t) for t in x)
    return str(tuple(x.shape)) if hasattr(x, "shape") else repr(x)
