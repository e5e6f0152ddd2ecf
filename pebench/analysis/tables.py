"""Leaderboards as text: the numbers of :mod:`pebench.analysis.leaderboards` rendered as Markdown, LaTeX,
HTML and terminal tables (tabulate), each titled with what it shows."""

from __future__ import annotations

import pandas as pd
from tabulate import tabulate

from pebench.analysis.frames import Frames
from pebench.analysis.leaderboards import BENCH_LENGTH, RankingGroup, run_times
from pebench.core.metrics import METRICS

FORMATS = {"md": "github", "html": "unsafehtml"}  # LaTeX: latex_table, one table per file
LATEX_COLUMNS = ("rank", "encoding", "learned ID", "ID", "OOD", "runs")  # the compact set, with the first ℓ*/L column
LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
LATEX_SYMBOLS = {"ℓ*": r"$\ell^*$", "±": r"$\pm$", "≥": r"$\geq$", "—": "---", "▶ ": ""}


def _mean_ci(mean: float, half_width: float, digits: int) -> str:
    if pd.isna(mean):
        return "—"
    return f"{mean:.{digits}f}" if pd.isna(half_width) else f"{mean:.{digits}f} ± {half_width:.{digits}f}"


def _number(value, pattern: str) -> str:
    return "—" if pd.isna(value) else format(value, pattern)


def display(board: pd.DataFrame, digits: int = 3, highlight: frozenset[str] = frozenset()) -> pd.DataFrame:
    """The leaderboard as strings, for printing: scores as ``mean ± 95% half-width``; the
    encodings of ``highlight`` marked ``▶``."""
    encodings = board["encoding"].map(lambda e: f"▶ {e}" if e in highlight else e)
    shown = pd.DataFrame({"rank": board["rank"].map(lambda v: _number(v, "g")), "encoding": encodings})
    has_target = board["target"].notna().any()
    if has_target:
        shown["learned ID"] = [
            f"{learned}/{runs}" + ("" if rank else " (not ranked)") for learned, runs, rank in zip(board["learned"], board["runs"], board["ranked"])
        ]
        shown["steps"] = board["steps"].map(lambda v: _number(v, ",.0f"))
    for column in board.columns:
        if column.endswith(" mean"):
            name = column[: -len(" mean")]
            shown[name] = [_mean_ci(m, c, digits) for m, c in zip(board[column], board[f"{name} ci"])]
    shown["OOD/ID"] = board["OOD/ID"].map(lambda v: _number(v, ".3f"))
    if "OOD best of seeds" in board:
        shown["OOD best of seeds (Delétang/Ruoss statistic, not ranked)"] = board["OOD best of seeds"].map(lambda v: _number(v, f".{digits}f"))
    if "train tok/s" in board:
        shown["train tok/s"] = board["train tok/s"].map(lambda v: _number(v, ",.0f"))
        shown["train step vs NoPE"] = board["train step vs NoPE"].map(lambda v: _number(v, ".2f"))
        shown["eval step vs NoPE"] = board["eval step vs NoPE"].map(lambda v: _number(v, ".2f"))
    shown["PE params"] = board["PE params"].map(lambda v: f"{v:,}")
    shown["runs"] = board["runs"]
    return shown


def _table(shown: pd.DataFrame, table_format: str) -> str:
    return tabulate(shown, headers="keys", tablefmt=table_format, showindex=False, disable_numparse=True)


def _title(name: str, table: Frames, runs: pd.DataFrame, metric: str) -> str:
    """What the table shows: metric, protocol, ID bucket, bucket sizes, the interval, the rule."""
    first = runs.run.iloc[0]
    buckets = table.scores[(table.scores.run == first) & (table.scores.order >= 2)].drop_duplicates("where")
    protocol = runs["protocol"].iloc[0]
    sizes = ", ".join(buckets["where"])
    target = runs["target"].iloc[0]
    if protocol == 1:
        rule = "protocol 1: fixed budget, teacher-forced scores, OOD = mean of the OOD buckets; not ranked"
    elif pd.isna(target):
        rule = "no ID target: every run counts"
    else:
        rule = f"ID target {target:g} on the ID validation set; OOD over the runs that learned ID"
    return f"{name}: {metric} (ID = {buckets['where'].iloc[0]}; buckets {sizes}), mean ± 95% interval over runs; {rule}"


def render(name: str, table: Frames, runs: pd.DataFrame, boards: dict[str, pd.DataFrame], table_format: str, highlight: frozenset[str] = frozenset()) -> str:
    """A table's titled leaderboards (:func:`boards_of`) in a tabulate format ("github",
    "simple", "unsafehtml"): the primary metric with throughput, then each other metric; the
    encodings of ``highlight`` marked."""
    architecture = runs["architecture"].iloc[0]
    with_speed = "train tok/s" in next(iter(boards.values()))
    speed = f"throughput: pebench bench, {architecture} at {BENCH_LENGTH} tokens" if with_speed else "throughput: no benchmark table (run `pebench bench`)"
    parts = []
    for index, (metric, board) in enumerate(boards.items()):
        shown = display(board, METRICS[metric].digits, highlight)
        if index:
            shown = shown.drop(columns=[c for c in ("rank", "learned ID", "steps") if c in shown])
        parts.append(f"{_title(name, table, runs, metric)}{'; ' + speed if index == 0 else ''}\n\n{_table(shown, table_format)}\n")
    parts.append(provenance(runs) + "\n")
    capped = table.capped.merge(runs[["run", "encoding", "seed"]], on="run")
    if not capped.empty:
        counts = "; ".join(f"{row.encoding} seed {row.seed}, bucket {row.bucket}: {row.capped}" for row in capped.itertuples())
        parts.append(f"outputs that stopped at the decoding cap without EOS (counted as generated): {counts}\n")
    return "\n".join(parts)


def provenance(runs: pd.DataFrame) -> str:
    """Where a table's records come from: the pebench commits that made them (runs each, most
    first) and the plugin code of each encoding (:func:`pebench.analysis.frames.plugin_code`)."""
    commits = runs["git_commit"].fillna("unknown").str[:7].value_counts()
    commits = commits.sort_index().sort_values(ascending=False, kind="stable")
    plugins = runs.groupby("plugin")["encoding"].unique()
    return (
        f"records: {len(runs)} runs from {len(commits)} pebench commit{'s' * (len(commits) != 1)} ("
        + ", ".join(f"{commit}: {n}" for commit, n in commits.items())
        + "); plugin code: "
        + "; ".join(f"{code} ({', '.join(sorted(encodings))})" for code, encodings in plugins.items())
    )


def _latex(text: str) -> str:
    """``text`` for LaTeX: its special characters escaped, the symbols the tables use as math."""
    escaped = "".join(LATEX_SPECIAL.get(character, character) for character in str(text))
    for symbol, command in LATEX_SYMBOLS.items():
        escaped = escaped.replace(symbol, command)
    return escaped


def latex_table(shown: pd.DataFrame, caption: str, label: str, highlight: frozenset[str] = frozenset()) -> str:
    """One LaTeX ``table`` (booktabs rules, ``\\caption``, ``\\label``) of ``shown``'s strings:
    text columns left-aligned, the others right-aligned; the rows of ``highlight``'s encodings in
    bold. Needs ``\\usepackage{booktabs}``."""
    cells = shown.map(_latex)
    if "encoding" in shown:
        bold = shown["encoding"].str.removeprefix("▶ ").isin(highlight)
        cells.loc[bold, "encoding"] = cells.loc[bold, "encoding"].map(lambda e: rf"\textbf{{{e}}}")
    cells.columns = [_latex(column) for column in shown.columns]
    aligned = "".join("l" if column in ("encoding", "learned ID", "task", "tasks ranked") else "r" for column in shown.columns)
    styler = cells.style.hide(axis="index")
    return styler.to_latex(caption=_latex(caption), label=label, hrules=True, column_format=aligned, position="t", position_float="centering")


def render_latex(name: str, table: Frames, runs: pd.DataFrame, boards: dict[str, pd.DataFrame], highlight: frozenset[str] = frozenset()) -> str:
    """The primary metric's leaderboard as one LaTeX table (:func:`latex_table`), the compact
    columns (:data:`LATEX_COLUMNS` and the first ℓ*/L), its title as the caption; the other
    metrics and the throughput are in the Markdown, HTML and CSV files."""
    metric, board = next(iter(boards.items()))
    shown = display(board, METRICS[metric].digits, highlight)
    reach = [column for column in shown if column.startswith("ℓ*/L")][:1]
    columns = [column for column in shown if column in LATEX_COLUMNS or column in reach]
    return latex_table(shown[columns], _title(name, table, runs, metric), f"tab:pebench-{_label(name)}", highlight)


def _label(name: str) -> str:
    return "".join(character if character.isalnum() else "-" for character in name)


def display_overall(table: pd.DataFrame) -> pd.DataFrame:
    shown = pd.DataFrame(
        {
            "encoding": table["encoding"],
            "MRR": table["MRR"].map(lambda v: f"{v:.3f}"),
            "95% interval": [f"{lo:.3f}-{hi:.3f}" for lo, hi in zip(table["MRR low"], table["MRR high"])],
            "tasks ranked": [f"{r}/{n}" for r, n in zip(table["tasks ranked"], table["tasks run"])],
        }
    )
    for task in table.columns[6:]:
        shown[task] = table[task].map(lambda v: "" if v is None else "—" if pd.isna(v) else format(v, "g"))
    return shown


OVERALL_TITLE = (
    "Overall: mean reciprocal rank over tasks (Kazemnejad et al. 2023) of the OOD score of each task's primary metric, "
    "95% paired bootstrap interval over seeds; per task, the rank (— : not ranked, most runs did not learn ID). "
    "One table per block: encodings that all ran the same tasks at the same seeds, ranked among themselves on those runs; "
    "an MRR compares only within its table"
)


def _block_title(block: RankingGroup) -> str:
    encodings, tasks = len(block.ranking), block.tasks
    listed = f" ({', '.join(tasks)})" if len(tasks) <= 6 else ""
    return f"{encodings} encodings x {len(tasks)} task{'s' * (len(tasks) != 1)}{listed}, the same {len(block.cells)} runs each (task, seed)"


def render_overall(blocks: list[RankingGroup], encodings: list[str], table_format: str) -> str:
    """The overall title, each block's size and table, and the encodings in no block."""
    if not blocks:
        return OVERALL_TITLE + "\n\nNo two encodings have runs at a common task and seed yet.\n"
    parts = [f"{_block_title(b)}:\n\n{_table(display_overall(b.ranking), table_format)}\n" for b in blocks]
    alone = sorted(set(encodings) - {e for b in blocks for e in b.ranking.encoding})
    if alone:
        parts.append(f"In no table (no other encoding ran any of their tasks at the same seed): {', '.join(alone)}\n")
    return OVERALL_TITLE + "\n\n" + "\n".join(parts)


def render_overall_latex(blocks: list[RankingGroup], highlight: frozenset[str] = frozenset()) -> str:
    """The overall ranking's first (largest) block as one LaTeX table (:func:`latex_table`);
    every block is in ``overall.md``."""
    block = blocks[0]
    return latex_table(display_overall(block.ranking), f"{OVERALL_TITLE}. {_block_title(block)}", "tab:pebench-overall", highlight)


def overall_csv(blocks: list[RankingGroup]) -> pd.DataFrame:
    """The blocks as one table: ``block`` (1 = the first), ``runs each``, ``tasks`` (the block's,
    ``;``-separated), the ranking's columns, then one column per task (sorted): the rank, ``not
    ranked``, or empty where the task is not in the block."""
    tasks = sorted({task for b in blocks for task in b.tasks})
    rows = []
    for number, block in enumerate(blocks, start=1):
        for _, row in block.ranking.iterrows():
            ranks = {t: ("" if t not in block.tasks else "not ranked" if pd.isna(row[t]) else format(row[t], "g")) for t in tasks}
            rows.append(
                {
                    "block": number,
                    "runs each": len(block.cells),
                    "tasks": ";".join(block.tasks),
                    **row[["encoding", "MRR", "MRR low", "MRR high", "tasks ranked", "tasks run"]].to_dict(),
                    **ranks,
                }
            )
    return pd.DataFrame(rows, columns=["block", "runs each", "tasks", "encoding", "MRR", "MRR low", "MRR high", "tasks ranked", "tasks run", *tasks])


CHOMSKY_TITLE = (
    "The Chomsky hierarchy (Delétang et al. 2023), laid out as Ruoss et al. 2023's table 1: per task and encoding, "
    "the OOD score of the primary metric (mean over the runs that learned ID; the best of each task in bold); "
    "— (x): not ranked, most runs did not learn ID, x their ID score"
)


def render_suite(scores: pd.DataFrame, title: str) -> str:
    """:func:`suite_scores` as a Markdown matrix: a row per task, a column per encoding."""
    best = scores.groupby("task")["rank"].transform("min")

    def cell(row) -> str:
        if pd.isna(row["rank"]):
            return f"— ({row.ID:.2f})"
        return f"**{row.OOD:.3f}**" if row["rank"] == best[row.name] else f"{row.OOD:.3f}"

    shown = scores.assign(cell=scores.apply(cell, axis=1)).pivot(index=["level", "task"], columns="encoding", values="cell")
    order = list(dict.fromkeys(zip(scores.level, scores.task)))
    return title + "\n\n" + _table(shown.reindex(order).fillna("").reset_index(), "github") + "\n"


RUN_TIME_TITLE = (
    "Wall time of the protocol 2 runs at the cards' settings, per task: data, training and evaluation, "
    "summed from each record's stages, at the threads and on the device each record names (the load beside a run "
    "is not recorded)"
)


def render_run_times(table: Frames) -> str:
    """:func:`run_times` in Markdown; the ``untimed`` column only when a run has no stages."""
    times = run_times(table).round({"hours": 2, "minutes per run": 1, "fastest": 1, "slowest": 1, "train s / 1k steps": 0})
    if times.empty:
        return RUN_TIME_TITLE + "\n\nNo protocol 2 run at the cards' settings yet.\n"
    if not times.untimed.any():
        times = times.drop(columns="untimed")
    return RUN_TIME_TITLE + "\n\n" + tabulate(times, headers="keys", tablefmt="github", showindex=False, floatfmt="g") + "\n"
