"""file_ops: find files (easy: count by extension; medium: list by size; hard: find the largest, copy it)."""

from __future__ import annotations

from termagent.tasks.families.base import EXTS, WORDS, Instance, name, sentence, sha256

NAME, CATEGORY, TAGS = "find-files", "file_ops", ["file_ops", "find"]

TESTS_OUT = '''
def test_output():
    assert Path(OUT).read_text().split() == EXPECTED
'''

TESTS_COPY = '''
def test_copy():
    assert Path(OUT).is_file(), f"{OUT} is missing"
    assert hashlib.sha256(Path(OUT).read_bytes()).hexdigest() == DIGEST, "not a copy of the largest file"
'''


def tree(rng, d, n):
    files = {}
    subs = rng.sample(WORDS, 3)
    sizes = rng.sample(range(5, 60), n)  # distinct sentence lengths: distinct sizes
    for i in range(n):
        sub = rng.choice(["", *(f"{s}/" for s in subs)])
        files[f"{d}/{sub}{name(rng)}{i}.{rng.choice(EXTS[:5])}"] = sentence(rng, sizes[i]) + "\n"
    return files


def build(rng, difficulty):
    d, out = rng.choice(WORDS), f"{name(rng)}.txt"
    files = tree(rng, d, rng.randint(5, 10))
    if difficulty == "easy":
        ext = rng.choice([p.rsplit(".", 1)[1] for p in files])
        instruction = f"Write the number of `.{ext}` files under `/app/{d}` (subdirectories included) to `/app/{out}`."
        solve = [f"find /app/{d} -name '*.{ext}' | wc -l > /app/{out}"]
        return Instance(instruction, files, solve, TESTS_OUT,
                        {"OUT": f"/app/{out}", "EXPECTED": [str(sum(p.endswith(f".{ext}") for p in files))]},
                        shape="find DIRECTORY -name '*.EXT' | wc -l > OUTPUT")
    sizes = {p: len(t.encode()) for p, t in files.items()}
    if difficulty == "medium":
        k = sorted(sizes.values())[len(sizes) // 2]
        instruction = (f"Write the paths of the files under `/app/{d}` that are larger than {k} bytes, sorted, one "
                       f"per line, to `/app/{out}`.")
        solve = [f"find /app/{d} -type f -size +{k}c | sort > /app/{out}", f"cat /app/{out}"]
        return Instance(instruction, files, solve, TESTS_OUT,
                        {"OUT": f"/app/{out}", "EXPECTED": sorted(f"/app/{p}" for p, s in sizes.items() if s > k)})
    largest = max(sizes, key=sizes.get)
    target = f"{name(rng)}.{largest.rsplit('.', 1)[1]}"
    instruction = f"Find the largest file under `/app/{d}` (subdirectories included) and copy it to `/app/{target}`."
    solve = [f"find /app/{d} -type f -printf '%s %p\\n' | sort -n | tail -3", f"cp /app/{largest} /app/{target}",
             f"ls -l /app/{target}"]
    return Instance(instruction, files, solve, TESTS_COPY, {"OUT": f"/app/{target}", "DIGEST": sha256(files[largest])})
