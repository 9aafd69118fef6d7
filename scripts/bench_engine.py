"""The project's decoder vs the OpenVINO engine, alternated in rounds in one run, on the two workloads that generate:

    python scripts/bench_engine.py --out metrics/bench_engine.json                    (make bench-engine)
    python scripts/bench_engine.py --model DIR --rows 2 --new-tokens 8 --rounds 1 ... (toy shapes: the tiny model)

eval: `--rows` Terminus prompts (the agent protocol's first message of eval_id tasks, rendered with the project's chat
  template; prompt ids checked equal to `apply_chat_template`), `--new-tokens` each, greedy, cold (no cache shared
  with an earlier round). The project's decoder is the eval's: `hf` with the prefix-cached decoder (kv.py), in its
  default dtype (bf16 where the CPU has it); the engine is `openvino` at its default precision.
rl: the same prompts at the RL temperature with a LoRA adapter (r=`--lora-r`, all 7 projections) as a trainer holds
  it. The project's path is MT-GRPO's (HFPolicy.from_model over the live fp32 PEFT model, left-padded `generate`);
  the engine gets the adapter's in-memory state dict each round (a new optimizer step: the weights are perturbed),
  runtime and fused (`adapter_mode`), its set-up time counted in.
Also: greedy rows equal to torch fp32 over the whole length (engine f32 and default precision, and the project's
decoder), the per-token logprob gap (engine vs torch fp32 on the engine's sampled ids, at the RL temperature through
the logits-scaled IR), and multi-turn prefix caching (a second turn's time with its first turn cached or not).
Writes --out (JSON). A benchmark, not a test: nothing asserts on times. Prints progress to stderr.
"""

from __future__ import annotations

import platform
import statistics
import sys
import time
from pathlib import Path

import click
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from termagent import atomic
from termagent.policy import HFSpec, OpenVINOSpec, make_policy
from termagent.policy.hf import HFPolicy
from termagent.policy.openvino import ir_dir_for, lora_scale
from termagent.precision import cpu_bf16_flags

SCREEN = "root@sandbox:/app#"
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def log(msg: str) -> None:
    print(f"[bench-engine {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def eval_messages(rows: int, tasks_index: Path) -> list[list[dict]]:
    """The agent's first message for `rows` eval_id tasks (the protocol the params name)."""
    from termagent.agent import AgentConfig
    from termagent.params import load_params, section
    from termagent.protocol.protocols import protocol_for
    from termagent.tasks.index import tasks_in_split

    agent = section(load_params(REPO / "params.yaml"), "agent", AgentConfig)
    protocol = protocol_for(agent)
    tasks = sorted(tasks_in_split(tasks_index, "eval_id"), key=lambda t: t.id)[:rows]
    if len(tasks) < rows:
        raise click.ClickException(f"{tasks_index}: {len(tasks)} eval_id tasks, {rows} rows asked for")
    return [protocol.initial_messages(t.instruction, SCREEN) for t in tasks]


def openvino_cpu() -> dict:
    """What OpenVINO detected on this CPU: its capabilities and the compute precision `auto` runs at."""
    import openvino as ov

    core = ov.Core()
    return {"openvino_capabilities": list(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")),
            "openvino_default_precision": str(core.get_property("CPU", "INFERENCE_PRECISION_HINT"))}


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def rate(samples: list[float]) -> dict:
    return {"min": round(min(samples), 2), "median": round(statistics.median(samples), 2),
            "samples": [round(s, 2) for s in samples]}


def fp32_logprobs(model, prompt: list[int], ids: list[int], temperature: float) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1].float()
    return torch.log_softmax(logits / temperature, -1).gather(-1, torch.tensor(ids)[:, None]).squeeze(-1)


def logprob_gap(model, generations, temperature: float) -> dict:
    diffs = [abs(a - b) for g in generations if g.logprobs
             for a, b in zip(g.logprobs, fp32_logprobs(model, g.prompt_ids, g.completion_ids, temperature).tolist())]
    if not diffs:
        return {"tokens": 0}
    return {"tokens": len(diffs), "mean": round(statistics.fmean(diffs), 5), "max": round(max(diffs), 5)}


def perturb(model, step: int) -> dict:
    """The adapter after another optimizer step: B matrices nudged (deterministically), its state dict returned."""
    from peft import get_peft_model_state_dict

    gen = torch.Generator().manual_seed(step)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.add_(torch.randn(param.shape, generator=gen) * 0.01)
    return get_peft_model_state_dict(model)


@click.command()
@click.option("--model", "model_dir", default=REPO / "models/base", show_default=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--ir", "ir_dir", default=None, type=click.Path(path_type=Path),
              help="The model's OpenVINO IR (default: <model>_openvino, the export_openvino stage's output).")
@click.option("--tasks", "tasks_index", default=REPO / "data/tasks.json", show_default=True,
              type=click.Path(exists=True, path_type=Path))
@click.option("--rows", default=8, show_default=True)
@click.option("--new-tokens", default=256, show_default=True)
@click.option("--rounds", default=3, show_default=True)
@click.option("--temperature", default=0.7, show_default=True, help="The RL rollouts' (grpo/mt_grpo.temperature).")
@click.option("--lora-r", default=16, show_default=True)
@click.option("--out", default=REPO / "metrics/bench_engine.json", show_default=True, type=click.Path(path_type=Path))
def main(model_dir: Path, ir_dir: Path | None, tasks_index: Path, rows: int, new_tokens: int, rounds: int,
         temperature: float, lora_r: int, out: Path) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    ir_dir = ir_dir or ir_dir_for(model_dir)
    torch.manual_seed(0)
    fp32 = make_policy(HFSpec(model_dir=model_dir, dtype="float32"))
    messages = eval_messages(rows, tasks_index)
    prompts = [fp32.prompt_ids(m) for m in messages]
    templated = [fp32.tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=True)["input_ids"]
                 for m in messages]
    report: dict = {
        "model": str(model_dir), "ir": str(ir_dir), "rows": rows, "new_tokens": new_tokens, "rounds": rounds,
        "temperature": temperature, "lora_r": lora_r, "host": {"cpu_bf16_flags": cpu_bf16_flags(),
                                                               "machine": platform.machine(),
                                                               "torch_threads": torch.get_num_threads(),
                                                               **openvino_cpu()},
        "prompt_tokens": [len(p) for p in prompts], "prompt_ids_equal_apply_chat_template": prompts == templated}
    log(f"{rows} prompts of {min(map(len, prompts))}-{max(map(len, prompts))} tokens; bf16 flags {cpu_bf16_flags()}")

    # -- greedy references: torch fp32 ------------------------------------------------------------------------
    reference = [g.completion_ids for g in fp32.generate_ids(prompts, max_tokens=new_tokens, temperature=0.0)]

    def equal_rows(generations) -> int:
        return sum(g.completion_ids == r for g, r in zip(generations, reference))

    # -- eval workload, alternated ---------------------------------------------------------------------------
    project = make_policy(HFSpec(model_dir=model_dir, prefix_cache=2 * rows))
    engine = make_policy(OpenVINOSpec(ir_dir=ir_dir, tokenizer=model_dir, prefix_caching=False, max_batch=rows))
    engine_f32 = make_policy(OpenVINOSpec(ir_dir=ir_dir, tokenizer=model_dir, precision="f32", prefix_caching=False,
                                          max_batch=rows))
    for policy in (project, engine, engine_f32):  # compilation and first allocations are not the rounds' business
        policy.generate_ids(prompts[:1], max_tokens=2, temperature=0.0)
    speeds: dict[str, list[float]] = {"project": [], "engine": []}
    equal: dict[str, int] = {}
    for r in range(rounds):
        for name in (("project", "engine") if r % 2 == 0 else ("engine", "project")):
            policy = project if name == "project" else engine
            if name == "project":
                project.decoder.clear()  # cold: no episode cache from an earlier round
            gens, seconds = timed(lambda p=policy: p.generate_ids(prompts, max_tokens=new_tokens, temperature=0.0))
            speeds[name].append(sum(g.completion_tokens for g in gens) / seconds)
            equal[name] = equal_rows(gens)
            log(f"eval round {r} {name}: {speeds[name][-1]:.1f} new tok/s, {equal[name]}/{rows} rows = fp32")
    f32_rows = engine_f32.generate_ids(prompts, max_tokens=new_tokens, temperature=0.0)
    greedy = engine.generate_ids(prompts, max_tokens=new_tokens, temperature=0.0)
    report["eval"] = {
        "new_tok_s": {k: rate(v) for k, v in speeds.items()},
        "speedup_median": round(statistics.median(speeds["engine"]) / statistics.median(speeds["project"]), 2),
        "greedy_rows_equal_fp32": {**equal, "engine_f32": equal_rows(f32_rows)},
        "logprob_gap_greedy_vs_fp32": {"engine": logprob_gap(fp32.model, greedy, 1.0),
                                       "engine_f32": logprob_gap(fp32.model, f32_rows, 1.0)}}
    engine_f32.close()
    project.close()

    # -- multi-turn prefix caching ----------------------------------------------------------------------------
    cached = make_policy(OpenVINOSpec(ir_dir=ir_dir, tokenizer=model_dir, prefix_caching=True, max_batch=rows))
    first = cached.generate_ids(prompts, max_tokens=new_tokens // 4 or 1, temperature=0.0)
    second = [g.prompt_ids + g.completion_ids + fp32.tokenizer("\nNew terminal output:\n" + SCREEN,
                                                                add_special_tokens=False)["input_ids"] for g in first]
    shared = sum(len(g.prompt_ids) + len(g.completion_ids) for g in first)
    _, warm_s = timed(lambda: cached.generate_ids(second, max_tokens=1, temperature=0.0))
    _, cold_s = timed(lambda: engine.generate_ids(second, max_tokens=1, temperature=0.0))
    report["prefix_caching"] = {"second_turn_prompt_tokens": sum(map(len, second)), "tokens_cached": shared,
                                "second_turn_prefill_s": {"cached": round(warm_s, 3), "cold": round(cold_s, 3)}}
    cached.close()
    engine.close()
    log(f"prefix caching: second turn {warm_s:.2f} s cached vs {cold_s:.2f} s cold ({shared} tokens cached)")

    # -- RL rollout path with a LoRA adapter -------------------------------------------------------------------
    base = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32, use_kernels=False)
    peft_model = get_peft_model(base, LoraConfig(r=lora_r, lora_alpha=2 * lora_r, target_modules=LORA_TARGETS,
                                                 init_lora_weights=False)).eval()
    scale = lora_scale(peft_model.peft_config["default"].to_dict())
    live = HFPolicy.from_model(peft_model, fp32.tokenizer, name="rl", max_batch=rows)
    rl_engines = {mode: make_policy(OpenVINOSpec(ir_dir=ir_dir, tokenizer=model_dir, adapter_mode=mode, max_batch=rows,
                                                 logit_temperature=temperature)) for mode in ("runtime", "fuse")}
    warm_state = perturb(peft_model, rounds)
    for policy in rl_engines.values():  # the runtime pipeline's first build is not a step's cost
        policy.set_adapter(warm_state, scale)
        policy.generate_ids(prompts[:1], max_tokens=2, temperature=temperature)
    live.generate_ids(prompts[:1], max_tokens=2, temperature=temperature)
    rl_speeds: dict[str, list[float]] = {"project": [], "runtime": [], "fuse": []}
    set_s: dict[str, list[float]] = {"runtime": [], "fuse": []}
    gap = {}
    for r in range(rounds):
        state = perturb(peft_model, r)
        order = ["project", "runtime", "fuse"]
        for name in order[r % 3:] + order[: r % 3]:
            if name == "project":
                gens, seconds = timed(lambda: live.generate_ids(prompts, max_tokens=new_tokens, temperature=temperature))
            else:
                _, setup = timed(lambda n=name, s=state: rl_engines[n].set_adapter(s, scale))
                set_s[name].append(setup)
                gens, seconds = timed(lambda n=name: rl_engines[n].generate_ids(prompts, max_tokens=new_tokens,
                                                                                temperature=temperature))
                seconds += setup
                gap[name] = logprob_gap(peft_model, gens, temperature)
            rl_speeds[name].append(sum(g.completion_tokens for g in gens) / seconds)
            log(f"rl round {r} {name}: {rl_speeds[name][-1]:.1f} new tok/s (adapter set-up counted in)")
    faster = max(("runtime", "fuse"), key=lambda m: statistics.median(rl_speeds[m]))
    report["rl"] = {
        "new_tok_s": {k: rate(v) for k, v in rl_speeds.items()},
        "speedup_median": {m: round(statistics.median(rl_speeds[m]) / statistics.median(rl_speeds["project"]), 2)
                           for m in ("runtime", "fuse")},
        "set_adapter_s": {k: rate(v) for k, v in set_s.items()}, "faster_adapter_mode": faster,
        "logprob_gap_vs_fp32_peft": gap}
    for policy in rl_engines.values():
        policy.close()
    atomic.write_json(out, report)
    log(f"wrote {out}: eval x{report['eval']['speedup_median']}, rl {report['rl']['speedup_median']}")


if __name__ == "__main__":
    main()
