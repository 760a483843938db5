"""Shared test set-up.

One thread, so float reductions (and thus every test) are deterministic. Unit tests train
eagerly by default (LLAMANAT_COMPILE=0: no compile time on a cold machine); the compiled
path the study uses is exercised explicitly (test_train, test_study, the refit test).
"""
import os

os.environ.setdefault("LLAMANAT_COMPILE", "0")

import torch  # noqa: E402

torch.set_num_threads(1)
