"""`termagent tasks check PATH...`: run the oracle and nop agents on each task.

A task is ok when the oracle earns reward 1.0 (its solution passes the tests) and nop earns 0.0
(the tests fail on the untouched environment). Attached to the `tasks` group by termagent.tasks.cli.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from termagent import atomic
from termagent.sandbox.runner import TrialResult

VERIFIER_TAIL_CHARS = 3000  # of a failing trial's verifier output, kept in the check JSON


def check_entry(task, oracle: TrialResult, nop: TrialResult) -> dict:
    def agent_view(r: TrialResult) -> dict:
        return {"reward": r.reward, "rewards": r.rewards, "error": r.error, "passed": r.passed, "total": r.total}

    ok = oracle.reward == 1.0 and nop.reward == 0.0
    entry = {"task_id": task.id, "layout": task.layout, "oracle": agent_view(oracle), "nop": agent_view(nop),
             "ok": ok, "image": oracle.image, "timings": {"oracle": oracle.timings, "nop": nop.timings}}
    if not ok:  # diagnosable without a rerun: the end of what each failing verifier printed
        for name, r, want in (("oracle", oracle, 1.0), ("nop", nop, 0.0)):
            if r.reward != want:
                entry[name]["verifier_tail"] = (r.verifier_output or "")[-VERIFIER_TAIL_CHARS:]
    return entry


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the per-task results here (a JSON list).")
@click.option("--concurrency", "-j", type=click.IntRange(min=1), default=None,
              help="Containers at once (default: sandbox.concurrency of params.yaml).")
@click.option("--params", "params_file", default="params.yaml", show_default=True,
              help="Where the sandbox: section is read from (defaults apply when absent).")
def check(paths: tuple[Path, ...], json_out: Path | None, concurrency: int | None, params_file: str) -> None:
    """Run the oracle and nop agents on task directories (or directories of them); exit 0 only if every
    task is ok (oracle reward 1.0, nop reward 0.0)."""
    from rich.console import Console
    from rich.table import Table

    from termagent.sandbox.agents import NopAgent, OracleAgent
    from termagent.sandbox.errors import SandboxError
    from termagent.sandbox.image import ensure_base_image
    from termagent.sandbox.runner import Sandbox, run_trials
    from termagent.sandbox.settings import load_sandbox_params
    from termagent.tasks.load import discover_tasks
    from termagent.tasks.model import TaskError

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        tasks = discover_tasks(list(paths))
    except TaskError as e:
        raise click.ClickException(str(e)) from e
    params = load_sandbox_params(params_file)
    try:
        base = ensure_base_image(params.base_recipe())
    except SandboxError as e:
        raise click.ClickException(str(e)) from e
    sandbox = Sandbox(params.sandbox_config(base.tag))
    oracle, nop = OracleAgent(), NopAgent()
    specs = [(task, agent, 0) for task in tasks for agent in (oracle, nop)]
    results = run_trials(sandbox, specs, concurrency=concurrency, progress=sys.stderr.isatty(),
                         description="oracle + nop")
    entries = [check_entry(task, results[2 * i], results[2 * i + 1]) for i, task in enumerate(tasks)]

    table = Table(title=f"tasks check: {sum(e['ok'] for e in entries)}/{len(entries)} ok")
    for column in ("task", "layout", "oracle", "nop", "ok", "note"):
        table.add_column(column)
    for e in entries:
        notes = [f"{agent}: {e[agent]['error']['class']}: {e[agent]['error']['message'].splitlines()[0][:80]}"
                 for agent in ("oracle", "nop") if e[agent]["error"]]
        for sub in e["image"].get("substitutions", []):
            if sub.get("what") == "alias":
                py = sub.get("python", {}).get("provided")
                notes.append(f"{sub['from']} -> {sub.get('kind', sub['to'])}{f' (python {py})' if py else ''}")
            elif sub.get("what") == "prebuilt_image_replaced":
                notes.append(f"built {sub['built_from']} (no {sub['docker_image']})")
        table.add_row(e["task_id"], e["layout"], _reward(e["oracle"]), _reward(e["nop"]),
                      "[green]ok[/]" if e["ok"] else "[red]FAIL[/]", "; ".join(notes))
    Console(width=max(120, Console().width)).print(table)
    if json_out:
        atomic.write_json(json_out, entries)
    if not all(e["ok"] for e in entries):
        sys.exit(1)


def _reward(view: dict) -> str:
    if view["reward"] is None:
        return "-"
    tests = f" ({view['passed']}/{view['total']})" if view["total"] else ""
    return f"{view['reward']:g}{tests}"
