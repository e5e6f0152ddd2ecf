"""``pebench list``: the encoding cards, then the task cards by suite (a module named ``listing``,
as ``list`` would shadow the built-in where it is imported)."""

from __future__ import annotations

import argparse

from tabulate import tabulate

from pebench.config.cards import encoding_cards, suite_of, task_cards
from pebench.tasks.base import LengthBucket

HELP = "list encodings and tasks"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command takes no options."""


def command(args: argparse.Namespace) -> int:
    encodings = [[name, card["plugin"], card["description"], card["reference"]] for name, card in encoding_cards().items()]
    print(tabulate(encodings, headers=["encoding", "plugin", "description", "reference"]))
    cards = sorted(task_cards().items(), key=lambda item: (suite_of(item[0]), item[0]))
    tasks = [
        [
            suite_of(name),
            name,
            card["model"]["architecture"],
            f"{LengthBucket(*card['split']['train']).label} {card['split'].get('unit', '')}",
            card["metrics"]["primary"],
            card["description"],
        ]
        for name, card in cards
    ]
    print()
    print(tabulate(tasks, headers=["suite", "task", "model", "train lengths", "primary", "description"]))
    print("\n(a suite's name selects its tasks: pebench sweep --tasks chomsky)")
    return 0
