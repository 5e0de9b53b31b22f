"""The replay's packed forwards give what one unpadded forward per row gives (up to float reordering)."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from mrtpo.method.replay import replay_hidden, valid_lengths


@pytest.mark.parametrize("shared", [0, 6])
def test_packed_rows_equal_one_forward_per_row(smoke_policy, shared):
    """Rows of different lengths, with (6 tokens) and without a common prompt prefix run once for all rows."""
    path, tok = smoke_policy
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    g = torch.Generator().manual_seed(0)
    V = model.config.vocab_size
    prefix = torch.randint(3, V, (shared,), generator=g).tolist()
    prompts = [prefix + torch.randint(3, V, (n,), generator=g).tolist() for n in (5, 17, 9, 2, 12)]
    completions = [torch.randint(3, V, (n,), generator=g) for n in (7, 1, 11, 4, 9)]
    with torch.no_grad():
        packed = replay_hidden(model, prompts, completions, tok.pad_token_id, batch_size=2)
        assert packed.shape == (5, 11, model.config.hidden_size)
        for p, c, h in zip(prompts, completions, packed):
            ids = torch.tensor([p + c.tolist()])
            alone = model.get_decoder()(input_ids=ids).last_hidden_state[0, len(p) - 1 : len(p) + len(c) - 1]
            assert torch.allclose(h[: len(c)], alone, atol=1e-5, rtol=1e-5)
            assert (h[len(c) :] == 0).all()  # beyond a row's length: nothing


def test_valid_lengths_count_up_to_the_last_valid_position():
    mask = torch.tensor([[1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    assert valid_lengths(mask) == [2, 3, 0, 4]
