"""GRPO's math against small cases computed by hand: group advantages, the clipped ratio
objective, the KL penalty and the token-level average."""

import math

import pytest
import torch

from minimind.training.objectives.grpo import _seed, decoupled_advantages, group_advantages, grpo_loss


def test_advantages_are_relative_to_the_group():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5]])
    adv = group_advantages(rewards)
    std = math.sqrt(1 / 3)  # unbiased std of (1, 0, 0, 1)
    assert torch.allclose(adv[0], torch.tensor([0.5, -0.5, -0.5, 0.5]) / (std + 1e-4))
    assert torch.equal(adv[1], torch.zeros(4))  # all alike: nothing to learn from this prompt
    assert torch.allclose(group_advantages(rewards, scale=False)[0], torch.tensor([0.5, -0.5, -0.5, 0.5]))


def test_decoupled_advantages_normalise_each_reward_in_its_group_then_the_sums_over_the_batch():
    """normalize_then_sum by hand: group 1 has form (1, 0, 0, 1) and title (0, 0, 0, 1), weights 1 and
    0.5; group 2 varies in title alone. Each reward over its group's unbiased std, summed by weight,
    then the 8 sums standardised together."""
    rewards = torch.tensor([[[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [1.0, 1.0]],
                            [[1.0, 1.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]])
    adv = decoupled_advantages(rewards, torch.tensor([1.0, 0.5]))  # group 2's form: std 0, eps keeps it 0
    form = 0.5 / math.sqrt(1 / 3)          # (1, 0, 0, 1): ±0.5 over std sqrt(1/3)
    title = 0.75 / 0.5                     # (0, 0, 0, 1): mean 0.25, std 0.5; the odd one is 1.5 std out
    sums = [form - 0.5 * title / 3, -form - 0.5 * title / 3, -form - 0.5 * title / 3, form + 0.5 * title,
            0.5 * title, -0.5 * title / 3, -0.5 * title / 3, -0.5 * title / 3]
    std = math.sqrt(sum(x * x for x in sums) / 7)  # the sums have mean 0: each group's are centred
    assert adv.tolist() == pytest.approx([x / std for x in sums], rel=1e-3)
    assert adv.mean().item() == pytest.approx(0, abs=1e-6) and adv.std().item() == pytest.approx(1, rel=1e-3)


def test_answers_that_meet_more_rewards_keep_a_larger_advantage_when_rewards_are_normalised_apart():
    """GDPO's case: in one group an answer meets one of two rewards, in another an answer meets both,
    against answers that meet none. Summed first, both groups standardise to the same advantages, so
    meeting the second reward teaches nothing; normalised apart, it doubles the answer's advantage."""
    one = torch.tensor([[[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]])
    both = torch.tensor([[[1.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]])
    summed = group_advantages(torch.cat([one, both]).mean(-1))
    assert torch.allclose(summed[0], summed[1], atol=1e-3)  # equal but for eps
    apart = decoupled_advantages(torch.cat([one, both]), torch.tensor([1.0, 1.0])).view(2, 4)
    assert apart[1, 0].item() == pytest.approx(2 * apart[0, 0].item(), rel=1e-3)
    # a reward alike across the group adds nothing: the other reward alone decides
    heavy = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    alike = decoupled_advantages(torch.stack([heavy, torch.ones(8)], -1)[None], torch.tensor([1.0, 5.0]))
    assert torch.allclose(alike, decoupled_advantages(heavy[None, :, None], torch.tensor([1.0])), atol=1e-5)


def test_first_pass_is_the_policy_gradient_averaged_per_answer():
    """Ratio 1 (old = current): each answer's loss is -A averaged over its tokens, then the answers
    are averaged; the gradient pushes each token by A / (its answer's tokens x answers)."""
    logps = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    adv = torch.tensor([2.0, -1.0])
    loss, metrics = grpo_loss(logps, logps.detach(), adv, mask, clip=0.2)
    assert loss.item() == pytest.approx((-2 + 1) / 2)
    loss.backward()
    assert torch.allclose(logps.grad, torch.tensor([[-0.5, -0.5, 0.0], [0.5, 0.0, 0.0]]))
    assert metrics["clip_fraction"].item() == 0 and "kl" not in metrics


def test_a_batch_split_in_two_gives_the_same_gradient():
    """What gradient accumulation and DDP rely on: the mean of two halves' losses is the whole's."""
    torch.manual_seed(0)
    logps = torch.randn(4, 5, requires_grad=True)
    old = logps.detach() + 0.1 * torch.randn(4, 5)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    adv = torch.tensor([1.0, -0.5, 0.3, -2.0])
    whole, _ = grpo_loss(logps, old, adv, mask, clip=0.2)
    halves = [grpo_loss(logps[i:i + 2], old[i:i + 2], adv[i:i + 2], mask[i:i + 2], clip=0.2)[0] for i in (0, 2)]
    assert torch.allclose(whole, sum(halves) / 2)


def test_ratio_is_clipped_only_where_it_would_gain():
    """ratio e^0.5 ≈ 1.65 with A > 0 is held at 1.2 (no gradient); with A < 0 the unclipped,
    worse term is kept (PPO's pessimistic bound)."""
    logps = torch.tensor([[0.0], [0.0]], requires_grad=True)
    old = torch.tensor([[-0.5], [-0.5]])
    adv = torch.tensor([1.0, -1.0])
    loss, metrics = grpo_loss(logps, old, adv, torch.ones(2, 1), clip=0.2)
    r = math.exp(0.5)
    assert loss.item() == pytest.approx((-1.2 * 1 + r * 1) / 2)
    loss.backward()
    assert logps.grad[0].item() == 0.0  # clipped: no push further up
    assert logps.grad[1].item() == pytest.approx(r / 2)  # d(r·1)/dlogp / 2 tokens
    assert metrics["clip_fraction"].item() == pytest.approx(0.5)


def test_kl_penalty_is_the_k3_estimator():
    logps = torch.tensor([[-1.0, -1.0]], requires_grad=True)
    ref = torch.tensor([[-1.0, -2.0]])
    loss, metrics = grpo_loss(logps, logps.detach(), torch.tensor([0.0]), torch.ones(1, 2), clip=0.2, beta=0.1,
                              ref_logps=ref)
    kl_second = math.exp(-1) - (-1) - 1  # exp(q - p) - (q - p) - 1 with q - p = -1
    assert metrics["kl"].item() == pytest.approx(kl_second / 2)
    assert loss.item() == pytest.approx(0.1 * kl_second / 2)  # A = 0: only the penalty
    loss.backward()
    # d/dp of exp(q-p) - (q-p) - 1 = 1 - exp(q-p): 0 where equal, 1 - e^-1 where the policy is likelier
    assert torch.allclose(logps.grad, torch.tensor([[0.0, 0.1 * (1 - math.exp(-1)) / 2]]))


def test_beta_zero_still_reports_kl_without_a_penalty():
    logps = torch.tensor([[-1.0]], requires_grad=True)
    loss, metrics = grpo_loss(logps, logps.detach(), torch.tensor([1.0]), torch.ones(1, 1), clip=0.2, beta=0.0,
                              ref_logps=torch.tensor([[-2.0]]))
    assert loss.item() == pytest.approx(-1.0) and metrics["kl"].item() > 0


def test_seeds_differ_by_place_and_repeat_by_place():
    a = {_seed(42, s, i, j) for s in range(-1, 3) for i in range(16) for j in range(8)}
    assert len(a) == 4 * 16 * 8
    assert _seed(42, 5, 2, 3) == _seed(42, 5, 2, 3) != _seed(43, 5, 2, 3)
