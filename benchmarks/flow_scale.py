"""The scale of FLOATER's position state at long lengths: max |p(t)| over the first k x L
positions (L the task's longest training sequence, k = 1, 2, 4, 8, 16), at initialisation and
after training, for a task and seeds; each run trained and recorded as ``pebench run`` does it.

    python benchmarks/flow_scale.py --task copy --seeds 0-2
    python benchmarks/flow_scale.py --task wmt_long --seeds 0 --data-dir ../shared/data

Prints one table row per (seed, stage) and writes them as JSON to ``--out``
(``<results>/flow_scale/<task>.json``). The same file run with ``PYTHONPATH`` at an older
checkout measures that checkout's FLOATER (its ``pebench`` is imported instead).
For reference, the token embeddings the biases sit beside have entries of unit variance.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from tabulate import tabulate

from pebench.running import execution
from pebench.running.devices import resolve_device
from pebench.records.paths import USER_RESULTS
from pebench.running.sweep import seeds as parse_seeds

MULTIPLES = (1, 2, 4, 8, 16)


@torch.no_grad()
def max_abs_position(encoding, multiples: tuple[int, ...], length: int) -> dict[str, float]:
    """max |p(t_i)| over positions i < k * length, for each k (inf or nan when not finite)."""
    encoding.eval()
    encoding.prepare(max(multiples) * length, torch.device("cpu"))
    solution = encoding._solution.abs()
    return {f"{k}x": float(solution[: k * length].max()) for k in multiples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="copy")
    parser.add_argument("--encoding", default="flow")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--results", type=Path, default=USER_RESULTS,
                        help=f"results folder: the runs' records and the table go there (default: ./{USER_RESULTS}; the committed ones: --results results)")
    parser.add_argument("--out", type=Path, help="the JSON of the table (default: <results>/flow_scale/<task>.json)")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    torch.set_flush_denormal(True)
    rows = []
    for seed in parse_seeds(args.seeds):
        planned = execution.plan(args.task, args.encoding, seed, args.overrides, args.results, data_dir=args.data_dir)
        setup, data_seconds = execution.prepare(planned)
        length = setup.sequence_lengths["train"]
        rows.append({"seed": seed, "stage": "initialisation", "train length": length, **max_abs_position(setup.model.encoding, MULTIPLES, length)})
        record = execution.execute(planned, setup, resolve_device("cpu"), False, data_seconds)
        if record.status != "ok":
            raise SystemExit(f"{planned.label} failed: {record.error['message']}")
        rows.append({"seed": seed, "stage": "trained", "train length": length, **max_abs_position(setup.model.encoding.cpu(), MULTIPLES, length)})
        print(tabulate(rows[-2:], headers="keys", floatfmt=".3g"), flush=True)
    out = args.out or args.results / "flow_scale" / f"{args.task}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")
    print(tabulate(rows, headers="keys", floatfmt=".3g"))


if __name__ == "__main__":
    main()
