"""The text the tiny model's tokenizer is trained on: every text file of the task directories, plus the
Terminus prompt and Terminus-style JSON replies built from the tasks' own solutions, so that keystrokes,
JSON punctuation, escapes and newlines get tokens of their own."""

from __future__ import annotations

import hashlib
from pathlib import Path

from termagent.protocol import AgentResponse, Command, render_response
from termagent.protocol.prompt import render_initial_prompt

MAX_FILE_BYTES = 256 * 1024  # data blobs beyond this say nothing about the language of the tasks
SHELL_PROMPT = "root@sandbox:/app# "
# The chat template's role names, so that "assistant" is one token, as in a real vocabulary.
CHAT_ROLES = "system\nuser\nassistant\n" * 2


def read_text_files(root: Path) -> list[str]:
    """Every UTF-8 text file under `root`, in path order (binary files are skipped)."""
    texts = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        raw = path.read_bytes()
        if b"\x00" in raw:
            continue
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return texts


def solution_commands(solve_sh: Path) -> list[str]:
    """Shell lines of a solution script, comments and the shebang left out."""
    lines = solve_sh.read_text(encoding="utf-8", errors="replace").splitlines()
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def terminus_texts(task_dir: Path) -> list[str]:
    """The first prompt of the task and a scripted reply per chunk of its solution, as the agent sees them."""
    texts = []
    instruction = task_dir / "instruction.md"
    if instruction.is_file():
        texts.append(render_initial_prompt(instruction.read_text(encoding="utf-8"), SHELL_PROMPT))
    solve = task_dir / "solution" / "solve.sh"
    commands = solution_commands(solve) if solve.is_file() else []
    # The replies exactly as the demos render them (protocol.render_response, the demos' templated
    # analysis/plan), so the JSON skeleton of a reply is a handful of tokens.
    for index, command in enumerate(commands):
        reply = AgentResponse(analysis="Fresh shell, nothing done yet." if index == 0 else "The previous commands ran.",
                              plan="Run the next step.", task_complete=False,
                              commands=(Command(keystrokes=command + "\n", duration=0.1),))
        texts.append(render_response(reply))
    for start in range(0, len(commands), 3):
        chunk = commands[start : start + 3]
        texts.append("".join(f"{SHELL_PROMPT}{c}\n" for c in chunk) + SHELL_PROMPT)
    texts.append(render_response(AgentResponse(analysis="Every step of the task is done.",
                                               plan="Mark the task complete.", commands=(), task_complete=True)))
    return texts


def build_corpus(task_dirs: list[Path]) -> list[str]:
    """The tokenizer corpus, in a fixed order (same tasks -> same corpus -> same tokenizer)."""
    texts: list[str] = [CHAT_ROLES]
    for root in task_dirs:
        root = Path(root)
        if not root.is_dir():
            raise FileNotFoundError(f"task directory {root} does not exist")
        texts += read_text_files(root)
        for task_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            texts += terminus_texts(task_dir)
    if len(texts) == 1:
        raise ValueError(f"no text found under {[str(d) for d in task_dirs]} to train a tokenizer on")
    return texts


def corpus_hash(texts: list[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()
