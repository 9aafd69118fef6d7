"""text_processing: find lines with a keyword in logs (easy: grep -c; medium: grep | sort -u; hard: per file)."""

from __future__ import annotations

from termagent.tasks.families.base import LEVELS, WORDS, Instance, name, words

NAME, CATEGORY, TAGS = "grep-count", "text_processing", ["text_processing", "grep"]

TESTS_COUNT = '''
def test_count():
    text = Path(OUT).read_text()
    assert text.strip() == str(EXPECTED), f"expected {EXPECTED}, got {text.strip()!r}"
'''

TESTS_LINES = '''
def _key(line):
    return [c for c in line.lower() if c.isalnum()]


def test_lines():
    lines = Path(OUT).read_text().splitlines()
    assert sorted(set(lines)) == sorted(EXPECTED), "not the matching lines (each once)"
    assert len(lines) == len(EXPECTED), "duplicates left"


def test_sorted():
    lines = Path(OUT).read_text().splitlines()
    assert lines == sorted(lines) or lines == sorted(lines, key=_key), "not sorted"
'''

TESTS_TABLE = '''
def test_table():
    lines = Path(OUT).read_text().splitlines()
    assert [line.split() for line in lines] == [row.split() for row in EXPECTED]
'''


def log_lines(rng, kw, n, hits):
    pool = tuple(w for w in WORDS if kw not in w)
    comps = words(rng, 4, pool)
    lines = []
    for i in range(n):
        comp = kw if i < hits else rng.choice(comps)
        lines.append(f"2024-0{rng.randint(1, 9)}-{rng.randint(10, 28)} {rng.choice(LEVELS)} {comp}: "
                     f"{rng.choice(pool)} {rng.choice(('started', 'failed', 'retry', 'done'))}")
    rng.shuffle(lines)
    return lines


def build(rng, difficulty):
    kw = rng.choice(WORDS)
    out = f"{name(rng)}.txt"
    if difficulty in ("easy", "medium"):
        f = f"{name(rng)}.log"
        n = rng.randint(8, 20)
        hits = rng.randint(1, n // 2)
        lines = log_lines(rng, kw, n, hits)
        if difficulty == "medium":
            lines += rng.sample([line for line in lines if kw in line], 1)  # one duplicate
        files = {f: "\n".join(lines) + "\n"}
        matching = [line for line in lines if kw in line]
        if difficulty == "easy":
            instruction = f"Count the lines of `/app/{f}` that contain `{kw}` and write the number to `/app/{out}`."
            solve = [f"grep -c {kw} /app/{f} > /app/{out}"]
            return Instance(instruction, files, solve, TESTS_COUNT, {"OUT": f"/app/{out}", "EXPECTED": len(matching)},
                            shape="grep -c WORD FILE > OUTPUT")
        instruction = (f"Write the lines of `/app/{f}` that contain `{kw}`, sorted and without duplicates, "
                       f"to `/app/{out}`.")
        solve = [f"grep {kw} /app/{f} | sort -u > /app/{out}", f"cat /app/{out}"]
        return Instance(instruction, files, solve, TESTS_LINES,
                        {"OUT": f"/app/{out}", "EXPECTED": sorted(set(matching))})
    d = rng.choice(WORDS)
    files, rows = {}, []
    for i in range(rng.randint(3, 5)):
        f = f"{name(rng)}{i}.log"
        n = rng.randint(4, 12)
        hits = rng.randint(1, n - 1)
        files[f"{d}/{f}"] = "\n".join(log_lines(rng, kw, n, hits)) + "\n"
        rows.append(f"{f} {hits}")
    rows.sort()
    instruction = (f"For each `.log` file in `/app/{d}`, count the lines that contain `{kw}`. Write one line "
                   f"`<file name> <count>` per file, sorted by file name, to `/app/{out}`.")
    solve = [f"cd /app/{d}", f'for f in *.log; do echo "$f $(grep -c {kw} $f)"; done > /app/{out}',
             f"cat /app/{out}"]
    return Instance(instruction, files, solve, TESTS_TABLE, {"OUT": f"/app/{out}", "EXPECTED": rows})
