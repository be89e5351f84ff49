"""Encoder: packing makes a sentence encode the same alone and in a padded batch."""

import torch
from torch.testing import assert_close

from seq2seq.data.tokenizer import PAD_ID
from seq2seq.model.encoder import BRIDGES, BiGRUEncoder, LinearBridge, ZeroBridge


def _encoder(layers=2):
    torch.manual_seed(0)
    enc = BiGRUEncoder(20, emb_dim=5, hidden_size=4, layers=layers, dropout=0.3)
    return enc.eval()


def _batch():
    torch.manual_seed(1)
    lengths = torch.tensor([3, 6, 1])
    src = torch.randint(4, 20, (3, 8))
    src[torch.arange(8)[None] >= lengths[:, None]] = PAD_ID
    return src, lengths


def test_shapes_and_zero_padding():
    src, lengths = _batch()
    memory, final = _encoder()(src, lengths)
    assert memory.shape == (3, 8, 8)
    assert final.shape == (2, 3, 8)
    pad = torch.arange(8)[None] >= lengths[:, None]
    assert torch.equal(memory[pad], torch.zeros_like(memory[pad]))


def test_sentence_alone_equals_sentence_in_padded_batch():
    enc = _encoder()
    src, lengths = _batch()
    memory, final = enc(src, lengths)
    for i, n in enumerate(lengths.tolist()):
        alone_mem, alone_final = enc(src[i : i + 1, :n], lengths[i : i + 1])
        assert_close(alone_mem[0], memory[i, :n])
        assert_close(alone_final[:, 0], final[:, i])


def test_final_states_are_last_forward_and_first_backward_outputs():
    enc = _encoder(layers=1)
    src, lengths = _batch()
    memory, final = enc(src, lengths)
    for i, n in enumerate(lengths.tolist()):
        assert_close(final[0, i, :4], memory[i, n - 1, :4])  # forward reads left→right
        assert_close(final[0, i, 4:], memory[i, 0, 4:])  # backward ends at position 0


def test_bridges():
    final = torch.randn(3, 8)
    bridge = LinearBridge(8, hidden_size=6, layers=2)
    out = bridge(final)
    assert out.shape == (3, 2, 6)
    assert out.abs().max() < 1
    assert torch.equal(ZeroBridge(8, 6, 2)(final), torch.zeros(3, 2, 6))
    assert set(BRIDGES) == {"bridge", "zero"}


def test_lengths_on_cpu_with_unsorted_batch():
    enc = _encoder()
    src, lengths = _batch()
    order = torch.tensor([2, 0, 1])
    memory, _ = enc(src, lengths)
    memory2, _ = enc(src[order], lengths[order])
    assert_close(memory2, memory[order])
