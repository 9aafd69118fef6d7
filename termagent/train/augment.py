"""Entity renaming: copies of a verified conversation with its names consistently replaced.

The generated task families draw every file, directory and content word from shared pools
(`termagent.tasks.families.base`: WORDS, CITIES, PEOPLE, and two-digit numbers in `word_NN` stems). A
consistent bijection of each pool, applied to every message of a demonstration (instruction, keystrokes,
terminal output), gives another demonstration of the same procedure on other names: `grep -c basil
/app/violet_21.log > /app/maple_48.txt` becomes `grep -c quill /app/dune_63.log > /app/iris_17.txt`, and the
file it read is renamed the same way in the output the terminal showed. A model that memorised the handful of
names of its ~300 demos cannot predict the renamed keystrokes; one that copies them from the task text can.
That is the skill a random-init model lacks (the embedded run measured it: the warmup wrote a constant file
name whatever the task said), so the warmup and SFT train on renamed copies (`SFTParams.rename_copies`).

What a bijection keeps: every equality between names (the same file is the same file everywhere), counts
(grep sees the same lines), which names differ. What it may change: alphabetical orders printed by `ls` or
`sort` (the transcript keeps the order the original run printed). Words of the fixed protocol text (the
first message before its "Task:") are never renamed, so the format the model learns is untouched.

Measured (issue 9): on the embedded warmup, renamed copies replaced the one memorised file name by random
pool names, not by the task's; the random-init tiny model did not learn to copy (scripts/copy_probe.py).
"""

from __future__ import annotations

import random
import re
from functools import lru_cache

from termagent.names import CITIES, PEOPLE, WORDS

NUMBERS = tuple(str(n) for n in range(10, 100))  # the `_NN` of `word_NN` stems (families.base.name)


POOLS = (WORDS, CITIES, PEOPLE)


@lru_cache(maxsize=1)
def name_pattern() -> re.Pattern:
    """A pool word not inside a longer identifier word (letters on either side), optionally with its `_NN`."""
    words = sorted({w for pool in POOLS for w in pool}, key=len, reverse=True)
    return re.compile(r"(?<![A-Za-z])(" + "|".join(words) + r")(?:_(\d\d)(?!\d))?(?![A-Za-z])")


def _fixed_words(conversation: list[dict]) -> set[str]:
    """Words of the first message's fixed part (the protocol text before the task): never renamed."""
    first = conversation[0]["content"] if conversation else ""
    fixed = first.split("\nTask:\n", 1)[0] if "\nTask:\n" in first else ""
    return set(re.findall(r"[a-z]+", fixed.lower()))


def random_renaming(rng: random.Random, fixed: set[str] = frozenset()) -> tuple[dict[str, str], dict[str, str]]:
    """One bijection per pool of words (the `fixed` ones map to themselves), and one of the stem numbers."""
    words: dict[str, str] = {}
    for pool in POOLS:
        movable = [w for w in pool if w not in fixed]
        shuffled = list(movable)
        rng.shuffle(shuffled)
        words.update(zip(movable, shuffled))
        words.update((w, w) for w in pool if w in fixed)
    numbers = list(NUMBERS)
    rng.shuffle(numbers)
    return words, dict(zip(NUMBERS, numbers))


def rename_text(text: str, words: dict[str, str], numbers: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        word, number = m.group(1), m.group(2)
        return words[word] + (f"_{numbers.get(number, number)}" if number is not None else "")

    return name_pattern().sub(sub, text)


def entity_names(text: str) -> set[str]:
    """The pool names `text` mentions (`violet_21`, `basil`): what a renaming replaces."""
    return {m.group(0) for m in name_pattern().finditer(text)}


def rename_conversation(conversation: list[dict], rng: random.Random) -> list[dict]:
    """A copy of `conversation` with every pool name replaced through one random bijection."""
    words, numbers = random_renaming(rng, _fixed_words(conversation))
    return [{**m, "content": rename_text(m["content"], words, numbers)} for m in conversation]


def with_renamed_copies(conversations: list[list[dict]], copies: int, seed: int) -> list[list[dict]]:
    """The conversations followed by `copies` renamed copies of each (a fresh bijection per copy)."""
    if copies < 0:
        raise ValueError(f"rename_copies must be >= 0, got {copies}")
    rng = random.Random(seed)
    out = list(conversations)
    for _ in range(copies):
        out.extend(rename_conversation(c, rng) for c in conversations)
    return out
