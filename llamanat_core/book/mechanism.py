"""Looking inside the trained models: their attention maps, and what each task reads.

`load_trained` gives the committed weights of a finite-regime run. `attention_weights`
returns the softmax probabilities every layer used on an input: hooks capture each
attention layer's arguments as the model ran, and the layer returns its own weights on
them (`Attention(..., return_weights=True)`), so the map is the model's, not a redrawing
(a test holds weights @ V equal to the layer's own output). The task summaries average
those maps over the validation items of a run's seed and return pandas frames:

recall    from the last prompt position (the query key, where the answer is predicted),
          the mass on each role: the queried key, its value, other keys, other values,
          separators, the query itself
addition  from the position that predicts each chain token (sum and carry of columns
          1..3, units first), the mass on each operand digit
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..data.tasks import EQ, SEP, TRAIN_PAIRS, Addition, token_name
from ..model.model import TinyLlama
from ..study import WEIGHTS_DIR, trained_weights, weights_step
from ..study.run import WEIGHT_VARIANTS
from ..train.loop import Budget, TaskSpec, run_splits

# ---------------------------------------------------------------- the trained weights

def load_trained(variant: str, task: str, seed: int,
                 weights_dir: Path | None = None) -> tuple[TinyLlama, int]:
    """The committed weights of the finite-regime run (variant, task, seed), in eval
    mode, and the training step at which they were saved (the run's stop)."""
    if variant not in WEIGHT_VARIANTS:
        raise ValueError(f"the study keeps no weights for variant {variant!r}; "
                         f"kept: {list(WEIGHT_VARIANTS)}")
    weights_dir = Path(WEIGHTS_DIR if weights_dir is None else weights_dir)
    model, path = trained_weights(task, variant, seed, weights_dir=weights_dir)  # checks task, seed
    if model is None:
        have = sorted(p.stem for p in weights_dir.glob("*.safetensors"))
        raise FileNotFoundError(
            f"no weights for {variant} {task} seed={seed}: {path} is missing; "
            f"{weights_dir} holds {have or 'nothing'}")
    return model, weights_step(path)


def validation_ids(task: str, seed: int, n_pairs: int = TRAIN_PAIRS) -> torch.Tensor:
    """The validation items of the run with this seed, whole (prompt and answer): the
    items `fit` scored it on (at a recall length other than 4, its extrapolation set)."""
    spec = TaskSpec(task, TRAIN_PAIRS)  # rejects an unknown task when it makes it
    longer = None if task != "recall" or n_pairs == TRAIN_PAIRS else n_pairs
    return run_splits(spec, seed, Budget(), longer)[1].val.ids


# ---------------------------------------------------------------- attention maps

def call_arguments(model: TinyLlama, ids: torch.Tensor, modules) -> list[tuple]:
    """Run the model once on ids and return, in call order, (module, args, kwargs) of every
    call to each of `modules`: what a layer was given, for recomputing what it did."""
    calls: list[tuple] = []
    hooks = [m.register_forward_pre_hook(lambda mod, args, kwargs: calls.append((mod, args, kwargs)),
                                         with_kwargs=True) for m in modules]
    try:
        model(ids)
    finally:
        for h in hooks:
            h.remove()
    return calls


@torch.no_grad()
def attention_weights(model: TinyLlama, ids: torch.Tensor) -> torch.Tensor:
    """ids (B, T) -> (L, B, H, T, T): the attention probabilities of every layer and query
    head; row i of a map is query position i's distribution over key positions 0..i.

    The model runs once as it does in training (no cache, every query); each attention
    layer's arguments are captured on the way and the layer is called again on them with
    `return_weights=True`, so the maps are its own forward's.
    """
    calls = call_arguments(model, ids, [layer.self_attn for layer in model.layers])
    return torch.stack([attn(*args, **kwargs, return_weights=True)[1].float()
                        for attn, args, kwargs in calls])  # (L, B, H, T, T)


def item_attention(model: TinyLlama, ids) -> tuple[np.ndarray, list[str]]:
    """One item (T,) -> its maps (L, H, T, T) as numpy and the token names, for a heatmap."""
    ids = torch.as_tensor(ids, dtype=torch.long).view(1, -1)  # (1, T)
    w = attention_weights(model, ids)[:, 0]  # (L, H, T, T)
    return w.numpy(), [token_name(int(t)) for t in ids[0]]


# ---------------------------------------------------------------- recall

RECALL_ROLES = ("queried key", "queried value", "other keys", "other values", "separators", "query")


def recall_roles(prompt: torch.Tensor) -> np.ndarray:
    """prompt (N, 3n+1) -> (N, 3n+1) index into RECALL_ROLES for every position.

    Pair i holds its key at 3i and value at 3i+1; `|` separates pairs, `=` precedes the
    query key in the last position. Keys are distinct within an item, so the queried
    pair is the one whose key equals the query.
    """
    p = prompt.numpy()
    n_items, t = p.shape
    n_pairs = (t - 1) // 3
    roles = np.full((n_items, t), RECALL_ROLES.index("separators"))
    keys = np.arange(n_pairs) * 3  # (n,)
    queried = (p[:, keys] == p[:, -1:]).argmax(1)  # (N,) the pair asked about
    if not (p[np.arange(n_items), keys[queried]] == p[:, -1]).all():
        raise ValueError("a recall prompt whose query key is not among its keys")
    roles[:, keys] = RECALL_ROLES.index("other keys")
    roles[:, keys + 1] = RECALL_ROLES.index("other values")
    rows = np.arange(n_items)
    roles[rows, keys[queried]] = RECALL_ROLES.index("queried key")
    roles[rows, keys[queried] + 1] = RECALL_ROLES.index("queried value")
    roles[:, -1] = RECALL_ROLES.index("query")
    if not np.isin(p[roles == RECALL_ROLES.index("separators")], (SEP, EQ)).all():
        raise ValueError("not a recall prompt: a separator position holds another token")
    return roles


def _answer_rows(model: TinyLlama, prompt: torch.Tensor) -> np.ndarray:
    """(L, N, H, T): every head's attention from the last prompt position."""
    return attention_weights(model, prompt)[:, :, :, -1, :].numpy()


def recall_attention(model: TinyLlama, seed: int, n_pairs: int = TRAIN_PAIRS,
                     n_items: int | None = None) -> pd.DataFrame:
    """Mass on each role from the position where the answer is predicted, per layer and
    head, averaged over the validation items (the first `n_items`, default all).

    Columns: n_pairs, layer, head, role, positions (how many positions hold the role),
    mass (the role's total), per_position (mass / positions: what a uniform head would
    give every role alike), top (fraction of items where a role's best position is the
    head's most attended one; for "other values" the best of them).
    """
    prompt = validation_ids("recall", seed, n_pairs)[:n_items, :-1]  # (N, 3n+1)
    w = _answer_rows(model, prompt)  # (L, N, H, T)
    roles = recall_roles(prompt)  # (N, T)
    top_role = roles[np.arange(len(roles))[None, :, None], w.argmax(-1)]  # (L, N, H)
    rows = []
    for r, role in enumerate(RECALL_ROLES):
        mass = (w * (roles == r)[None, :, None, :]).sum(-1).mean(1)  # (L, H)
        top_here = top_role == r  # (L, N, H)
        count = int((roles == r).sum(1)[0])  # the same in every item
        for layer in range(w.shape[0]):
            for head in range(w.shape[2]):
                rows.append({"n_pairs": n_pairs, "layer": layer + 1, "head": head + 1, "role": role,
                             "positions": count, "mass": float(mass[layer, head]),
                             "per_position": float(mass[layer, head]) / count,
                             "top": float(top_here[layer, :, head].mean())})
    return pd.DataFrame(rows)


def recall_by_pair(model: TinyLlama, seed: int, n_pairs: int = TRAIN_PAIRS,
                   n_items: int | None = None) -> pd.DataFrame:
    """Mass on the queried value from the answer position, split by which pair was asked
    about (1 = the first in the list): whether a head still finds the value at every
    position of a list longer than the training one.

    Columns: n_pairs, layer, head, pair, items (how many items ask about that pair), mass.
    """
    prompt = validation_ids("recall", seed, n_pairs)[:n_items, :-1]  # (N, 3n+1)
    w = _answer_rows(model, prompt)  # (L, N, H, T)
    roles = recall_roles(prompt)  # (N, T)
    value = (w * (roles == RECALL_ROLES.index("queried value"))[None, :, None, :]).sum(-1)  # (L, N, H)
    pair = (roles == RECALL_ROLES.index("queried key")).argmax(1) // 3  # (N,)
    rows = [{"n_pairs": n_pairs, "layer": layer + 1, "head": head + 1, "pair": i + 1,
             "items": int((pair == i).sum()), "mass": float(value[layer, pair == i, head].mean())}
            for layer in range(w.shape[0]) for head in range(w.shape[2])
            for i in range(n_pairs) if (pair == i).any()]
    return pd.DataFrame(rows)


def recall_item(model: TinyLlama, seed: int, n_pairs: int = TRAIN_PAIRS,
                index: int = 0) -> pd.DataFrame:
    """One validation item's attention from the last prompt position, per position:
    rows (layer, head), columns the prompt's positions (token names, numbered)."""
    prompt = validation_ids("recall", seed, n_pairs)[index:index + 1, :-1]  # (1, T)
    w = _answer_rows(model, prompt)[:, 0]  # (L, H, T)
    roles = recall_roles(prompt)[0]
    cols = pd.MultiIndex.from_arrays(
        [np.arange(prompt.shape[1]), [token_name(int(t)) for t in prompt[0]],
         [RECALL_ROLES[r] for r in roles]], names=("position", "token", "role"))
    index_ = pd.MultiIndex.from_product([range(1, w.shape[0] + 1), range(1, w.shape[1] + 1)],
                                        names=("layer", "head"))
    return pd.DataFrame(w.reshape(-1, w.shape[-1]), index=index_, columns=cols)  # (L*H, T)


def lookup_heads(variant: str, seeds, lengths=(TRAIN_PAIRS,), n_items: int | None = None,
                 weights_dir: Path | None = None) -> pd.DataFrame:
    """Each seed's lookup head: at each list length, the head (layer, head) that puts the
    most attention on the queried value from the answer position, averaged over the
    validation items, and that mass (`recall_attention`'s). One row per (seed, n_pairs)."""
    rows = []
    for seed in seeds:
        model, _ = load_trained(variant, "recall", seed, weights_dir)
        for n in lengths:
            d = recall_attention(model, seed, n, n_items)
            best = d[d.role == "queried value"].sort_values(["mass", "layer", "head"]).iloc[-1]
            rows.append({"variant": variant, "seed": seed, "n_pairs": n, "layer": int(best.layer),
                         "head": int(best["head"]), "mass": float(best.mass)})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- text

@torch.no_grad()
def text_attention_reach(model: TinyLlama, ids: torch.Tensor, near: int = 2, skip: int = 8) -> pd.DataFrame:
    """How far back a text model reads: over windows `ids` (N, T), for each layer and head,
    the attention mass within `near` characters back (offsets 0..near, the character
    itself included) and the mean offset read, averaged over every query past the first
    `skip` positions (those have few characters to choose from) and every window."""
    if not 0 <= skip < ids.shape[1] - 1:
        raise ValueError(f"skip must lie in 0..{ids.shape[1] - 2}, got {skip}")
    w = attention_weights(model, ids)[..., skip:, :]  # (L, N, H, T - skip, T)
    offset = (torch.arange(skip, ids.shape[1])[:, None] - torch.arange(ids.shape[1])[None, :]).clamp(min=0)
    mass = (w * (offset <= near)).sum(-1).mean((1, 3))  # (L, H); the future has weight 0
    mean_offset = (w * offset).sum(-1).mean((1, 3))  # (L, H)
    return pd.DataFrame([{"layer": layer + 1, "head": head + 1, "near": float(mass[layer, head]),
                          "mean_offset": float(mean_offset[layer, head])}
                         for layer in range(w.shape[0]) for head in range(w.shape[2])])


# ---------------------------------------------------------------- addition

ADDITION_SOURCES = ("a hundreds", "a tens", "a units", "b hundreds", "b tens", "b units", "other")
OPERAND_POSITIONS = (0, 1, 2, 4, 5, 6)  # a a a | b b b =
CHAIN = ("sum 1", "carry 1", "sum 2", "carry 2", "sum 3", "carry 3")  # column 1 = units


def addition_attention(model: TinyLlama, seed: int, n_items: int | None = None) -> pd.DataFrame:
    """Which operand digits each chain position reads: per layer and head, the mass from
    the position that predicts each chain token (`=` predicts sum 1, sum 1 predicts
    carry 1, ...) on each operand digit, the rest as "other"; averaged over the
    validation items, teacher-forced (the input training scores).

    Columns: layer, head, target (a CHAIN name), source (an ADDITION_SOURCES name), mass.
    """
    ids = validation_ids("addition", seed)[:n_items, :-1]  # (N, 13): the model's input
    first = Addition.prompt_len - 1  # the `=` position predicts the first chain token
    w = attention_weights(model, ids)[:, :, :, first:, :].mean(1).numpy()  # (L, H, 6, T)
    digits = w[..., list(OPERAND_POSITIONS)]  # (L, H, 6, 6)
    other = 1.0 - digits.sum(-1, keepdims=True)  # (L, H, 6, 1)
    mass = np.concatenate([digits, other], -1)  # (L, H, 6, 7)
    rows = [{"layer": layer + 1, "head": head + 1, "target": tgt, "source": src,
             "mass": float(mass[layer, head, i, j])}
            for layer in range(mass.shape[0]) for head in range(mass.shape[1])
            for i, tgt in enumerate(CHAIN) for j, src in enumerate(ADDITION_SOURCES)]
    return pd.DataFrame(rows)


__all__ = ["load_trained", "validation_ids", "attention_weights",
           "item_attention", "RECALL_ROLES", "recall_roles", "recall_attention", "recall_by_pair",
           "recall_item",
           "ADDITION_SOURCES", "CHAIN", "addition_attention"]
