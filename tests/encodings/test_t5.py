import math

import torch

from pebench.encodings.base import Site
from pebench.encodings.t5 import T5Bias, t5_buckets
from pebench.model.transformer import ModelConfig


def reference_bucket(offset: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """An independent scalar transcription of T5's _relative_position_bucket, with
    offset = query - key (T5's n = -(memory_position - query_position))."""
    result, n = 0, offset
    if bidirectional:
        num_buckets //= 2
        if n < 0:
            result += num_buckets
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return result + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return result + min(large, num_buckets - 1)


def test_bucket_tables_for_offsets_minus_200_to_200():
    offsets = torch.arange(-200, 201)
    for bidirectional in (True, False):
        got = t5_buckets(offsets, bidirectional, 32, 128).tolist()
        assert got == [reference_bucket(o, bidirectional, 32, 128) for o in range(-200, 201)]


def test_known_buckets_by_hand():
    def bucket(offset, bidirectional):
        return t5_buckets(torch.tensor([offset]), bidirectional, 32, 128).item()
    # Bidirectional: 16 buckets a side, 8 exact. 8 + floor(ln(12/8)/ln(16) * 8) = 8 + 1 = 9.
    assert [bucket(o, True) for o in (0, 1, 7, 8, 12, 127, 128, 500)] == [0, 1, 7, 8, 9, 15, 15, 15]
    assert [bucket(o, True) for o in (-1, -8, -200)] == [17, 24, 31]  # keys after the query
    # Causal: 32 buckets, 16 exact; 16 + floor(ln(127/16)/ln(8) * 16) = 16 + 15 = 31.
    assert [bucket(o, False) for o in (-5, 0, 15, 16, 127, 1000)] == [0, 0, 15, 16, 31, 31]


def test_one_table_per_stack_shared_by_its_layers():
    t5 = T5Bias(ModelConfig(d_model=8, n_heads=2, n_layers=3).geometry(16))
    with torch.no_grad():
        t5.tables["decoder"].copy_(torch.randn(32, 2))
    pos = torch.arange(5)
    first, last = t5.bias(pos, pos, Site("decoder", 0, "self")), t5.bias(pos, pos, Site("decoder", 2, "self"))
    torch.testing.assert_close(first, last)
    assert first.shape == (2, 5, 5) and first[1, 3, 1].item() == t5.tables["decoder"][2, 1].item()  # offset 2 -> bucket 2


def test_bias_and_table_gradient_match_a_loop_over_query_key_pairs():
    t5 = T5Bias(ModelConfig(architecture="encoder_decoder", d_model=8, n_heads=2, n_layers=1).geometry(16))
    with torch.no_grad():
        t5.tables["encoder"].copy_(torch.randn(32, 2))
    q_pos, k_pos = torch.arange(3, 9), torch.arange(11)
    bias = t5.bias(q_pos, k_pos, Site("encoder", 0, "self"))
    upstream = torch.randn(2, 6, 11)
    bias.backward(upstream)
    table, expected_grad = t5.tables["encoder"].detach(), torch.zeros(32, 2)
    for head in range(2):
        for row, i in enumerate(q_pos.tolist()):
            for column, j in enumerate(k_pos.tolist()):
                bucket = reference_bucket(i - j, True, 32, 128)
                assert bias[head, row, column].item() == table[bucket, head].item()
                expected_grad[bucket, head] += upstream[head, row, column]
    torch.testing.assert_close(t5.tables["encoder"].grad, expected_grad)
