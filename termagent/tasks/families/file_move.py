"""file_ops: rename or move files (easy: one mv; medium: mkdir + glob mv; hard: move by content)."""

from __future__ import annotations

from termagent.tasks.families.base import EXTS, Instance, name, sentence, sha256, words

NAME, CATEGORY, TAGS = "file-move", "file_ops", ["file_ops", "mv"]

TESTS = '''
def test_moved():
    for path, digest in MOVED.items():
        assert Path(path).is_file(), f"{path} is missing"
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest, f"{path} has other contents"


def test_sources_gone():
    for path in GONE:
        assert not Path(path).exists(), f"{path} is still there"
'''


def build(rng, difficulty):
    ext, other = rng.sample(EXTS, 2)
    if difficulty == "easy":
        a, b = name(rng), name(rng)
        while b == a:
            b = name(rng)
        files = {f"{a}.{ext}": sentence(rng) + "\n", f"{name(rng)}.{other}": sentence(rng) + "\n"}
        files.setdefault(f"{b}.{other}", sentence(rng) + "\n")
        instruction = f"Rename the file `/app/{a}.{ext}` to `/app/{b}.{ext}`."
        solve = [f"mv /app/{a}.{ext} /app/{b}.{ext}"]
        moved = {f"/app/{b}.{ext}": sha256(files[f"{a}.{ext}"])}
        gone = [f"/app/{a}.{ext}"]
    elif difficulty == "medium":
        src, dst = words(rng, 2)
        files, moved, gone = {}, {}, []
        for i in range(rng.randint(2, 4)):
            stem = f"{name(rng)}{i}"
            files[f"{src}/{stem}.{ext}"] = sentence(rng) + "\n"
            moved[f"/app/{dst}/{stem}.{ext}"] = sha256(files[f"{src}/{stem}.{ext}"])
            gone.append(f"/app/{src}/{stem}.{ext}")
        for i in range(rng.randint(1, 3)):
            files[f"{src}/{name(rng)}{i}.{other}"] = sentence(rng) + "\n"
        instruction = (f"Create the directory `/app/{dst}` and move every `.{ext}` file of `/app/{src}` into it. "
                       "Leave the other files where they are.")
        solve = [f"mkdir -p /app/{dst}", f"mv /app/{src}/*.{ext} /app/{dst}/"]
    else:
        kw, src, dst = words(rng, 3)
        files, moved, gone = {}, {}, []
        for i in range(rng.randint(5, 7)):
            stem = f"{name(rng)}{i}.{rng.choice(EXTS)}"
            hit = i < 2 or rng.random() < 0.4
            text = sentence(rng, 5, avoid=(kw,))
            if hit:
                parts = text.split()
                parts.insert(rng.randint(0, len(parts)), kw)
                text = " ".join(parts)
                moved[f"/app/{dst}/{stem}"] = sha256(text + "\n")
                gone.append(f"/app/{src}/{stem}")
            files[f"{src}/{stem}"] = text + "\n"
        instruction = (f"Move every file of `/app/{src}` that contains the word `{kw}` into a new directory "
                       f"`/app/{dst}`. Leave the other files where they are.")
        solve = [f"grep -lw {kw} /app/{src}/*", f"mkdir -p /app/{dst}",
                 f"grep -lw {kw} /app/{src}/* | xargs -I{{}} mv {{}} /app/{dst}/", f"ls /app/{dst}"]
    untouched = [p for p in files if f"/app/{p}" not in gone]
    return Instance(instruction, files, solve, TESTS, {"MOVED": moved, "GONE": gone}, untouched,
                    shape="mv OLD NEW" if difficulty == "easy" else "")
