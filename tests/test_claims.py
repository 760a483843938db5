"""`claims.claim`, the guard of every conclusion: silent when the premise holds, failing
with the sentence on the committed study, warning on a reader's own run."""
import warnings

import numpy as np
import pandas as pd
import pytest

from llamanat_core.book import claims
from llamanat_core.book.execute import check_chapter_parameters


@pytest.fixture(autouse=True)
def committed():
    """Every test starts and ends on the committed study (claims fail)."""
    claims.set_committed_run(True)
    yield
    claims.set_committed_run(True)


def test_claim_passes_silently_and_fails_naming_the_sentence():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        claims.claim(True, "it holds")
        claims.claim(np.bool_(True), "numpy bools count")
    with pytest.raises(claims.ClaimError, match="abs_pos solves addition sooner"):
        claims.claim(False, "abs_pos solves addition sooner")


def test_claim_on_a_readers_run_warns_instead_of_failing():
    claims.set_committed_run(False)
    with pytest.warns(claims.ClaimWarning, match="the data no longer support"):
        claims.claim(False, "a sentence")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        claims.claim(True, "a sentence")


def test_claim_refuses_a_premise_that_is_not_a_bool():
    # a Series or a number is almost always a mistake (its truth is ambiguous or not meant)
    with pytest.raises(TypeError, match="must be a bool"):
        claims.claim(pd.Series([True]), "x")
    with pytest.raises(TypeError, match="must be a bool"):
        claims.claim(0.3, "x")


def test_claims_warn_on_a_chapter_run_with_a_subset_of_the_seeds():
    """The parameter check marks a run on other data than the committed study's every seed
    (a subset of seeds, or fresh runs): its claims warn; the committed run's fail."""
    check_chapter_parameters(seeds=[0, 1])
    with pytest.warns(claims.ClaimWarning, match="a sentence"):
        claims.claim(False, "a sentence")
    check_chapter_parameters(seeds=None, fresh=True)
    with pytest.warns(claims.ClaimWarning, match="a sentence"):
        claims.claim(False, "a sentence")
    check_chapter_parameters()
    with pytest.raises(claims.ClaimError, match="a sentence"):
        claims.claim(False, "a sentence")
