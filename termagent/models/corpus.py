"""The text the tiny model's tokenizer is trained on: every text file of the task directories, plus the
Terminus prompt and Terminus-style JSON replies built from the tasks' own solutions, so that keystrokes,
JSON punctuation, escapes and newlines get tokens of their own."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

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
    for start in range(0, len(commands), 3):
        chunk = commands[start : start + 3]
        reply = {
            "analysis": f"The terminal shows the output of the previous step ({start} commands run so far).",
            "plan": "Run the next commands of the solution and check their output.",
            "commands": [{"keystrokes": c + "\n", "duration": 0.1} for c in chunk],
            "task_complete": start + 3 >= len(commands),
        }
        texts.append(json.dumps(reply, indent=2, ensure_ascii=False))
        texts.append("".join(f"{SHELL_PROMPT}{c}\n" for c in chunk) + SHELL_PROMPT)
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
