"""Run records made by hand, with the scores a test needs (:func:`record`), as the report reads
them (:func:`typed`), and the frames of Kazemnejad et al.'s five encodings
(:func:`kazemnejad_records`)."""

from pebench.analysis.frames import frames
from pebench.records.types import RunRecord

BUCKETS = [[1, 4], [5, 8]]


def record(task, encoding, seed, ood, learned=True, settings=None, target=0.9, ood_metric=None):
    """A protocol 2 record with ID score 1.0 (or 0.5 when not learned) and OOD score ``ood``; its
    task card has ``settings``' task values, as a run's resolved card has its overrides."""
    ood_metric = ood if ood_metric is None else ood_metric
    id_score = 1.0 if learned else 0.5
    card = {"name": task, "metrics": {"names": ["sequence_accuracy", "exact_match"], "primary": "sequence_accuracy"},
            "split": {"train": [1, 4], "buckets": BUCKETS, "unit": "symbols"}}
    for key, value in (settings or {}).items():
        section, _, name = key.partition(".")
        if section != "encoding":
            card.setdefault(section, {})[name] = value
    return {
        "schema": 2, "protocol": 2, "status": "ok", "seed": seed, "settings": settings or {}, "overrides": [],
        "task": card,
        "encoding": {"name": encoding, "plugin": encoding, "params": {}},
        "training": {"target": target, "steps_to_target": (100 * (seed + 1) if learned else None) if target else None,
                     "steps": 100, "wall_seconds": 1.0, "final_loss": 0.1, "curve": []},
        "model": {"architecture": "decoder"}, "parameters": {"encoding": 0, "total": 10},
        "environment": {"threads": 1, "device": "cpu"},
        "buckets": [
            {"bucket": "1-4", "lo": 1, "hi": 4, "in_distribution": True, "n": 4,
             "metrics": {"sequence_accuracy": id_score, "exact_match": id_score},
             "lengths": [{"length": n, "n": 1, "metrics": {"sequence_accuracy": id_score, "exact_match": id_score}} for n in range(1, 5)]},
            {"bucket": "5-8", "lo": 5, "hi": 8, "in_distribution": False, "n": 4,
             "metrics": {"sequence_accuracy": ood, "exact_match": ood_metric},
             "lengths": [{"length": n, "n": 1, "metrics": {"sequence_accuracy": ood, "exact_match": ood_metric}} for n in range(5, 9)]},
        ],
        "scores": {"ID": {"sequence_accuracy": id_score, "exact_match": id_score}, "OOD": {"sequence_accuracy": ood, "exact_match": ood_metric}, "unscored": []},
    }


def typed(records):
    """The records of JSON data as the report reads them."""
    return [RunRecord.from_json(r) for r in records]


def kazemnejad_records(per_seed_values, tasks=("copy", "reverse", "sort", "addition")):
    """The five encodings on ``tasks`` (the four synthetic ones): {encoding: [OOD exact match per seed]}, the same on every task."""
    return frames(typed([record(task, encoding, seed, 0.5, ood_metric=values[seed]) for task in tasks
                   for encoding, values in per_seed_values.items() for seed in range(len(values))]))
