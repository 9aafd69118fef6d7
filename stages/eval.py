"""DVC stages `<model>_eval` (base_eval, sft_eval, ...): evaluate one model on the held-out tasks.

    python stages/eval.py --model base          # what `dvc repro base_eval` runs
    python stages/eval.py --model sft --params profiles/h100.yaml

eval.backend local: the tasks of the split groups eval.split (each capped by eval.max_per_split, spread
over families) × eval.attempts through the sandbox with the
TerminusAgent (agent: section = the protocol); the policy is models/base (+ models/<model> when that
is an adapter), in-process (eval.policy hf) or behind `termagent serve` (eval.policy serve).
eval.backend harbor | tb1: serve the model and run the official harness (Python >= 3.12, internet).
Reads params: eval (all keys), agent (all keys), serve (policy serve / harbor / tb1), sandbox runner keys.
Writes metrics/eval/<model>.json (with `by_split`: the same metrics per split group) and
data/eval/<model>/ (trajectories, index.json, index.html).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path

import click

from termagent.evaluate.config import EvalConfig
from termagent.evaluate.runner import (
    SerializedPolicy,
    local_protocol,
    model_dirs,
    policy_spec,
    run_local_eval,
    write_eval_outputs,
)
from termagent.params import ParamsError, load_params, section


def eval_local(model: str, cfg: EvalConfig, params: dict, params_file: Path, out_dir: Path, metrics: Path) -> dict:
    from termagent.agent import AgentConfig, TerminusAgent
    from termagent.evaluate.splits import metrics_by_split, select_held_out
    from termagent.policy import make_policy
    from termagent.sandbox.runner import Sandbox
    from termagent.sandbox.settings import SandboxParams
    from termagent.serve import ServeConfig, serving
    from termagent.tasks.index import read_index, tasks_in_split

    agent_cfg = section(params, "agent", AgentConfig, file=str(params_file))
    split_of = {r["id"]: r["split"] for r in read_index("data/tasks.json")["tasks"]}
    tasks = select_held_out(tasks_in_split("data/tasks.json", cfg.split), split_of, cfg.max_per_split)
    if cfg.max_tasks:
        tasks = sorted(tasks, key=lambda t: t.id)[: cfg.max_tasks]
    if not tasks:
        raise click.ClickException(f"data/tasks.json: no task in split {cfg.split!r}")
    image = json.loads(Path("data/image.json").read_text())["image"]
    sandbox = Sandbox(section(params, "sandbox", SandboxParams, file=str(params_file)).sandbox_config(image))

    with contextlib.ExitStack() as stack:
        if cfg.policy == "serve":
            base, adapter = model_dirs(model)
            serve_cfg = section(params, "serve", ServeConfig, file=str(params_file))
            url = stack.enter_context(serving(base, adapter, backend=serve_cfg.backend, config=serve_cfg,
                                              log_path=out_dir / "serve.log"))
            # The served model's own tokenizer counts the context (never a guess).
            policy = make_policy(f"openai:{url}", tokenizer=str(base))
        else:
            policy = SerializedPolicy(make_policy(policy_spec(model)))
        stack.callback(policy.close)
        agent = TerminusAgent(policy, agent_cfg)
        click.echo(f"eval {model}: {len(tasks)} tasks x {cfg.attempts} attempts, concurrency {cfg.concurrency}")
        trajectories, wall_s = run_local_eval(sandbox, tasks, agent, attempts=cfg.attempts,
                                              concurrency=cfg.concurrency, model=model)
        context_limit = getattr(policy, "context_limit", None)  # the policy's own, when params set none
    protocol = local_protocol(agent_cfg, tasks, agent=f"termagent {agent.name}", context_limit=context_limit)
    by_split = metrics_by_split(trajectories, split_of, protocol=protocol, wall_s=wall_s, model=model)
    return write_eval_outputs(trajectories, out_dir=out_dir, metrics_path=metrics, model=model, protocol=protocol,
                              wall_s=wall_s, extra_metrics={"backend": "local", "split": cfg.split,
                                                            "by_split": by_split})


def eval_official(model: str, cfg: EvalConfig, params: dict, params_file: Path, out_dir: Path, metrics: Path) -> dict:
    from termagent.evaluate import harbor, tb1
    from termagent.serve import ServeConfig, serving

    # Fail before starting a server when the harness is missing.
    harbor.require_tool("harbor" if cfg.backend == "harbor" else "tb", "See patches/README.md.")
    base, adapter = model_dirs(model)
    serve_cfg = section(params, "serve", ServeConfig, file=str(params_file))
    started = time.monotonic()
    with serving(base, adapter, backend=serve_cfg.backend, config=serve_cfg) as url:
        served = harbor.served_model_id(url, adapter=adapter is not None)
        if cfg.backend == "harbor":
            h = cfg.harbor
            run = harbor.HarborRunConfig(
                served_model=served, api_base=url, jobs_dir=Path(h.jobs_dir), job_name=f"{model}-{int(time.time())}",
                dataset=h.dataset, agent=h.agent, n_concurrent=h.n_concurrent, n_attempts=cfg.attempts,
                temperature=h.temperature, max_input_tokens=h.max_input_tokens, max_output_tokens=h.max_output_tokens)
            records, summary = harbor.convert_harbor_job(harbor.run_harbor(run, log_path=out_dir / "harbor.log"))
            protocol = {"temperature": h.temperature, "max_input_tokens": h.max_input_tokens,
                        "max_output_tokens": h.max_output_tokens, "timeouts": "dataset defaults",
                        "agent": f"harbor {h.agent} ({h.dataset})"}
        else:
            t = cfg.tb1
            run = tb1.TB1RunConfig(served_model=served, api_base=url, output_path=Path(t.runs_dir),
                                   run_id=f"{model}-{int(time.time())}", dataset=t.dataset, agent=t.agent,
                                   n_concurrent=t.n_concurrent, n_attempts=cfg.attempts, temperature=t.temperature)
            records, summary = tb1.convert_tb1_results(tb1.run_tb1(run, log_path=out_dir / "tb1.log"))
            protocol = {"temperature": t.temperature, "max_input_tokens": None, "max_output_tokens": None,
                        "timeouts": "dataset defaults", "agent": f"tb {t.agent} ({t.dataset})"}
    return write_eval_outputs(records, out_dir=out_dir, metrics_path=metrics, model=model, protocol=protocol,
                              wall_s=time.monotonic() - started,
                              extra_metrics={"backend": cfg.backend, "official": summary})


@click.command()
@click.option("--model", required=True, help="Model name: base, or a directory name under models/ (sft, dpo, ...).")
@click.option("--params", "params_file", default="params.yaml", show_default=True, type=click.Path(path_type=Path))
def main(model: str, params_file: Path) -> None:
    try:
        params = load_params(params_file)
        cfg = section(params, "eval", EvalConfig, file=str(params_file))
    except (ParamsError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    out_dir, metrics_path = Path("data/eval") / model, Path("metrics/eval") / f"{model}.json"
    out_dir.mkdir(parents=True, exist_ok=True)
    run = eval_local if cfg.backend == "local" else eval_official
    try:
        m = run(model, cfg, params, params_file, out_dir, metrics_path)
    except (FileNotFoundError, ValueError, RuntimeError, subprocess.CalledProcessError) as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"{metrics_path}: accuracy {m['accuracy']:.3f} ± {m['accuracy_stderr']:.3f} "
               f"({m['n_tasks']} tasks x {m['n_attempts']}), pass@k {m['pass_at_k']}, "
               f"errors {m['errors']}, wall {m['wall_s']:.0f} s")
    click.echo(f"viewer: {out_dir / 'index.html'}")


if __name__ == "__main__":
    main()
