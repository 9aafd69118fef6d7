"""permissions: file modes (easy: chmod +x one script; medium: a mode on a glob; hard: by content)."""

from __future__ import annotations

from termagent.tasks.families.base import EXTS, WORDS, Instance, name, sentence

NAME, CATEGORY, TAGS = "chmod-mode", "permissions", ["permissions", "chmod"]

TESTS = '''
def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_modes():
    for path, want in MODES.items():
        assert mode(path) == want, f"{path}: {oct(mode(path))}, expected {oct(want)}"
'''

TESTS_EXEC = '''
def test_executable():
    assert os.stat(SCRIPT).st_mode & 0o100, f"{SCRIPT} is not executable"
    assert subprocess.run([SCRIPT], capture_output=True, text=True).stdout.strip() == OUTPUT


def test_others_unchanged():
    for path in OTHERS:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644, f"{path} changed mode"
'''


def script(rng):
    word = rng.choice(WORDS)
    return f"#!/bin/bash\necho {word}\n", word


def build(rng, difficulty):
    d = rng.choice(WORDS)
    if difficulty == "easy":
        s = f"{name(rng)}.sh"
        body, word = script(rng)
        files = {f"{d}/{s}": body}
        for i in range(rng.randint(1, 3)):
            files[f"{d}/{name(rng)}{i}.{rng.choice(EXTS)}"] = sentence(rng) + "\n"
        instruction = f"Make the script `/app/{d}/{s}` executable."
        others = [f"/app/{p}" for p in files if p != f"{d}/{s}"]
        return Instance(instruction, files, [f"chmod +x /app/{d}/{s}"], TESTS_EXEC,
                        {"SCRIPT": f"/app/{d}/{s}", "OUTPUT": word, "OTHERS": others}, shape="chmod +x FILE")
    if difficulty == "medium":
        ext, other = rng.sample(EXTS, 2)
        mode = rng.choice((0o600, 0o640, 0o400, 0o660, 0o444, 0o750))
        files, modes = {}, {}
        for i in range(rng.randint(2, 4)):
            files[f"{d}/{name(rng)}{i}.{ext}"] = sentence(rng) + "\n"
        modes = {f"/app/{p}": mode for p in files}
        for i in range(rng.randint(1, 2)):
            p = f"{d}/{name(rng)}{i}.{other}"
            files[p] = sentence(rng) + "\n"
            modes[f"/app/{p}"] = 0o644
        instruction = f"Set the mode of every `.{ext}` file in `/app/{d}` to `{mode:o}`. Leave the other files alone."
        return Instance(instruction, files, [f"chmod {mode:o} /app/{d}/*.{ext}", f"ls -l /app/{d}"], TESTS, {"MODES": modes})
    other_mode = rng.choice((0o600, 0o640, 0o644, 0o444))
    files, modes = {}, {}
    for i in range(rng.randint(4, 6)):
        sub = rng.choice(("", "bin/", "lib/"))
        is_script = i < 2 or rng.random() < 0.4
        p = f"{d}/{sub}{name(rng)}{i}{rng.choice(('.sh', '', '.txt'))}"
        files[p] = script(rng)[0] if is_script else sentence(rng) + "\n"
        modes[f"/app/{p}"] = 0o755 if is_script else other_mode
    instruction = (f"Under `/app/{d}` (subdirectories included), give every file whose first line starts with `#!` "
                   f"mode `755`, and every other file mode `{other_mode:o}`.")
    solve = [f"find /app/{d} -type f -exec chmod {other_mode:o} {{}} +",
             f"grep -rl '^#!' /app/{d} | xargs chmod 755", f"ls -lR /app/{d}"]
    return Instance(instruction, files, solve, TESTS, {"MODES": modes})
