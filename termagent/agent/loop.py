"""The Terminus episode loop: policy <-> terminal, turn by turn. Evaluation, demonstrations and multi-turn
RL all run episodes through `TerminusAgent`, so a model is trained in exactly the format it is evaluated in.

One turn: fit the conversation to the context -> one policy call -> parse -> run the commands in tmux ->
the next user message. As in Terminus-2:
- a reply with a hard parse error runs nothing; the next message says what was wrong;
- the first `task_complete: true` runs its commands and asks for confirmation; only a second one in a
  row ends the episode (a parse error in between does not reset the question);
- a reply cut off at max_tokens (`finish_reason == "length"`) runs nothing and the model is told why;
- `max_failed_replies` such replies in a row (hard parse errors or cut off) end the episode with ended_by
  "failed_replies" (off by default, as in Terminus-2);
- a context-length error from the backend runs nothing: the context is reduced (summary, or the oldest
  turns dropped), the model is told, and the episode goes on (context_strategy "end": the episode ends
  with ended_by "context_limit").

The conversation is `history` (answered messages, ending with the assistant) plus `pending` (the next user
message), so a reduction never separates an observation from the reply it asks for.
"""

from __future__ import annotations

import logging
import time

from termagent.agent.config import AgentConfig
from termagent.agent.context import ContextLimitReached, ContextManager, ContextOverflow
from termagent.agent.episode import EpisodeRecord
from termagent.policy import ContextLengthExceeded, Policy
from termagent.protocol.protocols import protocol_for
from termagent.terminal import TerminalConfig, TmuxTerminal, TrialExpired

log = logging.getLogger(__name__)


class TerminusAgent:
    """Implements the sandbox's Agent protocol: `run(trial, task)` returns the episode record (a dict)."""

    name = "terminus"

    def __init__(self, policy: Policy, config: AgentConfig | None = None):
        self.policy = policy
        self.config = config or AgentConfig()
        self.protocol = protocol_for(self.config)  # the texts and the parser (agent.protocol)

    def run(self, trial, task) -> dict:
        """Play one episode in `trial`'s container and return its record. A failure outside the model (the
        terminal, the policy server, a bug) is raised again once the record holds it (`error`, `ended_by`
        "error"), with the record as the exception's `record`: the sandbox then leaves the trial ungraded
        (reward None, an infrastructure failure) instead of verifying a container the model never worked
        in and scoring it the model's 0."""
        config = self.config
        record = EpisodeRecord.start(task_id=task.id, attempt=getattr(trial, "attempt", 0),
                                     model=getattr(self.policy, "name", "policy"), agent=self.name,
                                     config=config.to_dict())
        protocol = self.protocol
        if protocol.name != "termagent":
            record.data["protocol"] = protocol.describe()
        # Attempts of one task must sample differently, or their spread (the eval's stderr) means nothing.
        seed = None if config.seed is None else config.seed + 1000 * record.data["attempt"]
        deadline = getattr(trial, "deadline", None)
        stop_at = None if deadline is None else deadline - config.deadline_margin_sec
        terminal = TmuxTerminal(trial, TerminalConfig(width=config.pane_width, height=config.pane_height,
                                                      max_output_bytes=config.max_observation_bytes,
                                                      capture=protocol.capture))
        context = ContextManager(self.policy, config, record, screen=terminal.screen, protocol=protocol)
        failure: Exception | None = None
        try:
            screen = terminal.start()
            task_prompt = protocol.initial_prompt(task.instruction, screen)
            history: list[dict] = []
            pending = task_prompt
            awaiting_confirmation = False
            failed_in_row = 0  # replies in a row that ran nothing (parse error or cut off)
            repeats, blocked, last_keys = 0, 0, None  # stuck detection (config.max_repeats / max_blocked_turns)
            for index in range(config.max_turns):
                if stop_at is not None and time.monotonic() >= stop_at:
                    record.ended_by = "timeout"
                    break
                history, pending = context.fit(history, pending, task_prompt, turn=index)
                messages = [*history, {"role": "user", "content": pending}]
                turn = record.new_turn(index, messages)
                try:
                    generation = self.policy.generate([messages], max_tokens=config.max_output_tokens,
                                                      temperature=config.temperature, seed=seed)[0]
                except ContextLengthExceeded as error:
                    # Nothing was produced: record it, shrink the context, tell the model, go on.
                    turn.update(finish_reason="context_length", parse_ok=False, completion="",
                                errors=[f"context length exceeded: {error}"], t_end=time.time())
                    history, pending = context.reduce(history, pending, task_prompt, turn=index,
                                                      trigger="context_exceeded", limit=error.limit)
                    # The note goes last: after a summary, `pending` is the whole first message (task first).
                    pending += "\n\n" + protocol.observation(context_exceeded=True,
                                                           context_limit=context.limit(error.limit),
                                                           context_strategy=config.context_strategy)
                    turn["observation"] = pending
                    continue
                record.add_generation(turn, generation)
                if stop_at is not None and time.monotonic() >= stop_at:  # the call itself ran into the deadline
                    turn.update(t_end=time.time())
                    record.ended_by = "timeout"
                    break
                history = [*messages, {"role": "assistant", "content": generation.text}]
                parsed = protocol.parse(generation.text)
                turn.update(parse_ok=parsed.ok and generation.finish_reason != "length",
                            warnings=parsed.warnings, errors=parsed.errors, fixes=parsed.fixes,
                            response=parsed.response.to_dict() if parsed.response else None)

                if generation.finish_reason == "length" or not parsed.ok:
                    if generation.finish_reason == "length":
                        pending = protocol.observation(output_cut=True, max_output_tokens=config.max_output_tokens,
                                                     warnings=parsed.warnings)
                    else:
                        pending = protocol.observation(errors=parsed.errors, warnings=parsed.warnings)
                    failed_in_row += 1
                    if config.max_failed_replies is not None and failed_in_row >= config.max_failed_replies:
                        turn.update(observation=None, t_end=time.time())
                        record.ended_by = "failed_replies"
                        break
                else:
                    failed_in_row = 0
                    response = parsed.response
                    turn["keystrokes"] = [{"keystrokes": c.keystrokes, "duration": c.duration}
                                          for c in response.commands]
                    t_exec = time.monotonic()
                    output = terminal.run(response.commands, deadline=stop_at)
                    turn.update(rc=output.rc, exec_s=time.monotonic() - t_exec,
                                terminal_incremental=output.incremental, task_complete=response.task_complete)
                    if response.task_complete and awaiting_confirmation:
                        turn.update(observation=None, t_end=time.time())
                        record.ended_by = "task_complete"
                        break
                    keys = turn["keystrokes"]
                    repeats = repeats + 1 if keys and keys == last_keys else 1
                    last_keys = keys
                    sent = any(c.keystrokes.strip() for c in response.commands)
                    blocked = blocked + 1 if sent and output.rc is None else 0
                    stuck = _stuck(config, repeats, blocked)
                    if stuck:
                        turn.update(observation=None, t_end=time.time(), stuck=stuck)
                        record.ended_by = "stuck"
                        break
                    awaiting_confirmation = response.task_complete
                    pending = protocol.observation(output.text, incremental=output.incremental,
                                                 warnings=parsed.warnings,
                                                 confirm_completion=response.task_complete,
                                                 max_bytes=config.max_observation_bytes)
                turn.update(observation=pending, t_end=time.time())
            else:
                record.ended_by = "max_turns"
        except ContextLimitReached:
            record.ended_by = "context_limit"  # context_strategy "end" (multi-turn RL): not a failure
        except TrialExpired:
            record.ended_by = "timeout"  # the runner killed the container at the agent timeout: stop, cleanly
        except ContextOverflow as error:
            record.fail(error)  # the model's conversation outgrew every reduction: graded
        except Exception as error:  # noqa: BLE001 (recorded, then raised again below)
            log.warning("episode %s/%d failed outside the model: %s: %s", task.id, record.data["attempt"],
                        type(error).__name__, error)
            record.fail(error)
            failure = error
        finally:
            try:
                terminal.close()
            except Exception as error:  # noqa: BLE001 (the container may be gone: killed on timeout)
                log.debug("closing the terminal failed: %s", error)
        if failure is not None:
            failure.record = record.finish()  # the sandbox keeps it as the trial's agent_result
            raise failure
        return record.finish()


def _stuck(config: AgentConfig, repeats: int, blocked: int) -> str | None:
    """Why the episode is stuck, or None: the same keystrokes `max_repeats` replies in a row, or the terminal
    still busy (no prompt back) after `max_blocked_turns` turns in a row."""
    if config.max_repeats is not None and repeats >= config.max_repeats:
        return f"the same keystrokes {repeats} replies in a row"
    if config.max_blocked_turns is not None and blocked >= config.max_blocked_turns:
        return f"the terminal still busy after {blocked} turns in a row"
    return None
