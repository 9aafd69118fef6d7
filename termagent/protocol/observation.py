"""The user messages after the first: what the terminal printed, what was wrong with the last reply,
the completion question, and the notes for a reply that was cut off or a context that overflowed.
Rendered here for the agent loop and for every data builder alike."""

from __future__ import annotations

from collections.abc import Sequence

from termagent import truncate

MAX_OUTPUT_BYTES = 10_000  # terminal output shown per turn; head and tail are kept


def limit_output(text: str, max_bytes: int = MAX_OUTPUT_BYTES) -> str:
    """Keep the first and last max_bytes/2 bytes of `text`, with a marker saying how much was left out."""
    return truncate.limit_output(text, max_bytes)


def format_terminal_output(text: str, incremental: bool) -> str:
    """Label what the terminal shows: the new output since the last turn, or (when that cannot be told
    apart, e.g. after `clear` or in a full-screen program) the whole visible screen."""
    if incremental:
        if text.strip():
            return f"New Terminal Output:\n{text}"
        return "The commands finished without new output.\n\nCurrent Terminal Screen:\n" + text
    return f"Current Terminal Screen:\n{text}"


def format_parse_error(errors: Sequence[str], warnings: Sequence[str] = ()) -> str:
    lines = ["Your previous response could not be used, so none of its commands were run:"]
    lines += [f"ERROR: {e}" for e in errors]
    lines += [f"WARNING: {w}" for w in warnings]
    lines.append("\nPlease fix these problems and answer with one valid JSON object in the required format.")
    return "\n".join(lines)


def format_confirmation(terminal_output: str) -> str:
    return (
        f"Current terminal state:\n{terminal_output}\n\n"
        "Are you sure you want to mark the task complete? This will grade your solution and you will not "
        "be able to change anything afterwards. If you are sure, answer again with \"task_complete\": true."
    )


def format_output_cut(max_output_tokens: int | None, warnings: Sequence[str] = ()) -> str:
    limit = f"{max_output_tokens} tokens" if max_output_tokens else "the maximum output length"
    text = (
        f"ERROR: none of the commands in your previous response were run: it was cut off at {limit}. "
        f"Keep each response under {limit}; split long work (long files, many commands) across turns."
    )
    if warnings:
        text += "\n\nParser warnings on the cut-off response:\n" + "\n".join(f"- {w}" for w in warnings)
    return text


def format_context_exceeded(context_limit: int | None, strategy: str) -> str:
    limit = f"the context window ({context_limit} tokens)" if context_limit else "the context window"
    how = ("your earlier turns were replaced by a summary" if strategy == "summarize"
           else "your oldest turns were removed")
    return (f"ERROR: no response was produced and nothing was run: the conversation exceeded {limit}, "
            f"so {how}. Continue the task from the current state.")


SUMMARY_REQUEST = (
    "The conversation is about to exceed the context window, so your earlier turns will be replaced by "
    "a summary that you write now. Do not answer in JSON this time. Summarize, in plain text:\n"
    "1. The commands you ran and what you learned from each.\n"
    "2. Important facts: file paths, settings, error messages, the state of the system.\n"
    "3. Problems you ran into and how you solved them (or did not).\n"
    "4. Exactly where you are now and what remains to be done.\n"
    "Be complete: after this, the summary is all you will know about your earlier work."
)


def format_summary_handoff(summary: str) -> str:
    """Appended to the first user message once earlier turns are replaced by a summary."""
    return ("\n\nYour earlier turns were removed to fit the context window. Your own summary of them:\n"
            f"{summary.strip()}\n\nContinue the task from where you left off, in the required JSON format.")


def format_observation(
    terminal_output: str = "",
    *,
    incremental: bool = True,
    warnings: Sequence[str] = (),
    errors: Sequence[str] = (),
    confirm_completion: bool = False,
    output_cut: bool = False,
    max_output_tokens: int | None = None,
    context_exceeded: bool = False,
    context_limit: int | None = None,
    context_strategy: str = "summarize",
    max_bytes: int = MAX_OUTPUT_BYTES,
) -> str:
    """The next user message after one turn. Precedence: nothing ran (cut-off reply, context overflow,
    parse errors) > completion question > the new terminal output (with the parser's warnings first)."""
    if context_exceeded:
        return format_context_exceeded(context_limit, context_strategy)
    if output_cut:
        return format_output_cut(max_output_tokens, warnings)
    if errors:
        return format_parse_error(errors, warnings)
    shown = format_terminal_output(limit_output(terminal_output, max_bytes), incremental)
    if confirm_completion:
        return format_confirmation(shown)
    if warnings:
        notes = "\n".join(f"- {w}" for w in warnings)
        return f"Your previous response had warnings:\n{notes}\n\n{shown}"
    return shown
