"""The study read as one analysis: every primary row of the puzzles and of text together.

- `margin_sensitivity`: each equivalence margin halved and doubled (the puzzles' accuracy
  ±0.15 and speed ratio 0.8–1.25, on the scale each is tested on; text ±0.01 nats), and
  the verdicts that change;
- `all_primary`: the primary rows of both studies in one frame, with Benjamini–Hochberg's
  q over all of them (`q_all`), where `comparisons.decide` reaches only the puzzles';
- `error_control`: what error the study controls and at what level, as facts for the
  methods chapter's paragraph.
"""
from __future__ import annotations

import pandas as pd

from . import comparisons, sequential, stats
from .text_comparisons import TEXT_MARGIN, decide_text

MARGIN_SCALES = (0.5, 2.0)
"""Each margin halved and doubled."""
KEY = ["study", "family", "comparison", "metric"]
DECIDED = ("better", "worse")


def _puzzle_key(d: pd.DataFrame) -> pd.DataFrame:
    family = d.measurement + " " + d.task + " " + d.regime
    return d.assign(study="puzzles", family=family)


def _verdicts(puzzles: pd.DataFrame, text: pd.DataFrame) -> pd.DataFrame:
    """The primary rows' verdicts of both studies, keyed alike."""
    p = _puzzle_key(puzzles[puzzles.primary.astype(bool)])
    t = text[text.primary.astype(bool)].assign(study="text")
    return pd.concat([p[KEY + ["verdict"]], t[KEY + ["verdict"]]], ignore_index=True)


def margin_sensitivity(results: pd.DataFrame, text_results: pd.DataFrame, base: pd.DataFrame | None = None,
                       base_text: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per primary row and margin scale whose verdict changes when every margin is
    multiplied by the scale (`MARGIN_SCALES`): study, family, comparison, metric, scale, the
    verdict at the study's margins and at the scaled ones. A halved margin can only turn
    equivalence into undecided (and a row stage one stopped as equivalent may now continue);
    a doubled one the reverse."""
    base = base if base is not None else comparisons.decide(results, with_registered=False)
    base_text = base_text if base_text is not None else decide_text(text_results)
    at = _verdicts(base, base_text)
    out = []
    for scale in MARGIN_SCALES:
        scaled = _verdicts(comparisons.decide(results, with_registered=False, margin_scale=scale),
                           decide_text(text_results, margin=TEXT_MARGIN * scale))
        both = at.merge(scaled, on=KEY, suffixes=("", "_scaled"))
        out.append(both[both.verdict != both.verdict_scaled].assign(scale=scale))
    cols = KEY + ["scale", "verdict", "verdict_scaled"]
    return pd.concat(out, ignore_index=True)[cols] if out else pd.DataFrame(columns=cols)


def margin_counts(moved: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Per study and margin scale: the primary rows, and how many change verdict."""
    out = []
    for study, g in rows.groupby("study"):
        for scale in MARGIN_SCALES:
            m = moved[(moved.study == study) & (moved.scale == scale)]
            out.append({"study": study, "margin": f"×{scale:g}", "primary rows": len(g),
                        "verdicts changed": len(m),
                        "to equivalent": int((m.verdict_scaled == "equivalent").sum()),
                        "from equivalent": int((m.verdict == "equivalent").sum())})
    columns = ["study", "margin", "primary rows", "verdicts changed", "to equivalent", "from equivalent"]
    return pd.DataFrame(out, columns=columns)  # a reader's tiny run may have no tested row


def all_primary(puzzles: pd.DataFrame, text: pd.DataFrame) -> pd.DataFrame:
    """The tested primary rows of both studies (none waiting for seeds, none at chance), with
    their design p, Holm level and verdict, and `q_all`: Benjamini–Hochberg over all of them."""
    p = _puzzle_key(puzzles[puzzles.primary.astype(bool) & puzzles.p.notna()
                            & ~puzzles.stopped.str.contains("so far")
                            & ~puzzles.verdict.isin(["both at chance", "not learned"])])
    t = text[text.primary.astype(bool) & (text.verdict != "pending")].assign(study="text")
    rows = pd.concat([p[KEY + ["p", "level", "verdict"]], t[KEY + ["p", "level", "verdict"]]],
                     ignore_index=True)
    return rows.assign(q_all=stats.benjamini_hochberg(rows.p.to_numpy(float)))


def error_control(rows: pd.DataFrame) -> dict:
    """The facts of the study-wide paragraph: how many primary rows and families each
    study tests, how many Holm rejects within families, how many BH rejects over all rows
    at the same level (and how many of those Holm does not), and the levels involved."""
    holm = rows.p <= rows.level
    bh = rows.q_all <= stats.ALPHA
    families = rows.groupby(["study", "family", "metric"]).ngroups
    return {"alpha": stats.ALPHA, "alpha_first": sequential.ALPHA_FIRST, "rows": len(rows),
            "puzzle_rows": int((rows.study == "puzzles").sum()),
            "text_rows": int((rows.study == "text").sum()), "families": families,
            "holm": int(holm.sum()), "bh": int(bh.sum()), "bh_not_holm": int((bh & ~holm).sum()),
            "holm_not_bh": int((holm & ~bh).sum()),
            # each family's chance of any false decision is at most alpha, so the expected
            # number of families with one is at most alpha times their number
            "families_with_false_bound": stats.ALPHA * families}
