"""Incremental decoding with cached keys and values against full recomputation."""

import pytest
import torch

from pebench.model.batching import BOS, EOS, SEP
from pebench.model.decoding import DecodingConfig, beam_search, continue_prompts, generate, greedy
from pebench.running.evaluation import seeded
from pebench.model.transformer import PAD
from tests.helpers import BUILT_IN_ENCODINGS_WITHOUT_STRUCTURE, DETERMINISTIC, build


def full_recomputation_greedy(model, source, steps):
    """Reference: rerun the whole decoder on the whole prefix at every step (no cache)."""
    tokens = torch.full((source.shape[0], 1), BOS)
    for _ in range(steps):
        next_token = model(tokens, source)[:, -1].argmax(-1)
        tokens = torch.cat((tokens, next_token[:, None]), dim=1)
    return tokens[:, 1:]


@pytest.mark.parametrize("encoding", BUILT_IN_ENCODINGS_WITHOUT_STRUCTURE + ["flow_input"])
def test_cached_decoding_matches_full_recomputation(encoding):
    params = {"placement": "input"} if encoding == "flow_input" else DETERMINISTIC.get(encoding, {})
    model = build("flow" if encoding == "flow_input" else encoding, "encoder_decoder", **params).eval()
    source = torch.randint(4, 20, (3, 9))
    source[2, 6:] = PAD  # a padded source
    with torch.no_grad():
        expected = full_recomputation_greedy(model, source, 12)
        cache, tokens, logits = {}, torch.full((3, 1), BOS), []
        pos = model.encoding.positions(12)
        memory = model.encode(source)
        for step in range(12):
            step_logits = model.decode(tokens[:, -1:], pos[..., step : step + 1], cache, memory)[:, -1]
            logits.append(step_logits)
            tokens = torch.cat((tokens, step_logits.argmax(-1)[:, None]), dim=1)
        full = model(tokens[:, :-1], source)
    assert torch.equal(tokens[:, 1:], expected)
    torch.testing.assert_close(torch.stack(logits, 1), full, atol=1e-4, rtol=1e-4)


def test_decoder_only_incremental_decoding_matches_full_forward():
    model = build("relative").eval()
    tokens = torch.randint(4, 20, (2, 10))
    pos = torch.arange(10)
    with torch.no_grad():
        cache = {}
        first = model.decode(tokens[:, :6], pos[:6], cache)  # a prompt, then one token at a time
        rest = [model.decode(tokens[:, i : i + 1], pos[i : i + 1], cache) for i in range(6, 10)]
        torch.testing.assert_close(torch.cat([first, *rest], 1), model(tokens), atol=1e-5, rtol=1e-5)


def one_prompt_at_a_time(model, prompt, cap):
    """Reference: greedy continuation of one prompt, the whole sequence recomputed each step."""
    tokens, output = torch.tensor([prompt]), []
    while len(output) < cap and (not output or output[-1] != EOS):
        output.append(int(model(tokens)[0, -1].argmax()))
        tokens = torch.cat((tokens, torch.tensor([[output[-1]]])), dim=1)
    return output


@pytest.mark.parametrize("encoding", ["rope", "flow", "alibi", "relative", "learned"])
def test_prompts_of_different_lengths_decode_in_one_batch_as_each_alone(encoding):
    model = build(encoding, max_length=40).eval()
    torch.manual_seed(1)
    sources = [torch.randint(4, 20, (n,)).tolist() for n in (3, 7, 1, 5)]
    rows = [[BOS, *s, SEP] for s in sources]
    width = max(map(len, rows))
    prompts = torch.tensor([row + [PAD] * (width - len(row)) for row in rows])
    lengths = torch.tensor([len(row) for row in rows])
    config = DecodingConfig(max_length_a=1.0, max_length_b=2)  # caps: 4, 8, 2, 6 tokens
    with torch.no_grad():
        model.embedding.weight[EOS] *= 0.5  # EOS less likely: some rows run to their cap, some stop
        batched = continue_prompts(model, prompts, lengths, config)
        alone = [one_prompt_at_a_time(model, row, config.max_output_length(len(row) - 1)) for row in rows]
    assert batched == alone
    assert [len(o) <= config.max_output_length(len(s) + 1) for o, s in zip(batched, sources)] == [True] * 4


def test_greedy_stops_at_eos_and_respects_the_length_cap():
    model = build("sinusoidal", "encoder_decoder").eval()
    with torch.no_grad():
        model.embedding.weight[EOS] *= 0  # make EOS unlikely: outputs run to the cap
        source = torch.randint(4, 20, (2, 5))
        bos = torch.full((2, 1), BOS)
        outputs = greedy(model, bos, torch.ones(2, dtype=torch.long), torch.tensor([3, 7]), model.encode(source))
    assert [len(o) for o in outputs] == [3, 7] and EOS not in outputs[0] + outputs[1]
    assert DecodingConfig(max_length_a=1.5, max_length_b=10).max_output_length(6) == 19


def test_beam_of_one_is_greedy_and_wider_beams_score_at_least_as_well():
    model = build("rope", "encoder_decoder").eval()
    source = torch.randint(4, 20, (4, 7))
    caps = torch.full((4,), 8)
    with torch.no_grad():
        bos = torch.full((4, 1), BOS)
        assert beam_search(model, source, caps, beam_size=1, length_penalty=0.0) == greedy(model, bos, torch.ones(4, dtype=torch.long), caps, model.encode(source))
        outputs = generate(model, source, DecodingConfig(strategy="beam", beam_size=4, length_penalty=0.0, max_length_a=0, max_length_b=8))
    assert len(outputs) == 4 and all(len(o) <= 8 for o in outputs)


def test_randomized_positions_are_drawn_once_per_decoded_example_and_match_full_recomputation():
    model = build("randomized", max_length=40).eval()  # eval_positions "random", as published
    draws, batch_positions = [], model.encoding.batch_positions

    def recording(*args):
        draws.append(batch_positions(*args))
        return draws[-1]

    model.encoding.batch_positions = recording
    prompts, lengths = torch.tensor([[BOS, 5, 6, SEP], [BOS, 7, SEP, PAD]]), torch.tensor([4, 3])
    with torch.no_grad(), seeded("test", torch.device("cpu")):
        outputs = continue_prompts(model, prompts, lengths, DecodingConfig(max_length_a=0, max_length_b=5))
    [draw] = draws  # one draw covers every prompt and output of the batch: a row per example
    for row, n in enumerate(lengths.tolist()):
        reach = n + 5  # its prompt and its output cap
        own = draw[row, :reach]
        assert torch.all(own[1:] > own[:-1]) and own.min() >= 0 and own.max() < model.encoding.max_position
        assert torch.all(draw[row, reach:] == 0)  # padding at position 0
        sequence = torch.tensor([prompts[row, :n].tolist() + outputs[row][:-1]])
        model.encoding.batch_positions = lambda lengths, width, identity, stack: own[None, :width]  # the same draw, recomputed whole
        with torch.no_grad():
            predicted = model(sequence)[0, n - 1 :].argmax(-1).tolist()
        assert predicted == outputs[row]
