"""Parse a model's reply in the Terminus-2 JSON format, and render a reply back to text.

Hard errors mean nothing may run (the next user message says what was wrong): no JSON object, invalid
JSON, a missing required field, `commands` not a list, a command that is not an object or has no string
`keystrokes`. Everything else is a warning and the reply is used: text around the JSON, a missing or
invalid duration (1.0), a duration over 60 s (clipped), unknown keys.

Two auto-fixes are tried when the plain parse fails, as Terminus-2 does: close the braces and brackets a
truncated reply left open, and pull the JSON object out of surrounding text. A fix that worked is named in
`fixes` and in a warning, so the model is told to stop relying on it.

A reply that opens with a `<think>...</think>` block (a Qwen3-family model's reasoning) is parsed as the model
meant it: the block is reasoning, not the reply, so it is set aside before the JSON is looked for — its braces
never make the "extracted JSON" fix fire (which a strict format reward scores 0) and it is no "extra text".
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from termagent.protocol.keys import is_tmux_key
from termagent.protocol.prompt import DEFAULT_DURATION_SEC, MAX_DURATION_SEC

REQUIRED_FIELDS = ("analysis", "plan", "commands")
OPTIONAL_FIELDS = ("task_complete",)
COMMAND_FIELDS = ("keystrokes", "duration")
TRUE_STRINGS = ("true", "1", "yes")

FIX_CLOSE_BRACES = "closed missing braces/brackets"
FIX_EXTRACT_JSON = "extracted the JSON object from mixed text"
# A closed think block at the very start of the reply (whitespace around it is the template's / the model's).
_THINK_BLOCK = re.compile(r"\s*<think>.*?</think>\s*", re.DOTALL)


@dataclass(frozen=True)
class Command:
    keystrokes: str
    duration: float = DEFAULT_DURATION_SEC


@dataclass(frozen=True)
class AgentResponse:
    analysis: str
    plan: str
    commands: tuple[Command, ...]
    task_complete: bool = False

    def to_dict(self) -> dict:
        return {
            "analysis": self.analysis,
            "plan": self.plan,
            "commands": [{"keystrokes": c.keystrokes, "duration": c.duration} for c in self.commands],
            "task_complete": self.task_complete,
        }


@dataclass
class ParseResult:
    ok: bool
    response: AgentResponse | None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "response": self.response.to_dict() if self.response else None,
            "errors": list(self.errors),
            "warnings": list(self.warnings),
            "fixes": list(self.fixes),
        }


def render_response(response: AgentResponse, indent: int | None = 2) -> str:
    """The reply as the model should write it (demonstrations and SFT targets are rendered here)."""
    return json.dumps(response.to_dict(), indent=indent, ensure_ascii=False)


def parse_response(text: str) -> ParseResult:
    """Parse one reply. Never raises: any input gives a ParseResult."""
    if not isinstance(text, str):
        return ParseResult(False, None, errors=[f"response must be text, got {type(text).__name__}"])
    text = strip_think(text)
    result = _parse_plain(text)
    if result.ok:
        return result
    for name, fix in ((FIX_CLOSE_BRACES, _close_open_brackets), (FIX_EXTRACT_JSON, _extract_json_object)):
        fixed_text = fix(text)
        if fixed_text is None or fixed_text == text:
            continue
        fixed = _parse_plain(fixed_text)
        if fixed.ok:
            fixed.fixes.append(name)
            fixed.warnings.insert(0, f"auto-corrected: {name}; please send a single valid JSON object")
            return fixed
    return result


def strip_think(text: str) -> str:
    """`text` without a `<think>...</think>` block it opens with (unchanged when it opens with none, or the
    block is never closed)."""
    match = _THINK_BLOCK.match(text)
    return text[match.end():] if match else text


def _parse_plain(text: str) -> ParseResult:
    warnings: list[str] = []
    span = _first_object_span(text)
    if span is None:
        return ParseResult(False, None, errors=["no JSON object found in the response"])
    start, end = span
    if text[:start].strip():
        warnings.append("extra text before the JSON object")
    if text[end:].strip():
        warnings.append("extra text after the JSON object")
    try:
        data = json.loads(text[start:end])
    except json.JSONDecodeError as exc:
        snippet = text[start:end]
        snippet = snippet if len(snippet) <= 120 else snippet[:120] + "..."
        return ParseResult(False, None, errors=[(f"invalid JSON: {exc.msg} at line {exc.lineno} "
                                                f"column {exc.colno} (in {snippet!r})")], warnings=warnings)
    except RecursionError:
        return ParseResult(False, None, errors=["invalid JSON: nested too deeply"], warnings=warnings)
    return _validate(data, warnings)


def _validate(data: object, warnings: list[str]) -> ParseResult:
    if not isinstance(data, dict):
        return ParseResult(False, None, errors=["the response must be a JSON object"], warnings=warnings)
    missing = [name for name in REQUIRED_FIELDS if name not in data]
    if missing:
        return ParseResult(False, None, errors=[f"missing required field(s): {', '.join(missing)}"],
                           warnings=warnings)
    unknown = [k for k in data if k not in REQUIRED_FIELDS + OPTIONAL_FIELDS]
    if unknown:
        warnings.append(f"unknown field(s) ignored: {', '.join(map(str, unknown))}")
    analysis, plan = data["analysis"], data["plan"]
    for name, value in (("analysis", analysis), ("plan", plan)):
        if not isinstance(value, str):
            warnings.append(f"field '{name}' should be a string")
    if not isinstance(data["commands"], list):
        return ParseResult(False, None, errors=["field 'commands' must be a list"], warnings=warnings)

    commands: list[Command] = []
    raw_commands = data["commands"]
    for i, raw in enumerate(raw_commands, start=1):
        if not isinstance(raw, dict):
            return ParseResult(False, None, errors=[f"command {i} must be an object"], warnings=warnings)
        if "keystrokes" not in raw:
            return ParseResult(False, None, errors=[f"command {i} has no 'keystrokes' field"],
                               warnings=warnings)
        keystrokes = raw["keystrokes"]
        if not isinstance(keystrokes, str):
            return ParseResult(False, None, errors=[f"command {i}: 'keystrokes' must be a string"],
                               warnings=warnings)
        duration = _duration(raw, i, warnings)
        extra = [k for k in raw if k not in COMMAND_FIELDS]
        if extra:
            warnings.append(f"command {i}: unknown field(s) ignored: {', '.join(map(str, extra))}")
        if i < len(raw_commands) and keystrokes and not keystrokes.endswith("\n") and not is_tmux_key(keystrokes):
            warnings.append(f"command {i} does not end with a newline: the next command is typed on "
                            "the same line")
        commands.append(Command(keystrokes, duration))

    response = AgentResponse(
        analysis=analysis if isinstance(analysis, str) else json.dumps(analysis),
        plan=plan if isinstance(plan, str) else json.dumps(plan),
        commands=tuple(commands),
        task_complete=_task_complete(data.get("task_complete", False), warnings),
    )
    return ParseResult(True, response, warnings=warnings)


def _duration(raw: dict, i: int, warnings: list[str]) -> float:
    if "duration" not in raw:
        warnings.append(f"command {i}: no duration, using {DEFAULT_DURATION_SEC}")
        return DEFAULT_DURATION_SEC
    value = raw["duration"]
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        warnings.append(f"command {i}: invalid duration {raw['duration']!r}, using {DEFAULT_DURATION_SEC}")
        return DEFAULT_DURATION_SEC
    if value > MAX_DURATION_SEC:
        warnings.append(f"command {i}: duration {value} clipped to {MAX_DURATION_SEC:g} seconds")
        return MAX_DURATION_SEC
    return float(value)


def _task_complete(value: object, warnings: list[str]) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() in TRUE_STRINGS
    if isinstance(value, (int, float)):
        return value == 1
    if value is not None:
        warnings.append("field 'task_complete' should be true or false")
    return False


def _structure(text: str, start: int):
    """(index, char, quoted) for every character from `start`: `quoted` is True for a character inside a
    JSON string (escapes followed) and for its opening quote, so a caller sees braces and brackets only
    where they are structure, and the last `quoted` says whether the text ends inside a string."""
    in_string, escaped = False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        yield i, ch, in_string


def _first_object_span(text: str) -> tuple[int, int] | None:
    """Start and end of the first balanced {...} (braces inside JSON strings ignored); None if none."""
    start = text.find("{")
    if start < 0:
        return None
    depth = 0
    for i, ch, quoted in _structure(text, start):
        if quoted:
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return start, i + 1
    return start, len(text)  # unbalanced: let json report where it breaks


def _close_open_brackets(text: str) -> str | None:
    """Fix 1: a reply cut off after a complete value: append the closers of every open { and [."""
    start = text.find("{")
    if start < 0:
        return None
    stack: list[str] = []
    quoted = False
    for _, ch, quoted in _structure(text, start):
        if quoted:
            continue
        if ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack[-1] != ch:
                return None  # mismatched: not a truncation
            stack.pop()
            if not stack:
                return None  # the object closes; something else is wrong
    if quoted or not stack:
        return None
    body = text[start:].rstrip()
    body = body.removesuffix(",")
    return body + "".join(reversed(stack))


def _extract_json_object(text: str) -> str | None:
    """Fix 2: the first {...} in the text that decodes to an object with the required fields."""
    found = find_json_object(text, REQUIRED_FIELDS)
    return found[1] if found else None


def find_json_object(text: str, required: tuple[str, ...] = ()) -> tuple[dict, str] | None:
    """The first {...} in free text that decodes to a JSON object having every key of `required`:
    (the object, its source text), or None. The one JSON-from-text extractor of the project (the reply
    parser's fix and the judge's answers both use it)."""
    decoder = json.JSONDecoder()
    position = text.find("{")
    while position >= 0:
        try:
            value, end = decoder.raw_decode(text, position)
        except (json.JSONDecodeError, RecursionError):
            value, end = None, -1
        if isinstance(value, dict) and all(name in value for name in required):
            return value, text[position:end]
        position = text.find("{", position + 1)
    return None
