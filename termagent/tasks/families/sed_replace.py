"""text_processing: replace a word in files (easy: one file; medium: a glob; hard: find the files first)."""

from __future__ import annotations

from termagent.tasks.families.base import EXTS, WORDS, Instance, name, words

NAME, CATEGORY, TAGS = "sed-replace", "text_processing", ["text_processing", "sed"]

TESTS = '''
def test_replaced():
    for path, text in EXPECTED.items():
        assert Path(path).read_text() == text, f"{path}: not the expected contents"
'''

TESTS_LIST = TESTS + '''

def test_list():
    assert Path(OUT).read_text().split() == sorted(EXPECTED), "not the sorted list of changed files"
'''


def text_with(rng, old, pool, hits):
    lines = []
    for i in range(rng.randint(2, 4)):
        parts = [rng.choice(pool) for _ in range(rng.randint(3, 6))]
        if i < hits:
            parts.insert(rng.randint(0, len(parts)), old)
        lines.append(" ".join(parts))
    rng.shuffle(lines)
    return "\n".join(lines) + "\n"


def build(rng, difficulty):
    old = rng.choice(WORDS)
    pool = tuple(w for w in WORDS if old not in w)
    new = rng.choice(pool)
    pool = tuple(w for w in pool if new not in w and w not in new)
    if difficulty == "easy":
        f = f"{name(rng)}.{rng.choice(EXTS)}"
        files = {f: text_with(rng, old, pool, rng.randint(1, 3))}
        instruction = f"Replace every occurrence of `{old}` with `{new}` in `/app/{f}`."
        solve = [f"sed -i 's/{old}/{new}/g' /app/{f}"]
        expected = {f"/app/{f}": files[f].replace(old, new)}
        return Instance(instruction, files, solve, TESTS, {"EXPECTED": expected}, untouched=[],
                        shape="sed -i 's/OLD/NEW/g' FILE")
    if difficulty == "medium":
        d = rng.choice(WORDS)
        ext, other = rng.sample(EXTS, 2)
        files, expected = {}, {}
        for i in range(rng.randint(2, 4)):
            f = f"{d}/{name(rng)}{i}.{ext}"
            files[f] = text_with(rng, old, pool, rng.randint(1, 2))
            expected[f"/app/{f}"] = files[f].replace(old, new)
        for i in range(rng.randint(1, 2)):
            files[f"{d}/{name(rng)}{i}.{other}"] = text_with(rng, old, pool, 1)
        instruction = f"Replace every occurrence of `{old}` with `{new}` in every `.{ext}` file of `/app/{d}`."
        solve = [f"sed -i 's/{old}/{new}/g' /app/{d}/*.{ext}", f"grep -c {new} /app/{d}/*.{ext}"]
        untouched = [p for p in files if f"/app/{p}" not in expected]
        return Instance(instruction, files, solve, TESTS, {"EXPECTED": expected}, untouched)
    d, sub = words(rng, 2)
    out = f"{name(rng)}.txt"
    files, expected = {}, {}
    for i in range(rng.randint(4, 6)):
        f = f"{d}/{sub + '/' if i % 2 else ''}{name(rng)}{i}.{rng.choice(EXTS)}"
        hit = i < 2 or rng.random() < 0.4
        files[f] = text_with(rng, old, pool, 1 if hit else 0)
        if hit:
            expected[f"/app/{f}"] = files[f].replace(old, new)
    instruction = (f"Some files under `/app/{d}` (subdirectories included) mention `{old}`. Replace it with "
                   f"`{new}` in those files, and write their paths, sorted, one per line, to `/app/{out}`.")
    solve = [f"grep -rl {old} /app/{d} | sort > /app/{out}", f"xargs sed -i 's/{old}/{new}/g' < /app/{out}",
             f"grep -rc {new} /app/{d}"]
    untouched = [p for p in files if f"/app/{p}" not in expected]
    return Instance(instruction, files, solve, TESTS_LIST, {"EXPECTED": expected, "OUT": f"/app/{out}"}, untouched)
