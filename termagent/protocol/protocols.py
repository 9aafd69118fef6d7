"""The two protocols an episode can speak (params `agent.protocol`): the text of the first prompt, of
every observation, and the reply parser. Everything that renders a prompt (the agent loop, demos, the
GRPO prompts, MT-GRPO's episodes) asks `protocol_for(config)`, so training and evaluation send the same
text.

- `termagent` (the default): our own wording of Terminus-2 (prompt.py, observation.py, parse.py).
- `harbor-terminus-2`: exactly what Harbor's terminus-2 agent sends (JSON parser), every text read from
  the installed Harbor package at run time (termagent/protocol/harbor.py); the logic that fills them
  (which text when, the labels, the double output limit, the feedback lines) follows terminus_2.py's
  `_run_agent_loop`, `_handle_llm_interaction`, `_query_llm`, `_limit_output_length` and
  tmux_session.py's `get_incremental_output`. Replies are judged by Harbor's own parser.
  The terminal is captured as Harbor's TmuxSession does (`capture == "harbor"`, termagent/terminal.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from termagent.protocol import observation as _obs
from termagent.protocol import prompt as _prompt
from termagent.protocol.parse import AgentResponse, Command, ParseResult, parse_response
from termagent.protocol.prompt import MAX_DURATION_SEC

PROTOCOLS = ("termagent", "harbor-terminus-2")
HARBOR_FIX = "harbor auto-correction"  # ParseResult.fixes entry when Harbor's parser repaired the reply


class TermagentProtocol:
    """Our own texts (the CPU profile's): prompt.py / observation.py / parse.py, unchanged."""

    name = "termagent"
    capture = "termagent"  # how the terminal isolates new output (termagent/terminal.py)

    def __init__(self, max_observation_bytes: int = _obs.MAX_OUTPUT_BYTES):
        self.max_bytes = max_observation_bytes

    def initial_prompt(self, instruction: str, screen: str) -> str:
        return _prompt.render_initial_prompt(instruction, screen)

    def initial_messages(self, instruction: str, screen: str) -> list[dict]:
        return [{"role": "user", "content": self.initial_prompt(instruction, screen)}]

    def parse(self, text: str) -> ParseResult:
        return parse_response(text)

    def observation(self, terminal_output: str = "", **kwargs: Any) -> str:
        kwargs.setdefault("max_bytes", self.max_bytes)
        return _obs.format_observation(terminal_output, **kwargs)

    def screen_text(self, screen: str) -> str:
        """The visible screen as an observation shows it (after a context reduction)."""
        return _obs.format_terminal_output(_obs.limit_output(screen, self.max_bytes), False)

    def describe(self) -> dict:
        return {"name": self.name}


class HarborTerminus2Protocol:
    """Harbor's terminus-2 (parser "json"), its texts from the package `texts`, its parser `parser`."""

    name = "harbor-terminus-2"
    capture = "harbor"

    def __init__(self, texts, parser):
        self.texts = texts
        self.parser = parser
        self.max_bytes = texts.limit_default_bytes

    # ---- what terminus-2 computes -------------------------------------------------------------------

    def limit(self, output: str) -> str:
        """Terminus2._limit_output_length: the first and last max_bytes//2 bytes around Harbor's marker."""
        data = output.encode("utf-8")
        if len(data) <= self.max_bytes:
            return output
        half = self.max_bytes // 2
        first = data[:half].decode("utf-8", errors="ignore")
        last = data[-half:].decode("utf-8", errors="ignore")
        omitted = len(data) - len(first.encode("utf-8")) - len(last.encode("utf-8"))
        return self.texts.limit_marker.format(first_portion=first, max_bytes=self.max_bytes,
                                              omitted_bytes=omitted, last_portion=last)

    def terminal_output(self, text: str, incremental: bool) -> str:
        """TmuxSession.get_incremental_output's labelled text, then limited (Terminus2._execute_commands).
        `incremental`: `text` is the new content (non-blank); else `text` is the visible screen."""
        labelled = (self.texts.new_output.format(content=text) if incremental
                    else self.texts.screen.format(screen=text))
        return self.limit(labelled)

    def warning_text(self, warnings: Sequence[str]) -> str:
        """The parser's warning string: "- w1\\n- w2" (how TerminusJSONPlainParser joins its list)."""
        return "- " + "\n- ".join(warnings) if warnings else ""

    # ---- the protocol ---------------------------------------------------------------------------------

    def initial_prompt(self, instruction: str, screen: str) -> str:
        """Terminus2.run: the template filled with the instruction (as given) and the first capture."""
        return self.texts.initial_prompt.format(instruction=instruction,
                                                terminal_state=self.terminal_output(screen, False))

    def initial_messages(self, instruction: str, screen: str) -> list[dict]:
        return [{"role": "user", "content": self.initial_prompt(instruction, screen)}]

    def parse(self, text: str) -> ParseResult:
        """Harbor's TerminusJSONPlainParser, mapped to our ParseResult (durations capped at 60 s as
        `_handle_llm_interaction` does; `fixes` says when Harbor's auto-corrections were needed)."""
        if not isinstance(text, str):
            return ParseResult(False, None, errors=[f"response must be text, got {type(text).__name__}"])
        result = self.parser.parse_response(text)
        warning = result.warning or ""
        warnings = warning[2:].split("\n- ") if warning.startswith("- ") else ([warning] if warning else [])
        if result.error:
            return ParseResult(False, None, errors=[result.error], warnings=warnings)
        fixes = [HARBOR_FIX] if self.parser._try_parse_response(text).error else []

        def text_of(value) -> str:
            return value if isinstance(value, str) else json.dumps(value)

        response = AgentResponse(
            analysis=text_of(result.analysis), plan=text_of(result.plan),
            commands=tuple(Command(c.keystrokes, min(float(c.duration), MAX_DURATION_SEC)) for c in result.commands),
            task_complete=bool(result.is_task_complete))
        return ParseResult(True, response, warnings=warnings, fixes=fixes)

    def observation(self, terminal_output: str = "", *, incremental: bool = True, warnings: Sequence[str] = (),
                    errors: Sequence[str] = (), confirm_completion: bool = False, output_cut: bool = False,
                    max_output_tokens: int | None = None, context_exceeded: bool = False,
                    context_limit: int | None = None, context_strategy: str = "summarize",
                    max_bytes: int | None = None) -> str:
        """The next user message, as Terminus2._run_agent_loop / _query_llm build it."""
        t = self.texts
        if context_exceeded:
            # Harbor answers a context overflow with its summarisation subagents; that flow is not
            # reproduced (docs/terminus-2-protocol.md), so our note is sent.
            return _obs.format_context_exceeded(context_limit, context_strategy)
        if output_cut:
            limit_str = (t.limit_str_known.format(output_limit=max_output_tokens) if max_output_tokens
                         else t.limit_str_unknown)
            text = t.output_cut.format(limit_str=limit_str)
            if warnings:
                text += t.output_cut_warnings.format(warning=self.warning_text(warnings))
            return text
        if errors:
            feedback = t.feedback_error.format(error=errors[0])
            if warnings:
                feedback += t.feedback_error_warning.format(warning=self.warning_text(warnings))
            return t.parse_error_prompt.format(feedback=feedback, _get_error_response_type=t.error_response_type)
        shown = self.terminal_output(terminal_output, incremental)
        if confirm_completion:
            return t.confirmation.format(terminal_output=shown)
        if warnings:
            feedback = t.feedback_warning.format(warning=self.warning_text(warnings))
            return t.warning_observation.format(feedback=feedback, _limit_output_length=self.limit(shown))
        return self.limit(shown)

    def screen_text(self, screen: str) -> str:
        return self.terminal_output(screen, False)

    def describe(self) -> dict:
        return {"name": self.name, "harbor": self.texts.harbor.describe(), "texts_sha256": self.texts.fingerprint()}


def get_protocol(name: str = "termagent", *, harbor_package: str | None = None, harbor_version: str | None = None,
                 max_observation_bytes: int = _obs.MAX_OUTPUT_BYTES):
    """The protocol `name` (params agent.protocol). harbor-terminus-2 reads Harbor's package (located as
    termagent.protocol.harbor.locate_harbor says) and refuses another release than `harbor_version`."""
    if name == "termagent":
        return TermagentProtocol(max_observation_bytes)
    if name != "harbor-terminus-2":
        raise ValueError(f"agent.protocol must be one of {', '.join(PROTOCOLS)}, got {name!r}")
    from termagent.protocol import harbor

    texts, parser = harbor.load(harbor_package or None, os.environ.get(harbor.ENV_VAR), harbor_version or None)
    if max_observation_bytes != texts.limit_default_bytes:
        raise ValueError(f"agent.max_observation_bytes is {max_observation_bytes}, but terminus-2 (Harbor "
                         f"{texts.harbor.version}) limits output to {texts.limit_default_bytes} bytes: with "
                         "agent.protocol harbor-terminus-2 set it to that")
    return HarborTerminus2Protocol(texts, parser)


def protocol_for(config) -> TermagentProtocol | HarborTerminus2Protocol:
    """The protocol an AgentConfig (or any object with its protocol fields) selects."""
    return get_protocol(getattr(config, "protocol", "termagent"),
                        harbor_package=getattr(config, "harbor_package", None),
                        harbor_version=getattr(config, "harbor_version", None),
                        max_observation_bytes=getattr(config, "max_observation_bytes", _obs.MAX_OUTPUT_BYTES))
