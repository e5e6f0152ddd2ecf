import pytest

from pebench.config.cards import encoding_card, task_card
from pebench.config.protocol import resolve
from pebench.core.registry import UnknownNameError


def card(**split):
    task = task_card("copy")
    task["split"].update(split)
    return task


@pytest.mark.parametrize(
    "split, message",
    [
        ({"train": [1, 20]}, r"training lengths 1-20 must lie inside the first \(in-distribution\) bucket 1-16"),
        ({"buckets": [[1, 16], [10, 32]]}, "ascending and disjoint: 1-16 then 10-32"),
        ({"train": [5, 2]}, r"split.train \[5, 2\] is empty"),
        ({"train": [1, 16.5]}, r"split.train bounds must be whole numbers \(hi may be inf\); got \[1, 16.5\]"),
        ({"buckets": []}, "give at least the in-distribution bucket"),
        ({"eval_examples": -1}, "at least 1"),
    ],
)
def test_impossible_splits_say_why(split, message):
    with pytest.raises(ValueError, match=message):
        resolve(card(**split))


def test_unknown_names_list_the_known_ones():
    with pytest.raises(UnknownNameError, match="unknown encoding 'nosuch'; known encodings: .*flow.*rope.*sinusoidal"):
        encoding_card("nosuch")
    with pytest.raises(UnknownNameError, match=r"unknown task 'nosuch'; known tasks: addition, binary_addition, .*, wmt_long \(see `pebench list`\)"):
        task_card("nosuch")


def test_an_empty_bucket_is_refused():
    with pytest.raises(ValueError, match="no evaluation example has a length in bucket"):
        resolve(card(eval_examples=0)).evaluation_sets()


def test_text_metrics_need_an_encoder_decoder_and_a_text_task():
    task = task_card("copy")
    task["metrics"] = {"names": ["bleu"], "primary": "bleu"}
    with pytest.raises(ValueError, match="need a model of architecture encoder-decoder"):
        resolve(task)
    task["model"]["architecture"] = "encoder_decoder"
    with pytest.raises(ValueError, match="task family 'copy' produces no text"):
        resolve(task)
