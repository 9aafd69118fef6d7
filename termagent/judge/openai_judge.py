"""The OpenAI-compatible judge: any /v1/chat/completions endpoint (OpenAI, vLLM, transformers serve).

- Answers are JSON objects checked against a small schema; an invalid answer is sent back with the
  errors and asked again, at most `max_retries` times. After that the item falls back to the rules
  judge and the answer says so (`judge: "rules/1 (fallback: openai:<model>/<v> invalid after N tries)"`),
  and `fallbacks` counts it: one stubborn item must not sink a 17k-rollout build, but it must not
  hide either. Transport errors (endpoint down, auth) raise JudgeError: that is a setup problem.
- Calls fan out over a thread pool of `concurrency` workers.
- Each valid answer is cached on disk under sha256(model, prompt version, sha256(prompt)); a rerun
  with the same model and prompts makes no HTTP call.
- The API key is read from the environment variable *named* by `api_key_env`; it is never written
  to the cache, an output or a log.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from termagent import atomic
from termagent.judge.base import (
    DIFFICULTIES,
    SKILLS,
    FabricationQuery,
    FabricationVerdict,
    JudgeError,
    Ranking,
    RankQuery,
    StepQuery,
    StepScores,
    TaskAnalysis,
)
from termagent.judge.rules import RulesJudge
from termagent.judge.task_context import TaskContext
from termagent.redact import redact

log = logging.getLogger(__name__)
PROMPT_VERSION = "1"


@dataclass
class OpenAIJudgeConfig:
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "judge"
    api_key_env: str = "OPENAI_API_KEY"  # the NAME of the variable holding the key, never the key
    concurrency: int = 4  # requests in flight at once
    max_retries: int = 2  # re-asks after an invalid answer (so at most 1 + max_retries calls per item)
    timeout_s: float = 120.0
    temperature: float = 0.0
    max_tokens: int = 1024
    cache_dir: str = "data/judge_cache"
    json_mode: bool = False  # send response_format={"type": "json_object"} (not every server has it)


# ------------------------------------------------------------------------------------ validation
Check = Callable[[Any], str | None]


def _int_in(lo: int, hi: int) -> Check:
    def check(v: Any) -> str | None:
        ok = isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi
        return None if ok else f"must be an integer in [{lo}, {hi}], got {v!r}"
    return check


def _is(tp: type, what: str) -> Check:
    return lambda v: None if isinstance(v, tp) and not (tp is int and isinstance(v, bool)) else f"must be {what}"


def _int_list(n: int, lo: int, hi: int) -> Check:
    def check(v: Any) -> str | None:
        if not isinstance(v, list) or len(v) != n:
            return f"must be a list of {n} integers"
        bad = [x for x in v if _int_in(lo, hi)(x)]
        return f"items must be integers in [{lo}, {hi}], got {bad[:3]}" if bad else None
    return check


def _skills(v: Any) -> str | None:
    if not isinstance(v, list) or not v or not all(isinstance(s, str) for s in v):
        return "must be a non-empty list of strings"
    bad = [s for s in v if s not in SKILLS]
    return f"unknown skills {bad}; allowed: {list(SKILLS)}" if bad else None


def _signature(v: Any) -> str | None:
    if not isinstance(v, str) or not 5 <= len(v.split()) <= 10:
        return "must be a string of 5 to 10 words"
    return None


def validate(answer: Any, schema: dict[str, Check]) -> list[str]:
    if not isinstance(answer, dict):
        return ["the answer must be a JSON object"]
    errors = []
    for key, check in schema.items():
        if key not in answer:
            errors.append(f"missing key {key!r}")
            continue
        problem = check(answer[key])
        if problem:
            errors.append(f"{key} {problem}")
    return errors


def extract_json(text: str) -> Any:
    """The answer's JSON object, tolerating ```json fences and text around it (the protocol's extractor)."""
    from termagent.protocol.parse import find_json_object

    text = (text or "").strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        found = find_json_object(text)
        return found[0] if found else None


# ------------------------------------------------------------------------------------ prompts
SYSTEM = ("You are a careful reviewer of shell-agent transcripts for training data. "
          "Answer with one JSON object only, no prose, exactly the keys asked for.")


def _commands_block(commands) -> str:
    return "\n".join(f"[{i}] {c.rstrip()}" for i, c in enumerate(commands)) or "(no commands)"


def _task_block(task: TaskContext) -> str:
    provided = "\n".join(sorted(task.provided.files)) or "(none known)"
    return (f"Task {task.id} (agent starts in {task.workdir}).\nInstruction:\n{task.instruction.strip()}\n\n"
            f"Input files the environment provides:\n{provided}")


def fabrication_prompt(q: FabricationQuery) -> tuple[str, dict[str, Check]]:
    prompt = (f"{_task_block(q.task)}\n\nCommands the agent ran:\n{_commands_block(q.candidate.commands)}\n\n"
              "Does the agent fabricate its inputs, i.e. write, append to, truncate, edit in place, move or "
              "delete any of the provided input files (reading them is fine)? Answer "
              '{"fabricates": true|false, "paths": [provided paths it tampers with], "reason": "one sentence"}')
    return prompt, {"fabricates": _is(bool, "a boolean"), "paths": _is(list, "a list"),
                    "reason": _is(str, "a string")}


def rank_prompt(q: RankQuery) -> tuple[str, dict[str, Check]]:
    blocks = "\n\n".join(f"Candidate {i} (exit status {c.exec_rc}, verifier reward {c.verifier_reward:.2f}):\n"
                         f"{_commands_block(c.commands)}" for i, c in enumerate(q.candidates))
    prompt = (f"{_task_block(q.task)}\n\nThese candidate solutions all pass the tests.\n\n{blocks}\n\n"
              "Which is the best example to teach a model: correct, robust, minimal, no tampering with inputs? "
              f'Answer {{"best": <index 0-{len(q.candidates) - 1}>, "reason": "one sentence"}}')
    return prompt, {"best": _int_in(0, len(q.candidates) - 1), "reason": _is(str, "a string")}


def steps_prompt(q: StepQuery) -> tuple[str, dict[str, Check]]:
    np_, nf = len(q.passing.commands), len(q.failing.commands)
    prompt = (f"{_task_block(q.task)}\n\nPassing run (tests pass):\n{_commands_block(q.passing.commands)}\n\n"
              f"Failing run (reward {q.failing.verifier_reward:.2f}):\n{_commands_block(q.failing.commands)}\n\n"
              "Score every step of both runs from 1 (harmful) to 5 (clearly right), find the first failing-run "
              "step where it goes wrong, and say why. Answer "
              f'{{"passing_scores": [{np_} integers], "failing_scores": [{nf} integers], '
              '"divergence_step": <index>, "divergence_reason": "one sentence", "step_notes": ["..."]}')
    return prompt, {
        "passing_scores": _int_list(np_, 1, 5), "failing_scores": _int_list(nf, 1, 5),
        "divergence_step": _int_in(0, max(np_, nf)), "divergence_reason": _is(str, "a string"),
        "step_notes": _is(list, "a list of strings"),
    }


def analysis_prompt(task: TaskContext) -> tuple[str, dict[str, Check]]:
    prompt = (f"Task {task.id}.\nInstruction:\n{task.instruction.strip()}\n\nTests:\n{task.tests_text[:6000]}\n\n"
              "Rate this task as RL training material. Answer "
              '{"quality": <1-10: clear, verifiable, realistic>, "difficulty": "easy"|"medium"|"hard", '
              f'"skills": [1-4 of {list(SKILLS)}], "signature": "5 to 10 words naming what the task does, '
              'so two tasks asking the same thing get the same signature", "reason": "one sentence"}')
    return prompt, {"quality": _int_in(1, 10),
                    "difficulty": lambda v: None if v in DIFFICULTIES else f"must be one of {list(DIFFICULTIES)}",
                    "skills": _skills, "signature": _signature, "reason": _is(str, "a string")}


# ------------------------------------------------------------------------------------ the judge
class OpenAIJudge:
    prompt_version = PROMPT_VERSION

    def __init__(self, config: OpenAIJudgeConfig):
        import openai

        self.config = config
        self.name = f"openai:{config.model}"
        self.cache_dir = Path(config.cache_dir)
        self._rules = RulesJudge()
        self._lock = threading.Lock()
        self.http_calls = 0
        self.cache_hits = 0
        self.fallbacks = 0
        api_key = os.environ.get(config.api_key_env) or "not-needed"  # local servers take any key
        self._client = openai.OpenAI(base_url=config.base_url, api_key=api_key,
                                     timeout=config.timeout_s, max_retries=2)
        self._openai = openai

    @property
    def label(self) -> str:
        return f"{self.name}/{self.prompt_version}"

    def stats(self) -> dict:
        return {"judge": self.label, "http_calls": self.http_calls, "cache_hits": self.cache_hits,
                "fallbacks": self.fallbacks}

    # -- cache
    def _cache_path(self, prompt: str) -> Path:
        prompt_hash = hashlib.sha256(prompt.encode()).hexdigest()
        key = hashlib.sha256(f"{self.config.model}\0{self.prompt_version}\0{prompt_hash}".encode()).hexdigest()
        return self.cache_dir / key[:2] / f"{key}.json"

    def _cached(self, path: Path) -> dict | None:
        try:
            return json.loads(path.read_text())["answer"]
        except (OSError, ValueError, KeyError):
            return None

    def _store(self, path: Path, prompt: str, answer: dict) -> None:
        atomic.write_json(path, {"model": self.config.model, "prompt_version": self.prompt_version,
                                 "prompt_sha256": hashlib.sha256(prompt.encode()).hexdigest(), "answer": answer},
                          indent=None)

    # -- one question
    def ask(self, prompt: str, schema: dict[str, Check]) -> dict | None:
        """A schema-valid answer (from cache or the endpoint), or None after max_retries invalid ones."""
        path = self._cache_path(prompt)
        cached = self._cached(path)
        if cached is not None and not validate(cached, schema):
            with self._lock:
                self.cache_hits += 1
            return cached
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
        for _attempt in range(1 + self.config.max_retries):
            kwargs: dict[str, Any] = {}
            if self.config.json_mode:
                kwargs["response_format"] = {"type": "json_object"}
            try:
                resp = self._client.chat.completions.create(
                    model=self.config.model, messages=messages, temperature=self.config.temperature,
                    max_tokens=self.config.max_tokens, **kwargs)
            except self._openai.OpenAIError as exc:
                detail = redact(str(exc), self.config.api_key_env)  # servers may echo what they got
                raise JudgeError(f"judge endpoint {self.config.base_url} (model {self.config.model}) failed: "
                                 f"{type(exc).__name__}: {detail}") from None
            with self._lock:
                self.http_calls += 1
            text = resp.choices[0].message.content or ""
            answer = extract_json(text)
            errors = validate(answer, schema)
            if not errors:
                self._store(path, prompt, answer)
                return answer
            messages = messages + [
                {"role": "assistant", "content": text},
                {"role": "user", "content": "That answer is invalid: " + "; ".join(errors)
                 + ". Reply again with only the JSON object."},
            ]
        return None

    def _fan_out(self, items: list, make_prompt, from_answer, fallback) -> list:
        def one(item):
            prompt, schema = make_prompt(item)
            answer = self.ask(prompt, schema)
            if answer is None:
                with self._lock:
                    self.fallbacks += 1
                result = fallback(item)
                result.judge = (f"{result.judge} (fallback: {self.label} invalid after "
                                f"{1 + self.config.max_retries} tries)")
                return result
            return from_answer(item, answer)

        if len(items) <= 1 or self.config.concurrency <= 1:
            return [one(i) for i in items]
        with ThreadPoolExecutor(max_workers=self.config.concurrency) as pool:
            return list(pool.map(one, items))

    # -- the four questions
    def check_fabrication(self, queries: list[FabricationQuery]) -> list[FabricationVerdict]:
        return self._fan_out(
            queries, fabrication_prompt,
            lambda q, a: FabricationVerdict(a["fabricates"], a["reason"] if a["fabricates"] else "",
                                            [str(p) for p in a["paths"]], self.label),
            lambda q: self._rules.fabrication(q.task, q.candidate))

    def rank(self, queries: list[RankQuery]) -> list[Ranking]:
        return self._fan_out(queries, rank_prompt,
                             lambda q, a: Ranking(a["best"], a["reason"], self.label), self._rules.rank_one)

    def score_steps(self, queries: list[StepQuery]) -> list[StepScores]:
        return self._fan_out(
            queries, steps_prompt,
            lambda q, a: StepScores(a["passing_scores"], a["failing_scores"], a["divergence_step"],
                                    a["divergence_reason"], [str(n) for n in a["step_notes"]], self.label),
            self._rules.score_pair)

    def analyze_tasks(self, tasks: list[TaskContext]) -> list[TaskAnalysis]:
        return self._fan_out(
            tasks, analysis_prompt,
            lambda t, a: TaskAnalysis(t.id, a["quality"], a["difficulty"], list(a["skills"]), a["signature"],
                                      a["reason"], self.label),
            self._rules.analyze)
