"""Evaluate one model on the held-out split: `evaluate_model(...)`, what every eval stage runs (`eval@<model>`,
`mt_grpo_eval`).

    metrics = evaluate_model("base", EvalConfig(), agent=AgentConfig(), sandbox=SandboxParams(),
                             serve=ServeConfig(), tasks_index=Path("data/tasks.json"),
                             image_record=Path("data/image.json"), out_dir=Path("data/eval/base"),
                             metrics_path=Path("metrics/eval/base.json"))

eval.backend local: the tasks of the model's held-out groups (`groups_for`: eval.models[model], eval.final for the
final model; each capped by `cfg.max_per_split`, spread over families) x `cfg.attempts` at agent.temperature, and
the tasks of `cfg.sampled.splits` x `cfg.sampled.attempts` at its temperature (seeded), through the sandbox with the
TerminusAgent, in one run; the policy is models/base (+ models/<model> when that is an adapter), in-process on the
OpenVINO engine (`policy: openvino`, models/base_openvino) or transformers (`policy: hf`), or behind `termagent
serve` (`policy: serve`). harbor | tb1: serve the model and run the official harness (Python >= 3.12, internet;
eval.sampled does not apply). Writes metrics_path (a few numbers), its details beside it
(termagent.evaluate.outputs) and out_dir (trajectories, index.json, index.html). Returns the details.
A model stage that trained nothing (the warmup with `warmup.enabled: false`: models/warmup holds only
start.json; DPO without a pair, which saves the SFT adapter unchanged) is not evaluated: both outputs say so
(`evaluated: false`; the details say why), with no number.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from termagent.evaluate.config import EvalConfig
from termagent.evaluate.outputs import local_protocol, official_protocol, write_eval_outputs
from termagent.models.artifact import ModelArtifact


def evaluate_model(model: str, cfg: EvalConfig, *, agent, sandbox, serve, tasks_index: Path, image_record: Path,
                   out_dir: Path, metrics_path: Path, log: Callable[[str], None] = print,
                   engine=None) -> dict[str, Any]:
    """`agent`: AgentConfig; `sandbox`: SandboxParams (the runner's knobs); `serve`: ServeConfig; `engine`:
    EngineConfig (termagent.policy.openvino; its defaults when None), for `policy: openvino`."""
    artifact = ModelArtifact.open(model)  # the one read of models/<model>
    if (skip := artifact.not_evaluated()) is not None:
        reason, start = skip
        return write_not_evaluated(model, start, reason=reason, out_dir=out_dir, metrics_path=metrics_path, log=log)
    out_dir.mkdir(parents=True, exist_ok=True)
    if cfg.backend == "local":
        from dataclasses import replace

        from termagent.evaluate.config import groups_for

        cfg = replace(cfg, split=groups_for(cfg, model))
        return _evaluate_local(artifact, cfg, agent, sandbox, serve, tasks_index, image_record, out_dir,
                               metrics_path, log, engine)
    return _evaluate_official(artifact, cfg, serve, out_dir, metrics_path)


def write_not_evaluated(model: str, start: dict, *, reason: str, out_dir: Path, metrics_path: Path,
                        log: Callable[[str], None] = print) -> dict[str, Any]:
    """The eval stage of a model that trained nothing of its own (`ModelArtifact.not_evaluated`): its declared
    outputs say so and carry no number (`evaluated: false`, the reason, the start record or manifest); the
    report leaves the model out and says why. Returns that record."""
    from termagent import atomic
    from termagent.evaluate.outputs import details_path

    record = {"model": model, "evaluated": False, "reason": reason, "start": start}
    with atomic.staged_dir(out_dir) as staging:  # no trajectory of an earlier run survives
        atomic.write_json(staging / "skipped.json", record)
    atomic.write_json(details_path(metrics_path), record)
    atomic.write_json(metrics_path, {"evaluated": False})
    log(f"eval {model}: not evaluated: {reason}")
    return record


def _evaluate_local(artifact: ModelArtifact, cfg: EvalConfig, agent_cfg, sandbox_params, serve_cfg,
                    tasks_index: Path, image_record: Path, out_dir: Path, metrics_path: Path, log,
                    engine=None) -> dict[str, Any]:
    import dataclasses

    from termagent.agent import TerminusAgent
    from termagent.evaluate.splits import select_held_out
    from termagent.evaluate.trajectories import attempt_plan, run_trial_plan
    from termagent.policy import OpenAISpec, make_policy
    from termagent.policy.openvino import EngineConfig
    from termagent.policy.shared import in_process_policy
    from termagent.sandbox import Sandbox
    from termagent.serve import sampling_defaults, serving
    from termagent.tasks.index import read_index, tasks_in_split

    rows = read_index(tasks_index)["tasks"]
    split_of = {r["id"]: r["split"] for r in rows}
    tasks = select_held_out(tasks_in_split(tasks_index, cfg.split), split_of, cfg.max_per_split)
    if cfg.max_tasks:
        tasks = sorted(tasks, key=lambda t: t.id)[: cfg.max_tasks]
    if not tasks:
        raise ValueError(f"{tasks_index}: no task in split {cfg.split!r}")
    image = json.loads(Path(image_record).read_text())["image"]
    sandbox = Sandbox(sandbox_params.sandbox_config(image))

    model, base, adapter = artifact.name, artifact.base, artifact.adapter
    with contextlib.ExitStack() as stack:
        if cfg.policy == "serve":
            url = stack.enter_context(serving(base, adapter, backend=serve_cfg.backend, config=serve_cfg,
                                              log_path=out_dir / "serve.log"))
            # The served model's own tokenizer counts the context (never a guess).
            policy = make_policy(OpenAISpec(url=url, tokenizer=base))
        else:
            policy = in_process_policy(base, adapter, policy=cfg.policy, engine=engine or EngineConfig(),
                                       concurrency=cfg.concurrency, batched=cfg.batched, prefix_cache=cfg.prefix_cache)
        stack.callback(policy.close)
        agent = TerminusAgent(policy, agent_cfg)
        work = attempt_plan(tasks, agent, range(cfg.attempts))
        sampled = cfg.sampled
        sampled_tasks = [t for t in tasks if split_of[t.id] in sampled.splits] if sampled.applies_to(model) else []
        if sampled_tasks:  # numbered after the eval's own attempts: attempt a sends seed + 1000 a with every call
            sampler = TerminusAgent(policy, dataclasses.replace(agent_cfg, temperature=sampled.temperature,
                                                                seed=sampled.seed))
            work += attempt_plan(sampled_tasks, sampler, range(cfg.attempts, cfg.attempts + sampled.attempts))
        log(f"eval {model}: {len(tasks)} tasks x {cfg.attempts} attempts at temperature {agent_cfg.temperature}"
            + (f", {len(sampled_tasks)} x {sampled.attempts} sampled at {sampled.temperature} (seed {sampled.seed})"
               if sampled_tasks else "") + f", concurrency {cfg.concurrency}")
        trajectories, wall_s = run_trial_plan(sandbox, work, concurrency=cfg.concurrency, model=model)
        context_limit = getattr(policy, "context_limit", None)  # the policy's own, when params set none
    for t in trajectories:
        t["mode"] = "sampled" if t["attempt"] >= cfg.attempts else "eval"
    protocol = local_protocol(agent_cfg, tasks, agent=f"termagent {agent.name}", context_limit=context_limit)
    return write_eval_outputs(trajectories, out_dir=out_dir, metrics_path=metrics_path, model=model,
                              protocol=protocol, wall_s=wall_s, split_of=split_of,
                              families={r["id"]: r.get("family") for r in rows},
                              sampled={"temperature": sampled.temperature, "attempts": sampled.attempts,
                                       "seed": sampled.seed, "first_attempt": cfg.attempts,
                                       "seeding": "attempt a: seed + 1000 a on every call (termagent.agent.loop)"}
                              if sampled_tasks else None,
                              extra_metrics={"backend": "local", "split": cfg.split,
                                             **({"serving": sampling_defaults(serve_cfg.backend, serve_cfg.vllm)}
                                                if cfg.policy == "serve" else {})})


def harbor_jobs_dir(model: str, cfg: EvalConfig) -> Path:
    """<eval.harbor.jobs_dir>/<model>: the model's Harbor jobs, kept between runs (a DVC output with
    `persist: true`), so that a rerun resumes its job. stages/eval.py makes it whatever the backend (described in
    backend.json when not harbor), so that output exists on the embedded profile too."""
    from termagent import atomic

    jobs = Path(cfg.harbor.jobs_dir) / model
    jobs.mkdir(parents=True, exist_ok=True)
    if cfg.backend != "harbor":
        atomic.write_json(jobs / "backend.json", {"backend": cfg.backend, "harbor_job": None})
    return jobs


def _evaluate_official(artifact: ModelArtifact, cfg: EvalConfig, serve_cfg, out_dir: Path,
                       metrics_path: Path) -> dict[str, Any]:
    from termagent.evaluate import harbor, tb1
    from termagent.serve import serving

    # Fail before starting a server when the harness is missing.
    harbor.require_tool("harbor" if cfg.backend == "harbor" else "tb", "See patches/README.md.")
    model, base, adapter = artifact.name, artifact.base, artifact.adapter
    if cfg.backend == "harbor":
        return _evaluate_harbor(model, cfg, serve_cfg, base, adapter, out_dir, metrics_path)
    started = time.monotonic()
    with serving(base, adapter, backend=serve_cfg.backend, config=serve_cfg) as url:
        served = harbor.served_model_id(url, adapter=adapter is not None)
        name = f"{model}-{int(time.time())}"
        run = tb1.TB1RunConfig(served_model=served, api_base=url, run_id=name, n_attempts=cfg.attempts,
                               section=cfg.tb1)
        records, summary = tb1.convert_tb1_results(tb1.run_tb1(run, log_path=out_dir / "tb1.log"))
    return write_eval_outputs(records, out_dir=out_dir, metrics_path=metrics_path, model=model,
                              protocol=official_protocol(cfg.backend, cfg.tb1),
                              wall_s=time.monotonic() - started,
                              extra_metrics={"backend": cfg.backend, "official": summary})


def _evaluate_harbor(model, cfg: EvalConfig, serve_cfg, base: Path, adapter: Path | None, out_dir: Path,
                     metrics_path: Path) -> dict[str, Any]:
    """TB2 through Harbor: a deterministic job (model digest + params) in <jobs_dir>/<model>, resumed when it
    exists; infrastructure-errored trials are counted, never scored, and past max_error_rate fail the stage."""
    import dataclasses

    from termagent import atomic
    from termagent.evaluate import harbor
    from termagent.serve import sampling_defaults, serving

    started = time.monotonic()
    jobs_dir = harbor_jobs_dir(model, cfg)
    name = harbor.job_name(model, harbor.model_digest(base, adapter), cfg.harbor, cfg.attempts, serve_cfg.vllm)
    with serving(base, adapter, backend=serve_cfg.backend, config=serve_cfg) as url:
        served = harbor.served_model_id(url, adapter=adapter is not None)
        run = harbor.HarborRunConfig(served_model=served, api_base=url, job_name=name, n_attempts=cfg.attempts,
                                     section=dataclasses.replace(cfg.harbor, jobs_dir=str(jobs_dir)))
        job_dir, how = harbor.run_or_resume_harbor(run, log_path=out_dir / "harbor.log")
    return score_harbor_job(job_dir, model=model, cfg=cfg, out_dir=out_dir, metrics_path=metrics_path,
                            wall_s=time.monotonic() - started,
                            extra={"harbor_job": {"name": name, "dir": str(job_dir), "how": how},
                                   "serving": sampling_defaults(serve_cfg.backend, serve_cfg.vllm)},
                            write_json=atomic.write_json)


def score_harbor_job(job_dir: Path, *, model: str, cfg: EvalConfig, out_dir: Path, metrics_path: Path,
                     wall_s: float, extra: dict[str, Any] | None = None, write_json=None) -> dict[str, Any]:
    """Metrics from a finished Harbor job: only scored trials count; the error tally goes into the metrics (and
    out_dir/harbor_errors.json, also when the stage refuses)."""
    from termagent import atomic
    from termagent.evaluate import harbor

    write_json = write_json or atomic.write_json
    records, summary = harbor.convert_harbor_job(job_dir)
    tally = harbor.tally_errors(records, cfg.harbor.max_error_rate)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    write_json(Path(out_dir) / "harbor_errors.json", tally)
    harbor.check_errors(tally, job_dir)
    scored = [r for r in records if r["scored"]]
    return write_eval_outputs(scored, out_dir=out_dir, metrics_path=metrics_path, model=model,
                              protocol=official_protocol("harbor", cfg.harbor), wall_s=wall_s,
                              extra_metrics={"backend": "harbor", "official": summary, "harbor_errors": tally,
                                             **(extra or {})})
