"""OPSD's per-token divergence against direct definitions."""

import pytest
import torch

from mrtpo.method.distillation import distillation_loss, token_divergence


def kl(p_logits, q_logits):
    p, q = p_logits.softmax(-1), q_logits.softmax(-1)
    return (p * (p.log() - q.log())).sum(-1)


@pytest.fixture
def logits():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 5, 30, generator=g), torch.randn(2, 5, 30, generator=g) * 2, torch.tensor([[1.0] * 5, [1, 1, 1, 0, 0]])


def test_forward_topk_is_kl_teacher_student_on_the_teachers_top_k(logits):
    student, teacher, mask = logits
    full = token_divergence(student, teacher, mask, "forward_topk", top_k=30)
    torch.testing.assert_close(full, kl(teacher, student) * mask)
    k = 4
    idx = teacher.topk(k, -1).indices
    torch.testing.assert_close(token_divergence(student, teacher, mask, "forward_topk", top_k=k),
                               kl(teacher.gather(-1, idx), student.gather(-1, idx)) * mask)


def test_reverse_is_full_kl_student_teacher(logits):
    student, teacher, mask = logits
    torch.testing.assert_close(token_divergence(student, teacher, mask, "reverse"), kl(student, teacher) * mask)


def test_pointwise_clip_caps_every_vocabulary_term(logits):
    student, teacher, mask = logits
    clipped = token_divergence(student, teacher, mask, "reverse", clip=0.01)
    assert (clipped <= 0.01 * 30 + 1e-6).all() and (clipped <= token_divergence(student, teacher, mask, "reverse") + 1e-6).all()


def test_zero_when_teacher_equals_student_and_gradient_reaches_the_student_only(logits):
    student, teacher, mask = logits
    assert distillation_loss(student, student.clone(), mask).abs() < 1e-6
    s, t = student.clone().requires_grad_(), teacher.clone().requires_grad_()
    distillation_loss(s, t, mask).backward()
    assert s.grad.abs().sum() > 0 and t.grad is None
    assert s.grad[1, 3:].abs().sum() == 0  # padding contributes nothing
    with pytest.raises(ValueError, match="forward_topk, reverse"):
        token_divergence(student, teacher, mask, "jsd")
