"""Incremental decoding with cached keys and values against full recomputation."""

import pytest
import torch

from pebench.batching import BOS, EOS
from pebench.decoding import DecodingConfig, beam_search, generate, greedy
from pebench.model import PAD
from tests.helpers import BUILT_IN_ENCODINGS, build


def full_recomputation_greedy(model, source, steps):
    """Reference: rerun the whole decoder on the whole prefix at every step (no cache)."""
    tokens = torch.full((source.shape[0], 1), BOS)
    for _ in range(steps):
        next_token = model(tokens, source)[:, -1].argmax(-1)
        tokens = torch.cat((tokens, next_token[:, None]), dim=1)
    return tokens[:, 1:]


@pytest.mark.parametrize("encoding", BUILT_IN_ENCODINGS + ["flow_input"])
def test_cached_decoding_matches_full_recomputation(encoding):
    params = {"placement": "input"} if encoding == "flow_input" else {}
    model = build("flow" if encoding == "flow_input" else encoding, "encoder_decoder", **params).eval()
    source = torch.randint(4, 20, (3, 9))
    source[2, 6:] = PAD  # a padded source
    with torch.no_grad():
        expected = full_recomputation_greedy(model, source, 12)
        cache, tokens, logits = {}, torch.full((3, 1), BOS), []
        for step in range(12):
            step_logits = model.decode(tokens[:, -1:], step, cache, model.encode(source))[:, -1]
            logits.append(step_logits)
            tokens = torch.cat((tokens, step_logits.argmax(-1)[:, None]), dim=1)
        full = model(tokens[:, :-1], source)
    assert torch.equal(tokens[:, 1:], expected)
    torch.testing.assert_close(torch.stack(logits, 1), full, atol=1e-4, rtol=1e-4)


def test_decoder_only_incremental_decoding_matches_full_forward():
    model = build("relative").eval()
    tokens = torch.randint(4, 20, (2, 10))
    with torch.no_grad():
        cache = {}
        first = model.decode(tokens[:, :6], 0, cache)  # a prompt, then one token at a time
        rest = [model.decode(tokens[:, i : i + 1], i, cache) for i in range(6, 10)]
        torch.testing.assert_close(torch.cat([first, *rest], 1), model(tokens), atol=1e-5, rtol=1e-5)


def test_greedy_stops_at_eos_and_respects_the_length_cap():
    model = build("sinusoidal", "encoder_decoder").eval()
    with torch.no_grad():
        model.embedding.weight[EOS] *= 0  # make EOS unlikely: outputs run to the cap
        outputs = greedy(model, torch.randint(4, 20, (2, 5)), torch.tensor([3, 7]))
    assert [len(o) for o in outputs] == [3, 7]
    assert DecodingConfig(max_length_a=1.5, max_length_b=10).max_output_length(6) == 19


def test_beam_of_one_is_greedy_and_wider_beams_score_at_least_as_well():
    model = build("rope", "encoder_decoder").eval()
    source = torch.randint(4, 20, (4, 7))
    caps = torch.full((4,), 8)
    with torch.no_grad():
        assert beam_search(model, source, caps, beam_size=1, length_penalty=0.0) == greedy(model, source, caps)
        outputs = generate(model, source, DecodingConfig(strategy="beam", beam_size=4, length_penalty=0.0, max_length_a=0, max_length_b=8))
    assert len(outputs) == 4 and all(len(o) <= 8 for o in outputs)
