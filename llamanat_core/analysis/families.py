"""The core of every paired decision, the puzzles' and the text study's alike: two arms
paired seed by seed, the pairs split into the design's two stages, Holm within each
family, and each row finished at the level Holm gives it.

`comparisons.decide` (integer units, sign flips or sign tests, the chance checks of the
puzzles) and `text_comparisons.decide_text` (the median by sign tests in nats per
character) supply only what differs: how one comparison is tested (`p`, `_pending`) and
how its row is finished (its interval and verdict, `finish`).
"""
from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from . import sequential, stats


def pair_by_seed(ref: pd.DataFrame, ctl: pd.DataFrame) -> pd.DataFrame:
    """The two rows joined seed by seed (columns suffixed `_r`, `_c`), in seed order; only
    seeds present in both count, and a row with two runs for one seed is an error."""
    for name, g in (("reference", ref), ("control", ctl)):
        if g.seed.duplicated().any():
            twice = sorted(g.seed[g.seed.duplicated()])
            raise ValueError(f"the {name} row has two runs for one seed: {twice}")
    return ref.merge(ctl, on="seed", suffixes=("_r", "_c")).sort_values("seed").reset_index(drop=True)


def stage_pairs(pair: pd.DataFrame, column: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(pairs, first-stage pairs, added-stage pairs) of those where both arms have `column`
    (a learned position table has no loss on longer windows)."""
    pair = pair[pair[f"{column}_r"].notna() & pair[f"{column}_c"].notna()]
    return (pair, pair[pair.seed.isin(sequential.FIRST_SEEDS)],
            pair[pair.seed.isin(sequential.ADDED_SEEDS)])


def second_stage(go_on: bool, added_pairs: pd.DataFrame) -> tuple[bool, bool, str | None]:
    """(use the added seeds?, still pending?, why it stopped while pending) for a
    comparison the stage-1 rule sends on (`go_on`) or not. Stage 2 counts only once all
    its seeds are in: a look at part of it would be a third look the design does not pay
    for, so until then the row shows stage 1 and says how many added seeds are in."""
    if not go_on:
        return False, False, None
    planned = len(sequential.ADDED_SEEDS)
    if len(added_pairs) < planned:
        return False, True, (f"undecided on the first {len(sequential.FIRST_SEEDS)} seeds: "
                             f"{len(added_pairs)} of {planned} added seeds so far")
    return True, False, None


def with_holm(df: pd.DataFrame, family: list[str], pending_level: float | None = None) -> pd.DataFrame:
    """Each row's Holm level (`level`) and adjusted p (`p_holm`) within its family. A row
    still waiting for its added seeds holds its place with p = 1 (it cannot make another
    row's step easier) and, if `pending_level` is given, is shown at that level."""
    pending = df._pending.astype(bool)
    holm_p = df.p.where(~pending, 1.0)
    groups = [df[c] for c in family]
    df["level"] = holm_p.groupby(groups, sort=False).transform(
        lambda p: pd.Series(stats.holm_levels(p), index=p.index))
    df["p_holm"] = holm_p.groupby(groups, sort=False).transform(
        lambda p: pd.Series(stats.holm(p), index=p.index)).where(~pending)
    if pending_level is not None:
        df.loc[pending, "level"] = pending_level
    return df


def decide_families(rows: list[dict], family: list[str], finish: Callable[[dict], dict],
                    pending_level: float | None = None) -> pd.DataFrame:
    """Every comparison decided: `rows` (one dict per comparison and endpoint, with the
    `family` columns, its design p and `_pending`) get their Holm level within their
    family (`with_holm`), then `finish(row)` reads each row's interval and verdict at that
    level; its columns replace any of the same name."""
    df = with_holm(pd.DataFrame(rows), family, pending_level)
    finished = pd.DataFrame([finish(r) for r in df.to_dict("records")], index=df.index)
    return pd.concat([df.drop(columns=[c for c in finished.columns if c in df]), finished], axis=1)
