"""Attention: hand-computed scores, masking, padding invariance, gradients."""

import math

import pytest
import torch
from torch.testing import assert_close

from seq2seq.model.attention import (
    ATTENTIONS,
    AdditiveAttention,
    Keys,
    LuongConcatAttention,
    LuongDotAttention,
    LuongGeneralAttention,
    MultiHeadAttention,
    attend_step,
    build_attention,
    masked_softmax,
)

REAL = [name for name in ATTENTIONS if name != "none"]
HQ, HM = 6, 6  # equal so that luong_dot works


def _make(name, hq=HQ, hm=HM, dtype=torch.float32, normalizer="softmax"):
    torch.manual_seed(0)
    return build_attention(name, hq, hm, dim=4, heads=2, normalizer=normalizer).to(
        dtype
    )


def _inputs(b=3, s=5, t=None, hq=HQ, hm=HM, dtype=torch.float32):
    torch.manual_seed(1)
    shape = (b, hq) if t is None else (b, t, hq)
    query = torch.randn(shape, dtype=dtype)
    memory = torch.randn(b, s, hm, dtype=dtype)
    lengths = torch.tensor([s, 2, 1][:b])
    mask = torch.arange(s)[None] < lengths[:, None]
    return query, memory * mask[..., None], mask


def _softmax(scores):
    m = max(scores)
    exps = [math.exp(x - m) for x in scores]
    return [e / sum(exps) for e in exps]


def _set(linear, values):
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(values, dtype=torch.float32))


H = [[1.0, 0.0], [0.0, 1.0], [1.0, -2.0]]  # three source vectors h_j
S = [0.5, -1.0]  # decoder state s


def _check(attn, scores):
    memory = torch.tensor([H])
    mask = torch.ones(1, 3, dtype=torch.bool)
    context, weights = attn(torch.tensor([S]), attn.prepare(memory, mask))
    alpha = _softmax(scores)
    assert_close(weights, torch.tensor([alpha]))
    expected = [sum(a * h[i] for a, h in zip(alpha, H, strict=True)) for i in range(2)]
    assert_close(context, torch.tensor([expected]))


def test_dot_by_hand():
    attn = LuongDotAttention(2, 2)
    _check(attn, [sum(s * h for s, h in zip(S, hj, strict=True)) for hj in H])


def test_general_by_hand():
    w = [[1.0, 2.0], [0.0, -1.0]]
    attn = LuongGeneralAttention(2, 2)
    _set(attn.key_proj, w)  # keys = W h
    wh = [[sum(w[i][k] * hj[k] for k in range(2)) for i in range(2)] for hj in H]
    _check(attn, [sum(S[i] * x[i] for i in range(2)) for x in wh])


def _additive_scores(w, u, v, b):
    scores = []
    for hj in H:
        pre = [
            sum(w[i][k] * S[k] for k in range(2))
            + sum(u[i][k] * hj[k] for k in range(2))
            + b[i]
            for i in range(3)
        ]
        scores.append(sum(v[i] * math.tanh(pre[i]) for i in range(3)))
    return scores


def test_bahdanau_by_hand():
    w, u, v, b = (
        [[1, 0], [0, 1], [1, 1]],
        [[0.5, 1], [-1, 0], [2, 0]],
        [1, -1, 0.5],
        [0.1, 0, -0.2],
    )
    attn = AdditiveAttention(2, 2, dim=3)
    _set(attn.query_proj, w)
    _set(attn.key_proj, u)
    _set(attn.v, [v])
    with torch.no_grad():
        attn.key_proj.bias.copy_(torch.tensor(b))
    _check(attn, _additive_scores(w, u, v, b))


def test_luong_concat_by_hand():
    """``vᵀ tanh(W [s; h])`` with one matrix W over the concatenation."""
    big_w = [[1.0, 0.0, 0.5, 1.0], [0.0, 1.0, -1.0, 0.0], [1.0, 1.0, 2.0, 0.0]]
    v = [1.0, -1.0, 0.5]
    attn = LuongConcatAttention(2, 2, dim=3)
    _set(attn.query_proj, [row[:2] for row in big_w])
    _set(attn.key_proj, [row[2:] for row in big_w])
    _set(attn.v, [v])
    with torch.no_grad():
        attn.key_proj.bias.zero_()
    scores = [
        sum(
            v[i] * math.tanh(sum(big_w[i][k] * x for k, x in enumerate(S + hj)))
            for i in range(3)
        )
        for hj in H
    ]
    _check(attn, scores)


def test_multihead_by_hand():
    torch.manual_seed(0)
    attn = MultiHeadAttention(2, 2, dim=4, heads=2)
    memory, mask = torch.tensor([H]), torch.ones(1, 3, dtype=torch.bool)
    out = attn.attend(torch.tensor([S]), attn.prepare(memory, mask))
    q = attn.query_proj.weight @ torch.tensor(S)  # (4,)
    k = memory[0] @ attn.key_proj.weight.T  # (3, 4)
    v = memory[0] @ attn.value_proj.weight.T
    heads, ctx = [], []
    for h in range(2):
        sl = slice(2 * h, 2 * h + 2)
        alpha = torch.softmax(k[:, sl] @ q[sl] / math.sqrt(2), dim=0)
        heads.append(alpha)
        ctx.append(alpha @ v[:, sl])
    assert_close(out.head_weights, torch.stack(heads)[None])
    assert_close(out.weights, torch.stack(heads).mean(0)[None])
    assert_close(out.context, (attn.out_proj.weight @ torch.cat(ctx))[None])


@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("steps", [None, 4])
def test_rows_sum_to_one_and_padding_is_zero(name, steps):
    attn = _make(name)
    query, memory, mask = _inputs(t=steps)
    context, weights = attn(query, attn.prepare(memory, mask))
    m = mask if steps is None else mask[:, None, :].expand_as(weights)
    assert weights.shape == m.shape
    assert context.shape == (*query.shape[:-1], attn.context_size)
    assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert torch.equal(weights[~m], torch.zeros_like(weights[~m]))
    assert (weights[m] > 0).all()


@pytest.mark.parametrize("name", REAL)
def test_extra_padding_leaves_context_unchanged(name):
    attn = _make(name)
    query, memory, mask = _inputs(t=3)
    context, weights = attn(query, attn.prepare(memory, mask))
    junk = torch.randn(3, 4, HM) * 100
    memory2 = torch.cat([memory, junk], dim=1)
    mask2 = torch.cat([mask, torch.zeros(3, 4, dtype=torch.bool)], dim=1)
    context2, weights2 = attn(query, attn.prepare(memory2, mask2))
    assert_close(context2, context)
    assert_close(weights2[..., :5], weights)
    assert torch.equal(weights2[..., 5:], torch.zeros(3, 3, 4))


@pytest.mark.parametrize("name", REAL)
def test_one_step_equals_all_steps(name):
    attn = _make(name)
    query, memory, mask = _inputs(t=4)
    keys = attn.prepare(memory, mask)
    full = attn.attend(query, keys)
    for t in range(4):
        one = attn.attend(query[:, t], keys)
        assert_close(one.context, full.context[:, t])
        assert_close(one.weights, full.weights[:, t])


@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("normalizer", ["softmax", "sparsemax", "entmax15"])
def test_gradcheck_float64(name, normalizer):
    attn = _make(name, dtype=torch.float64, normalizer=normalizer)
    query, memory, mask = _inputs(b=2, s=4, t=2, dtype=torch.float64)
    query.requires_grad_(True)
    memory.requires_grad_(True)

    def fn(q, m):
        return attn(q, attn.prepare(m, mask))

    assert torch.autograd.gradcheck(fn, (query, memory))


@pytest.mark.parametrize("name", REAL)
def test_identical_sources_give_the_same_context(name):
    attn = _make(name)
    query, _, mask = _inputs(t=3)
    memory = torch.randn(1, 1, HM).expand(3, 5, HM)
    keys = attn.prepare(memory, mask)
    context, _ = attn(query, keys)
    context_other, _ = attn(-3 * query, keys)
    expected = context[0, 0].expand_as(context)
    assert_close(context, expected)
    assert_close(context_other, expected)


@pytest.mark.parametrize("name", REAL)
def test_keys_select_matches_expanded_batch(name):
    attn = _make(name)
    query, memory, mask = _inputs()
    index = torch.tensor([2, 2, 0, 1])
    out = attn(query[index], attn.prepare(memory, mask).select(index))
    ref = attn(query[index], attn.prepare(memory[index], mask[index]))
    assert_close(out, ref)


def test_textbook_example_tanh_makes_the_state_matter():
    """The sentence "I like cats": with tanh, s = -1 and s = +1 attend differently;
    without tanh the state adds the same constant ``vᵀ W s`` to every score, which the
    softmax removes."""
    attn = AdditiveAttention(1, 2, dim=2)
    _set(attn.query_proj, [[2.0], [-1.0]])
    _set(attn.key_proj, [[1.0, 0.0], [0.0, 1.0]])
    _set(attn.v, [[1.0, 1.0]])
    memory = torch.tensor([[[1.0, 0.2], [0.3, 0.8], [-0.5, 1.0]]])  # I, like, cats
    keys = attn.prepare(memory, torch.ones(1, 3, dtype=torch.bool))
    with torch.no_grad():
        tanh_w = [attn(torch.tensor([[s]]), keys)[1] for s in (-1.0, 1.0)]
        linear_w = [
            torch.softmax(attn.v(attn.query_proj(torch.tensor([[s]])) + keys.keys), 1)
            for s in (-1.0, 1.0)
        ]
    assert not torch.allclose(tanh_w[0], tanh_w[1], atol=1e-3)
    assert_close(linear_w[0], linear_w[1])


def test_gradient_of_a_read_wrt_scores():
    """``c = Σ αⱼ hⱼ``, α = softmax(e): ``∂(gᵀc)/∂eⱼ = αⱼ (hⱼ − c)ᵀ g``."""
    torch.manual_seed(3)
    e = torch.randn(1, 5, dtype=torch.float64, requires_grad=True)
    h = torch.randn(1, 5, 3, dtype=torch.float64)
    g = torch.randn(3, dtype=torch.float64)
    mask = torch.ones(1, 5, dtype=torch.bool)

    def loss(scores):
        alpha = masked_softmax(scores, mask)
        return (torch.bmm(alpha.unsqueeze(1), h)[0, 0] * g).sum()

    (autograd,) = torch.autograd.grad(loss(e), e)
    with torch.no_grad():
        alpha = torch.softmax(e, -1)[0]
        c = alpha @ h[0]
        analytic = alpha * ((h[0] - c) @ g)
        eps = 1e-6
        numeric = torch.stack(
            [
                (loss(e + eps * torch.eye(5)[j]) - loss(e - eps * torch.eye(5)[j]))
                / (2 * eps)
                for j in range(5)
            ]
        )
    assert_close(autograd[0], analytic)
    assert_close(numeric, analytic)


def test_no_attention_is_empty():
    attn = build_attention("none", HQ, HM)
    query, memory, mask = _inputs(t=2)
    out = attn.attend(query, attn.prepare(memory, mask))
    assert out.context.shape == (3, 2, 0)
    assert torch.equal(out.weights, torch.zeros(3, 2, 5))


def test_masked_softmax_keeps_float32_for_half_scores():
    scores = torch.randn(2, 3).to(torch.bfloat16)
    weights = masked_softmax(scores, torch.tensor([[True, True, False]] * 2))
    assert weights.dtype == torch.float32
    assert torch.equal(weights[:, 2], torch.zeros(2))


def test_dot_size_mismatch_is_refused():
    with pytest.raises(ValueError, match="queries and keys of one size, not 8 and 6"):
        build_attention("luong_dot", 8, 6)


def test_multihead_heads_must_divide_dim():
    with pytest.raises(ValueError, match="4 heads cannot split 6 features"):
        build_attention("multihead", 6, 6, dim=6, heads=4)


def test_unknown_attention_lists_choices():
    with pytest.raises(ValueError, match="luong_general"):
        build_attention("luong_fancy", 6, 6)


def test_attention_stores_nothing_between_calls():
    attn = _make("bahdanau")
    query, memory, mask = _inputs()
    before = dict(attn.__dict__)
    attn(query, attn.prepare(memory, mask))
    assert attn.__dict__.keys() == before.keys()
    assert isinstance(attn.prepare(memory, mask), Keys)


@pytest.mark.parametrize("name", REAL)
def test_attend_step_reads_shared_keys_as_expanded_ones(name):
    """Beam search keeps one set of keys per source for its g beams."""
    attn = _make(name)
    _, memory, mask = _inputs()
    g = 4
    query = torch.randn(3 * g, HQ, generator=torch.Generator().manual_seed(2))
    keys = attn.prepare(memory, mask)
    shared = attend_step(attn, query, keys)
    expanded = attn.attend(query, keys.select(torch.arange(3).repeat_interleave(g)))
    assert_close(shared.context, expanded.context)
    assert_close(shared.weights, expanded.weights)
    if expanded.head_weights is not None:
        assert_close(shared.head_weights, expanded.head_weights)
    one = attend_step(attn, query[:3], keys)  # g = 1: attend itself
    assert torch.equal(one.weights, attn.attend(query[:3], keys).weights)
    with pytest.raises(ValueError, match="want g queries per source"):
        attend_step(attn, query[:5], keys)
