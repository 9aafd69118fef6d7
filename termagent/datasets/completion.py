"""Read a completion in the Terminus JSON format: {analysis, plan, commands: [{keystrokes, duration}],
task_complete}. The "steps" of a single-turn completion are its commands.

Parsed by termagent.protocol.parse_response, the same parser the agent uses (the only reply parser).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from termagent.protocol.parse import parse_response


@dataclass(frozen=True)
class ParsedCompletion:
    valid_json: bool  # the text is (or, per the protocol parser, is ok as) one Terminus JSON response
    commands: tuple[str, ...]  # keystrokes of each command, in order (found leniently even when invalid)
    task_complete: bool


def parse_completion(text: str) -> ParsedCompletion:
    """valid_json: the protocol parser accepts the text without an auto-fix (a reply it had to repair
    is not a clean training target); commands are found even in replies that need a fix."""
    result = parse_response(text)
    if result.ok and result.response is not None:
        cmds = tuple(c.keystrokes for c in result.response.commands)
        return ParsedCompletion(not result.fixes, cmds, bool(result.response.task_complete))
    return ParsedCompletion(False, (), False)


def terminus_completion(commands: list[str], *, analysis: str = "", plan: str = "",
                        task_complete: bool = True, duration: float = 1.0) -> str:
    """Render a Terminus JSON response (used by the synthetic generator and tests)."""
    return json.dumps({
        "analysis": analysis,
        "plan": plan,
        "commands": [{"keystrokes": k if k.endswith("\n") else k + "\n", "duration": duration}
                     for k in commands],
        "task_complete": task_complete,
    })
