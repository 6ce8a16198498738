"""The three attention kernels (sdpa, eager, blocked) compute the same function."""

import pytest
import torch

from minimind.attention import ATTENTION_FUNCTIONS

IMPLS = list(ATTENTION_FUNCTIONS)


def _qkv(b=2, hq=4, hkv=2, t=37, s=37, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, hq, t, d, generator=g)
    k = torch.randn(b, hkv, s, d, generator=g)
    v = torch.randn(b, hkv, s, d, generator=g)
    return q, k, v


def _left_padding(b, s, pads):
    valid = torch.ones(b, s, dtype=torch.bool)
    for row, pad in enumerate(pads):
        valid[row, :pad] = False
    return valid


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", ["plain", "padding", "kv_cache", "kv_cache_padding", "single_token"])
def test_kernels_agree_with_eager(impl, case):
    t, s = {"plain": (37, 37), "padding": (37, 37), "kv_cache": (9, 40),
            "kv_cache_padding": (9, 40), "single_token": (1, 40)}[case]
    q, k, v = _qkv(t=t, s=s)
    valid = _left_padding(2, s, [0, 5]) if "padding" in case else None
    ref = ATTENTION_FUNCTIONS["eager"](q, k, v, key_valid=valid)
    out = ATTENTION_FUNCTIONS[impl](q, k, v, key_valid=valid, block_size=8)
    assert out.shape == q.shape
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)


def test_causality_future_keys_do_not_matter():
    q, k, v = _qkv(t=20, s=20)
    out = ATTENTION_FUNCTIONS["blocked"](q, k, v, block_size=6)
    k2, v2 = k.clone(), v.clone()
    k2[:, :, 10:] += 5.0
    v2[:, :, 10:] -= 3.0
    out2 = ATTENTION_FUNCTIONS["blocked"](q, k2, v2, block_size=6)
    torch.testing.assert_close(out[:, :, :10], out2[:, :, :10])


def test_padding_keys_are_ignored():
    q, k, v = _qkv(b=1, t=12, s=12)
    valid = _left_padding(1, 12, [4])
    base = ATTENTION_FUNCTIONS["blocked"](q, k, v, key_valid=valid, block_size=5)
    k2 = k.clone()
    k2[:, :, :4] = 100.0
    changed = ATTENTION_FUNCTIONS["blocked"](q, k2, v, key_valid=valid, block_size=5)
    torch.testing.assert_close(base[:, :, 4:], changed[:, :, 4:])


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("t,s", [(33, 33), (7, 30)])
def test_blocked_backward_matches_eager(padded, t, s):
    q, k, v = _qkv(t=t, s=s)
    valid = _left_padding(2, s, [0, 6]) if padded else None
    grads = []
    for impl in ("eager", "blocked"):
        qq, kk, vv = (x.clone().requires_grad_() for x in (q, k, v))
        ATTENTION_FUNCTIONS[impl](qq, kk, vv, key_valid=valid, block_size=8).square().sum().backward()
        grads.append([x.grad for x in (qq, kk, vv)])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_bf16_kernels_stay_close():
    q, k, v = (x.bfloat16() for x in _qkv(t=64, s=64))
    ref = ATTENTION_FUNCTIONS["eager"](q.float(), k.float(), v.float())
    for impl in IMPLS:
        out = ATTENTION_FUNCTIONS[impl](q, k, v, block_size=16).float()
        assert (out - ref).abs().max() < 0.05, impl
