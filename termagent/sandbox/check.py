"""`termagent tasks check PATH...`: run the oracle and nop agents on task directories in the sandbox. A task is
ok when the oracle earns reward 1.0 and nop earns 0.0; every task that is not ok gets a class (`check_entry`)
and the tail of what failed; a nop that passes is rerun to tell a flaky verdict from a vacuous one.
The `termagent` command adds `check` to the `tasks` group (termagent/cli.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from termagent import atomic
from termagent.tasks.model import TaskError

NOP_RERUNS = 2  # default reruns of a passing nop in `tasks check`


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the per-task results here (a JSON list).")
@click.option("--concurrency", "-j", type=click.IntRange(min=1), default=None,
              help="Containers at once (default: sandbox.concurrency of params.yaml).")
@click.option("--params", "params_file", default="params.yaml", show_default=True,
              help="Where the sandbox: section is read from (defaults apply when absent).")
@click.option("--nop-reruns", type=click.IntRange(min=0), default=NOP_RERUNS, show_default=True,
              help="Reruns of a nop that passed: one that scores 0 on a rerun is flaky, else vacuous.")
def check(paths: tuple[Path, ...], json_out: Path | None, concurrency: int | None, params_file: str,
          nop_reruns: int) -> None:
    """Run the oracle and nop agents on task directories (or directories of them); exit 0 only if every
    task is ok (oracle reward 1.0, nop reward 0.0). A task that is not ok is classed (the error class of a
    failing trial, OracleFailed, NopPassesFlaky or NopPassesVacuous) in the table, the summary and the JSON."""
    import logging

    from rich.console import Console
    from rich.table import Table

    from termagent.params import read_sections
    from termagent.sandbox import Sandbox, SandboxParams, run_trials
    from termagent.sandbox.agents import NopAgent, OracleAgent
    from termagent.sandbox.errors import SandboxError
    from termagent.sandbox.image import ensure_base_image
    from termagent.tasks.load import discover_tasks

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        found = discover_tasks(list(paths))
    except TaskError as e:
        raise click.ClickException(str(e)) from e
    params = read_sections(params_file, missing_ok=True, sandbox=SandboxParams).sandbox
    try:
        base = ensure_base_image(params.base_recipe())
    except SandboxError as e:
        raise click.ClickException(str(e)) from e
    sandbox = Sandbox(params.sandbox_config(base.tag))
    oracle, nop = OracleAgent(), NopAgent()
    specs = [(task, agent, 0) for task in found for agent in (oracle, nop)]
    results = run_trials(sandbox, specs, concurrency=concurrency, description="oracle + nop")
    # A nop that passed: rerun it (a fresh container each time) to tell a flaky verdict from a vacuous one.
    passing = [i for i, task in enumerate(found) if nop_passed(results[2 * i + 1])]
    rerun_specs = [(found[i], nop, attempt) for i in passing for attempt in range(1, nop_reruns + 1)]
    reruns = run_trials(sandbox, rerun_specs, concurrency=concurrency, description="nop reruns") if rerun_specs else []
    rerun_of = {i: reruns[k * nop_reruns:(k + 1) * nop_reruns] for k, i in enumerate(passing)}
    entries = [check_entry(task, results[2 * i], results[2 * i + 1], rerun_of.get(i, ()))
               for i, task in enumerate(found)]

    table = Table(title=f"tasks check: {sum(e['ok'] for e in entries)}/{len(entries)} ok")
    for column in ("task", "layout", "oracle", "nop", "ok", "note"):
        table.add_column(column)
    for e in entries:
        notes = [f"{f['agent']}: {f['class']}: {f['cause'][:100]}" for f in e["failures"]]
        for sub in e["image"].get("substitutions", []):
            if sub.get("what") == "alias":
                py = sub.get("python", {}).get("provided")
                notes.append(f"{sub['from']} -> {sub.get('kind', sub['to'])}{f' (python {py})' if py else ''}")
            elif sub.get("what") == "prebuilt_image_replaced":
                notes.append(f"built {sub['built_from']} (no {sub['docker_image']})")
        pythons = e["image"].get("verifier_pythons") or {}
        for minor, info in pythons.get("provided", {}).items():
            notes.append(f"verifier python {minor} from {info['suite']}")
        for minor in pythons.get("unavailable", {}):
            notes.append(f"verifier python {minor}: not available offline")
        table.add_row(e["task_id"], e["layout"], _reward(e["oracle"]), _reward(e["nop"]),
                      "[green]ok[/]" if e["ok"] else f"[red]{e['class']}[/]", "; ".join(notes))
    console = Console(width=max(120, Console().width))
    console.print(table)
    console.print(check_summary(entries), markup=False)
    if json_out:
        atomic.write_json(json_out, entries)
    if not all(e["ok"] for e in entries):
        sys.exit(1)


VERIFIER_TAIL_CHARS = 3000  # of a failing trial's verifier output, kept in the check JSON

# Classes of a task that is not ok, besides the error class of a trial that raised (BuildError, VerifierError, ...):
ORACLE_FAILED = "OracleFailed"  # the oracle's verifier ran and graded it below 1
NOP_PASSES_FLAKY = "NopPassesFlaky"  # nop passed, then scored 0 on a rerun: the verdict does not follow the state
NOP_PASSES_VACUOUS = "NopPassesVacuous"  # nop passed every time: the untouched environment already passes
NOP_PARTIAL = "NopScored"  # nop earned a reward between 0 and 1 (not a pass, not a 0)

# Lines of a verifier's output that name a cause in the environment rather than in the solution: a module,
# command, interpreter or file the tests expected the image to have.
_ENVIRONMENT = re.compile(
    r"^.*(?:ModuleNotFoundError|ImportError: |command not found|bad interpreter|No interpreter found|"
    r"No such file or directory: '?/(?:usr|bin|sbin|opt|lib)/|not found in PATH|Cannot uninstall|"
    r"externally-managed-environment|CERTIFICATE_VERIFY_FAILED|Temporary failure in name resolution|"
    r"Could not resolve host|Failed to (?:fetch|download)|exec format error|GLIBC_\d).*$", re.MULTILINE)


def nop_passed(result) -> bool:
    """A nop trial that earned a reward without acting (no error, reward above 0)."""
    return result.error is None and result.reward is not None and result.reward > 0.0


def environment_cause(output: str) -> str | None:
    """The last line of a verifier's output that blames the environment (a missing module, command,
    interpreter or file; a failed download), or None."""
    lines = [m.group(0).strip() for m in _ENVIRONMENT.finditer(output or "")]
    return lines[-1][:300] if lines else None


def check_entry(task, oracle, nop, nop_reruns=()) -> dict:
    """One task's `tasks check` record from its oracle and nop TrialResults (and the reruns of a nop that
    passed). `class` is "ok" or the first failure's class; `failures` lists every failing agent with its
    class, a one-line cause and the tail of what it printed (verifier output, else the error message)."""
    def agent_view(r) -> dict:
        return {"reward": r.reward, "rewards": r.rewards, "error": r.error, "passed": r.passed, "total": r.total}

    failures = []
    oracle_failure = _failure("oracle", oracle, want=1.0)
    if oracle_failure:
        failures.append(oracle_failure)
    nop_failure = _failure("nop", nop, want=0.0)
    if nop_failure:
        if nop_passed(nop):
            rewards = [r.reward for r in nop_reruns]
            if any(r == 0.0 for r in rewards):
                nop_failure["class"] = NOP_PASSES_FLAKY
                nop_failure["cause"] = (f"nop earned {nop.reward:g} with no action, then "
                                        f"{', '.join('-' if r is None else f'{r:g}' for r in rewards)} on "
                                        f"{len(rewards)} rerun(s): the verdict does not follow the environment's state")
            elif nop.reward == 1.0 or any(r is not None and r > 0 for r in rewards):
                nop_failure["class"] = NOP_PASSES_VACUOUS if nop.reward == 1.0 else NOP_PARTIAL
                nop_failure["cause"] = (f"nop earned {nop.reward:g} with no action"
                                        + (f", and {', '.join('-' if r is None else f'{r:g}' for r in rewards)} "
                                           f"on {len(rewards)} rerun(s)" if rewards else " (not rerun)")
                                        + ": the untouched environment already passes the tests")
            nop_failure["reruns"] = [{"reward": r.reward, "error": r.error} for r in nop_reruns]
        failures.append(nop_failure)
    ok = not failures
    entry = {"task_id": task.id, "layout": task.layout, "oracle": agent_view(oracle), "nop": agent_view(nop),
             "ok": ok, "class": "ok" if ok else failures[0]["class"], "failures": failures,
             "image": oracle.image, "timings": {"oracle": oracle.timings, "nop": nop.timings}}
    if not ok:  # diagnosable without a rerun: the end of what each failing verifier printed
        for name, r, want in (("oracle", oracle, 1.0), ("nop", nop, 0.0)):
            if r.reward != want:
                entry[name]["verifier_tail"] = (r.verifier_output or "")[-VERIFIER_TAIL_CHARS:]
    return entry


def _failure(agent: str, r, want: float) -> dict | None:
    """{agent, class, cause, tail} of a trial that did not earn `want`; None when it did."""
    if r.error is None and r.reward == want:
        return None
    tail = (r.verifier_output or "")[-VERIFIER_TAIL_CHARS:]
    if r.error is not None:
        message = r.error.get("message", "")
        cause = next((line for line in message.splitlines() if line.strip()), "")[:300]
        failure = {"agent": agent, "class": r.error["class"], "cause": cause,
                   "tail": tail or message[-VERIFIER_TAIL_CHARS:]}
    else:
        tests = f" ({r.passed}/{r.total} tests)" if r.total else ""
        failure = {"agent": agent, "class": ORACLE_FAILED if agent == "oracle" else NOP_PARTIAL,
                   "cause": f"{agent} earned {r.reward:g}{tests}, not {want:g}", "tail": tail}
    found = environment_cause(tail or (r.error.get("message", "") if r.error else ""))
    if found and (r.error is not None or agent == "oracle"):
        failure["environment"] = found
        failure["cause"] += f"; environment: {found}"
    return failure


def check_summary(entries: list[dict]) -> str:
    """One line: how many tasks are ok, and how many fall in each class of failure."""
    counts: dict[str, int] = {}
    for e in entries:
        if not e["ok"]:
            counts[e["class"]] = counts.get(e["class"], 0) + 1
    by_class = ", ".join(f"{c} {n}" for c, n in sorted(counts.items()))
    return f"{sum(e['ok'] for e in entries)}/{len(entries)} ok" + (f"; not ok: {by_class}" if by_class else "")
def _reward(view: dict) -> str:
    if view["reward"] is None:
        return "-"
    tests = f" ({view['passed']}/{view['total']})" if view["total"] else ""
    return f"{view['reward']:g}{tests}"
