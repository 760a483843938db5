"""Shared test set-up: one thread, so float reductions (and thus every test) are deterministic."""
import torch

torch.set_num_threads(1)
