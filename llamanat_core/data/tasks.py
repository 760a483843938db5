"""The two tasks with exact graders: addition with a carry chain, and recall.

One 61-token alphabet. Every item of a set has the same length (no padding), and each
(task, seed) draws from its own `random.Random`, independent of torch's RNG.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

PAD, SEP, EQ = 0, 1, 2
DIGIT0 = 3  # digits 0-9 -> 3..12
KEY0 = 13  # 16 key symbols -> 13..28
VALUE0 = 29  # 16 value symbols -> 29..44
ANSWER0 = 45  # 16 answer symbols -> 45..60, one private to each value
N_SYMBOLS = 16
VOCAB_SIZE = ANSWER0 + N_SYMBOLS  # 61
TRAIN_PAIRS = 4  # the recall length every run trains at (longer ones are only scored)


def token_name(t: int) -> str:
    """A readable name for a token id (for traces in the book)."""
    if t == PAD:
        return "<pad>"
    if t == SEP:
        return "|"
    if t == EQ:
        return "="
    if DIGIT0 <= t < KEY0:
        return str(t - DIGIT0)
    if KEY0 <= t < VALUE0:
        return f"k{t - KEY0}"
    if VALUE0 <= t < ANSWER0:
        return f"v{t - VALUE0}"
    if ANSWER0 <= t < VOCAB_SIZE:
        return f"a{t - ANSWER0}"
    raise ValueError(f"token id {t} is outside the vocabulary of {VOCAB_SIZE}")


def decode(ids) -> str:
    return " ".join(token_name(int(t)) for t in ids)


@dataclass
class TaskData:
    """Equal-length items: ids (N, L); the answer occupies the last `answer_len` tokens."""
    ids: torch.Tensor
    answer_len: int

    @property
    def prompt(self) -> torch.Tensor:
        return self.ids[:, :-self.answer_len]

    @property
    def answer(self) -> torch.Tensor:
        return self.ids[:, -self.answer_len:]

    def __len__(self) -> int:
        return self.ids.shape[0]


@dataclass
class Splits:
    """A task's disjoint training, validation and test sets."""
    train: TaskData
    val: TaskData
    test: TaskData


def _below(rng: random.Random, n: int) -> int:
    """A uniform integer in [0, n): `random.Random._randbelow`'s rule (rejection sampling
    on `getrandbits`), written out so the task streams rest on getrandbits alone, a
    documented, stable generator, and so a fresh batch costs fewer Python calls."""
    k = n.bit_length()
    r = rng.getrandbits(k)
    while r >= n:
        r = rng.getrandbits(k)
    return r


def _sample(rng: random.Random, n: int, k: int) -> list[int]:
    """k distinct integers from range(n) in selection order, as `rng.sample(range(n), k)`
    draws them for a small population (a pool, each pick swapped with the last unpicked)."""
    pool, out = list(range(n)), []
    for i in range(k):
        j = _below(rng, n - i)
        out.append(pool[j])
        pool[j] = pool[n - i - 1]
    return out


def _check_counts(n_train: int, n_val: int, n_test: int) -> None:
    for name, n in (("n_train", n_train), ("n_val", n_val), ("n_test", n_test)):
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {n!r}")


class Addition:
    """a + b for 3-digit operands; the answer is a chain, least significant column first:
    sum digit then carry out, for each of the three columns (six tokens)."""

    name = "addition"
    answer_len = 6
    prompt_len = 8  # a a a | b b b =
    LOW, HIGH = 100, 999
    N_OPERANDS = HIGH - LOW + 1

    def __init__(self, seed: int = 0):
        self.seed = seed

    @property
    def capacity(self) -> int:
        return self.N_OPERANDS ** 2  # ordered operand pairs

    @staticmethod
    def encode(a: int, b: int) -> list[int]:
        ids = [DIGIT0 + a // 100, DIGIT0 + a // 10 % 10, DIGIT0 + a % 10, SEP,
               DIGIT0 + b // 100, DIGIT0 + b // 10 % 10, DIGIT0 + b % 10, EQ]
        carry = 0
        for col in (1, 10, 100):  # least significant column first: sum digit, carry out
            s = a // col % 10 + b // col % 10 + carry
            carry = s // 10
            ids += (DIGIT0 + s % 10, DIGIT0 + carry)
        return ids

    def splits(self, n_train: int = 4000, n_val: int = 200, n_test: int = 200) -> Splits:
        _check_counts(n_train, n_val, n_test)
        total = n_train + n_val + n_test
        if total > self.capacity:
            raise ValueError(f"addition has only {self.capacity} distinct operand pairs; "
                             f"asked for {total} (n_train={n_train}, n_val={n_val}, n_test={n_test})")
        rng = random.Random(f"addition/{self.seed}")
        picks = rng.sample(range(self.capacity), total)  # distinct pairs: splits are disjoint
        rows = [self.encode(self.LOW + p // self.N_OPERANDS, self.LOW + p % self.N_OPERANDS)
                for p in picks]
        ids = torch.tensor(rows, dtype=torch.long).view(total, 14)
        return Splits(TaskData(ids[n_test + n_val:], 6), TaskData(ids[n_test:n_test + n_val], 6),
                      TaskData(ids[:n_test], 6))

    def draw(self, rng: random.Random) -> list[int]:
        """One item (operand pair) from `rng`, encoded: the fresh-data stream's unit."""
        p = _below(rng, self.capacity)  # rng.randrange(self.capacity)
        return self.encode(self.LOW + p // self.N_OPERANDS, self.LOW + p % self.N_OPERANDS)

    @staticmethod
    def parse(chain: torch.Tensor) -> torch.Tensor:
        """(N, 6) generated chain -> integer sum, or -1 where any token is not a digit."""
        if chain.ndim != 2 or chain.shape[1] != 6:  # wrong length: every item is wrong
            return torch.full((chain.shape[0],), -1, dtype=torch.long)
        digits = chain - DIGIT0
        ok = ((digits >= 0) & (digits <= 9)).all(dim=1)
        value = digits[:, 0] + 10 * digits[:, 2] + 100 * digits[:, 4] + 1000 * digits[:, 5]
        return torch.where(ok, value, torch.full_like(value, -1))

    @staticmethod
    def operands(prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d = prompt - DIGIT0  # (N, 8)
        a = 100 * d[:, 0] + 10 * d[:, 1] + d[:, 2]
        b = 100 * d[:, 4] + 10 * d[:, 5] + d[:, 6]
        return a, b

    def grade(self, prompt: torch.Tensor, generated: torch.Tensor,
              answer: torch.Tensor | None = None) -> torch.Tensor:
        """Bool per item: the generated chain, parsed back, equals a + b. Never raises
        on a malformed chain: it is simply wrong."""
        a, b = self.operands(prompt)
        return self.parse(generated) == a + b


class Recall:
    """n key/value pairs, `=`, a probe key; answer with one token.

    answer="name": the answer symbol private to the value (never in the input);
    answer="copy": the value token itself, copied out of the context.
    """

    name = "recall"
    answer_len = 1

    def __init__(self, seed: int = 0, n_pairs: int = TRAIN_PAIRS, answer: str = "name"):
        if answer not in ("name", "copy"):
            raise ValueError(f"Recall answer must be 'name' or 'copy', got {answer!r}")
        if not isinstance(n_pairs, int) or not 1 <= n_pairs <= N_SYMBOLS:
            raise ValueError(f"Recall n_pairs must be an integer in 1..{N_SYMBOLS} "
                             f"(keys and values are distinct within an item), got {n_pairs!r}")
        self.seed, self.n_pairs, self.answer = seed, n_pairs, answer

    @property
    def prompt_len(self) -> int:
        return 3 * self.n_pairs + 1

    @property
    def capacity(self) -> int:
        perm = math.perm(N_SYMBOLS, self.n_pairs)
        return perm * perm * self.n_pairs  # ordered keys x ordered values x probe

    def _item(self, rng: random.Random) -> tuple[int, ...]:
        keys = _sample(rng, N_SYMBOLS, self.n_pairs)
        values = _sample(rng, N_SYMBOLS, self.n_pairs)
        return (*keys, *values, _below(rng, self.n_pairs))  # keys, values, probe

    def _encode(self, item: tuple[int, ...]) -> list[int]:
        n = self.n_pairs
        keys, values, probe = item[:n], item[n:2 * n], item[2 * n]
        ids = [KEY0 + keys[0], VALUE0 + values[0]]
        for k, v in zip(keys[1:], values[1:]):
            ids += (SEP, KEY0 + k, VALUE0 + v)
        answer = (ANSWER0 if self.answer == "name" else VALUE0) + values[probe]
        ids += (EQ, KEY0 + keys[probe], answer)
        return ids

    def draw(self, rng: random.Random) -> list[int]:
        """One item from `rng`, encoded: the fresh-data stream's unit."""
        return self._encode(self._item(rng))

    def splits(self, n_train: int = 4000, n_val: int = 200, n_test: int = 200) -> Splits:
        """Disjoint splits. The stream depends on (n_pairs, seed) only, so `name` and
        `copy` see the same items and differ in the answer token alone."""
        _check_counts(n_train, n_val, n_test)
        total = n_train + n_val + n_test
        if total > self.capacity // 2:
            raise ValueError(f"recall with {self.n_pairs} pairs has {self.capacity} distinct items; "
                             f"asked for {total}, more than half of them (n_train={n_train}, "
                             f"n_val={n_val}, n_test={n_test})")
        rng = random.Random(f"recall/{self.n_pairs}/{self.seed}")
        seen: set[tuple[int, ...]] = set()
        items = []
        while len(items) < total:
            item = self._item(rng)
            if item not in seen:
                seen.add(item)
                items.append(item)
        ids = torch.tensor([self._encode(it) for it in items], dtype=torch.long)
        return Splits(TaskData(ids[n_test + n_val:], 1), TaskData(ids[n_test:n_test + n_val], 1),
                      TaskData(ids[:n_test], 1))

    def grade(self, prompt: torch.Tensor, generated: torch.Tensor,
              answer: torch.Tensor) -> torch.Tensor:
        """Bool per item: the argmax token equals the right answer (any other token is wrong)."""
        if generated.ndim != 2 or generated.shape[1] < 1:
            return torch.zeros(prompt.shape[0], dtype=torch.bool)
        return generated[:, 0] == answer[:, 0]


class FreshStream:
    """Training items never seen before, for the `fresh` data regime.

    Items come from the task's own generator under a separate seeded `random.Random`;
    an item that is in a held-out set (validation, test) or was drawn before is skipped,
    so no batch repeats an item and none leaks a held-out one.
    """

    def __init__(self, task, held_out, seed: int):
        self.task = task
        self.rng = random.Random(f"{task.name}/fresh/{getattr(task, 'n_pairs', 0)}/{seed}")
        self.seen = {tuple(row) for data in held_out for row in data.ids.tolist()}

    def batch(self, size: int) -> torch.Tensor:
        rows = []
        while len(rows) < size:
            row = self.task.draw(self.rng)
            key = tuple(row)
            if key not in self.seen:
                self.seen.add(key)
                rows.append(row)
        return torch.tensor(rows, dtype=torch.long)  # (size, L)


def make_task(name: str, seed: int = 0, n_pairs: int = TRAIN_PAIRS, answer: str = "name"):
    if name == "addition":
        return Addition(seed)
    if name == "recall":
        return Recall(seed, n_pairs, answer)
    raise ValueError(f"unknown task {name!r}; choose 'addition' or 'recall'")
