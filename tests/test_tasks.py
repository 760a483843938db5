"""The two tasks: item formats, disjoint seeded splits, and graders that never crash on bad output."""
import pytest
import torch

from llamanat_core.data.tasks import (
    ANSWER0,
    DIGIT0,
    EQ,
    KEY0,
    SEP,
    VALUE0,
    VOCAB_SIZE,
    Addition,
    Recall,
    decode,
    make_task,
)


def digits(s: str) -> list[int]:
    return [DIGIT0 + int(c) for c in s]


@pytest.fixture(scope="module")
def addition():
    return Addition(seed=0).splits(4000, 200, 200)


@pytest.fixture(scope="module")
def recall():
    return {n: Recall(seed=0, n_pairs=n).splits(400, 50, 50) for n in (4, 8, 12)}


def test_vocabulary():
    assert VOCAB_SIZE == 61
    assert (SEP, EQ, DIGIT0, KEY0, VALUE0, ANSWER0) == (1, 2, 3, 13, 29, 45)


@pytest.mark.parametrize("a, b, chain", [
    (999, 999, "819191"),  # 1998: a carry out of every column
    (100, 100, "000020"),  # 200: no carries
    (555, 445, "010101"),  # 1000: the carry ripples through all three columns
    (123, 456, "907050"),  # 579
    (109, 891, "010101"),  # 1000
])
def test_addition_chain_by_hand(a, b, chain):
    item = Addition.encode(a, b)
    assert len(item) == 14
    assert item == digits(f"{a}") + [SEP] + digits(f"{b}") + [EQ] + digits(chain)
    assert Addition.parse(torch.tensor([digits(chain)])).item() == a + b


def test_addition_items(addition):
    for data in (addition.train, addition.val, addition.test):
        assert data.ids.shape[1] == 14 and data.answer_len == 6 and data.prompt.shape[1] == 8
        p = data.prompt
        assert (p[:, 3] == SEP).all() and (p[:, 7] == EQ).all()
        operand_digits = p[:, [0, 1, 2, 4, 5, 6]]
        assert ((operand_digits >= DIGIT0) & (operand_digits <= DIGIT0 + 9)).all()
        assert (p[:, 0] != DIGIT0).all() and (p[:, 4] != DIGIT0).all()  # 100..999: no leading zero
        a, b = Addition.operands(p)
        assert torch.equal(Addition.parse(data.answer), a + b)  # every stored chain is right
        assert Addition(0).grade(p, data.answer).all()
    assert (len(addition.train), len(addition.val), len(addition.test)) == (4000, 200, 200)


def test_addition_splits_disjoint(addition):
    sets = [{tuple(r) for r in d.prompt.tolist()} for d in (addition.train, addition.val, addition.test)]
    assert [len(s) for s in sets] == [4000, 200, 200]  # no repeated operand pair within a split
    assert not (sets[0] & sets[1]) and not (sets[0] & sets[2]) and not (sets[1] & sets[2])


@pytest.mark.parametrize("n, length", [(4, 13), (8, 25), (12, 37)])
def test_recall_items(n, length, recall):
    task = Recall(seed=0, n_pairs=n)
    assert task.prompt_len == length
    for data in (recall[n].train, recall[n].val, recall[n].test):
        assert data.ids.shape[1] == length + 1 and data.prompt.shape[1] == length
        for row in data.ids.tolist()[:50]:
            keys, values = row[0:3 * n - 1:3], row[1:3 * n - 1:3]
            assert all(KEY0 <= k < VALUE0 for k in keys) and len(set(keys)) == n
            assert all(VALUE0 <= v < ANSWER0 for v in values) and len(set(values)) == n
            assert row[2:3 * n - 1:3] == [SEP] * (n - 1) and row[3 * n - 1] == EQ
            probe, answer = row[3 * n], row[3 * n + 1]
            assert probe in keys
            assert answer == ANSWER0 + values[keys.index(probe)] - VALUE0  # the value's private name
            assert answer not in row[:-1]  # a name never appears in the input


def test_recall_splits_disjoint(recall):
    for n, splits in recall.items():
        sets = [{tuple(r) for r in d.ids.tolist()} for d in (splits.train, splits.val, splits.test)]
        assert [len(s) for s in sets] == [400, 50, 50], n
        assert not (sets[0] & sets[1]) and not (sets[0] & sets[2]) and not (sets[1] & sets[2])


def test_same_seed_same_data_whatever_torch_rng():
    torch.manual_seed(0)
    a = Addition(seed=3).splits(100, 10, 10)
    r = Recall(seed=3, n_pairs=8).splits(100, 10, 10)
    torch.manual_seed(12345)
    a2 = Addition(seed=3).splits(100, 10, 10)
    r2 = Recall(seed=3, n_pairs=8).splits(100, 10, 10)
    assert torch.equal(a.train.ids, a2.train.ids) and torch.equal(a.test.ids, a2.test.ids)
    assert torch.equal(r.train.ids, r2.train.ids) and torch.equal(r.test.ids, r2.test.ids)
    assert not torch.equal(Addition(seed=4).splits(100, 10, 10).train.ids, a.train.ids)
    assert not torch.equal(Recall(seed=4, n_pairs=8).splits(100, 10, 10).train.ids, r.train.ids)


def test_name_and_copy_share_items():
    name = Recall(seed=1, n_pairs=4, answer="name").splits(300, 20, 20)
    copy = Recall(seed=1, n_pairs=4, answer="copy").splits(300, 20, 20)
    for a, b in ((name.train, copy.train), (name.val, copy.val), (name.test, copy.test)):
        assert torch.equal(a.prompt, b.prompt)
        assert ((b.answer >= VALUE0) & (b.answer < ANSWER0)).all()
        assert torch.equal(a.answer - ANSWER0, b.answer - VALUE0)  # same value, other alphabet
        # the copy answer is the value token stored right after the probed key
        probe = b.prompt[:, -1:]
        pos = (b.prompt[:, :-2] == probe).int().argmax(dim=1)
        assert torch.equal(b.prompt[torch.arange(len(b)), pos + 1], b.answer[:, 0])


def test_addition_grader_malformed_is_wrong_not_an_error():
    task = Addition()
    prompt = torch.tensor([Addition.encode(999, 999)[:8], Addition.encode(123, 456)[:8]])
    right = torch.tensor([digits("819191"), digits("907050")])
    assert task.grade(prompt, right).tolist() == [True, True]
    assert task.grade(prompt, right[:, :5]).tolist() == [False, False]  # too short
    assert task.grade(prompt, torch.cat((right, right[:, :1]), 1)).tolist() == [False, False]  # too long
    assert task.grade(prompt, right[:, :0]).tolist() == [False, False]  # nothing generated
    for bad in (SEP, EQ, 0, KEY0, VALUE0 + 3, ANSWER0 + 15, DIGIT0 + 10):  # non-digit tokens
        chain = right.clone()
        chain[0, 2] = bad
        assert task.grade(prompt, chain).tolist() == [False, True], decode([bad])
    wrong_sum = right.clone()
    wrong_sum[1, 0] = DIGIT0 + 8  # 578: well formed, wrong
    assert task.grade(prompt, wrong_sum).tolist() == [True, False]
    no_carry = torch.tensor([digits("818181"), digits("907050")])  # a wrong carry digit
    assert task.grade(prompt, no_carry).tolist() == [False, True]


def test_recall_grader_malformed_is_wrong_not_an_error():
    data = Recall(seed=0, n_pairs=4).splits(0, 0, 6).test
    task = Recall(seed=0, n_pairs=4)
    assert task.grade(data.prompt, data.answer, data.answer).all()
    copy_tokens = data.answer - ANSWER0 + VALUE0  # right value, wrong (copy) alphabet
    assert not task.grade(data.prompt, copy_tokens, data.answer).any()
    for bad in (0, SEP, EQ, DIGIT0, KEY0):
        assert not task.grade(data.prompt, torch.full_like(data.answer, bad), data.answer).any()
    other = ANSWER0 + (data.answer - ANSWER0 + 1) % 16  # another value's name
    assert not task.grade(data.prompt, other, data.answer).any()
    assert not task.grade(data.prompt, data.answer[:, :0], data.answer).any()  # nothing generated
    # and the copy formulation rejects the name token
    copy_data = Recall(seed=0, n_pairs=4, answer="copy").splits(0, 0, 6).test
    assert not task.grade(copy_data.prompt, data.answer, copy_data.answer).any()


def test_too_many_items_raise_with_counts():
    # one pair: 16 keys x 16 values x 1 probe = 256 distinct items
    with pytest.raises(ValueError, match=r"256 distinct items; asked for 300"):
        Recall(seed=0, n_pairs=1).splits(280, 10, 10)
    with pytest.raises(ValueError, match=r"810000 distinct operand pairs; asked for 810001"):
        Addition().splits(810_000, 1, 0)
    Recall(seed=0, n_pairs=1).splits(100, 14, 14)  # half the items can be drawn


@pytest.mark.parametrize("n_pairs", [0, 17, -1, 2.0])
def test_invalid_pair_counts(n_pairs):
    with pytest.raises(ValueError, match="n_pairs"):
        Recall(n_pairs=n_pairs)


def test_other_task_errors():
    with pytest.raises(ValueError, match="answer"):
        Recall(answer="spell")
    with pytest.raises(ValueError, match="n_val"):
        Addition().splits(10, -1, 10)
    with pytest.raises(ValueError, match="unknown task 'sorting'"):
        make_task("sorting")
    assert isinstance(make_task("recall", 0, 8, "copy"), Recall)


def test_streams_draw_as_the_standard_library_does():
    """The task streams rest on `getrandbits` alone; item for item they are what
    `random.sample` and `random.randrange` draw from the same generator (on this Python),
    so writing the rule out changed no item of any committed run."""
    import random

    for n in (1, 4, 8, 12, 16):
        ours, std = random.Random(f"s{n}"), random.Random(f"s{n}")
        task = Recall(0, n)
        for _ in range(2_000):
            keys = std.sample(range(16), n)
            values = std.sample(range(16), n)
            assert task._item(ours) == (*keys, *values, std.randrange(n))
    ours, std = random.Random(7), random.Random(7)
    add = Addition(0)
    for _ in range(2_000):
        p = std.randrange(add.capacity)
        assert add.draw(ours) == Addition.encode(100 + p // 900, 100 + p % 900)
    # and the rule can tell generators apart
    assert Recall(0, 4)._item(random.Random(1)) != Recall(0, 4)._item(random.Random(2))


@pytest.mark.parametrize("a, b", [(100, 100), (999, 999), (505, 496), (123, 877), (990, 109)])
def test_addition_encoding_is_the_digits_and_the_chain(a, b):
    ids = Addition.encode(a, b)
    assert ids[:8] == digits(f"{a:03d}") + [SEP] + digits(f"{b:03d}") + [EQ]
    total = Addition.parse(torch.tensor([ids[8:]]))
    assert total.item() == a + b
