"""scripting: shell scripts (easy: run one with an argument; medium: write a one-line script;
hard: write a script that counts matches, run it, save the output)."""

from __future__ import annotations

from termagent.tasks.families.base import PEOPLE, WORDS, Instance, name, sentence

NAME, CATEGORY, TAGS = "bash-script", "scripting", ["scripting", "bash"]

# (script body, what it does to its argument)
TRANSFORMS = {
    "upper": ('echo "$1" | tr a-z A-Z', lambda s: s.upper()),
    "reverse": ('echo "$1" | rev', lambda s: s[::-1]),
    "length": ('echo -n "$1" | wc -c', lambda s: str(len(s))),
    "double": ('echo "$1$1"', lambda s: s + s),
}

TESTS_OUT = '''
def test_output():
    assert Path(OUT).read_text().strip() == EXPECTED
'''

TESTS_SCRIPT = '''
def run(*args):
    assert os.stat(SCRIPT).st_mode & 0o100, f"{SCRIPT} is not executable"
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=10).stdout.strip()


def test_script():
    for arg, want in CASES.items():
        assert run(arg) == want, f"{SCRIPT} {arg}: expected {want!r}"
'''


def build(rng, difficulty):
    s, out = f"{name(rng)}.sh", f"{name(rng)}.txt"
    if difficulty == "easy":
        kind = rng.choice(sorted(TRANSFORMS))
        body, fn = TRANSFORMS[kind]
        arg = f"{rng.choice(WORDS)}{rng.randint(1, 99)}"
        files = {s: f"#!/bin/bash\n# {kind}\n{body}\n"}
        instruction = f"Run the script `/app/{s}` with the argument `{arg}` and save what it prints to `/app/{out}`."
        return Instance(instruction, files, [f"bash /app/{s} {arg} > /app/{out}"], TESTS_OUT,
                        {"OUT": f"/app/{out}", "EXPECTED": fn(arg)}, shape="bash SCRIPT ARGUMENT > OUTPUT")
    if difficulty == "medium":
        greeting = rng.choice(("Hello", "Welcome", "Hi", "Greetings", "Good morning", "Ahoy"))
        example = rng.choice(PEOPLE)
        instruction = (f"Write a bash script `/app/{s}` that prints `{greeting}, ` followed by its first argument "
                       f"(`/app/{s} {example}` prints `{greeting}, {example}`), and make it executable.")
        solve = [f"echo '#!/bin/bash' > /app/{s}", f"echo 'echo \"{greeting}, $1\"' >> /app/{s}", f"chmod +x /app/{s}"]
        cases = {p: f"{greeting}, {p}" for p in rng.sample(PEOPLE, 3)}
        files = {"NOTES.txt": f"Scripts of this machine live in /app ({rng.choice(WORDS)}).\n"}
        return Instance(instruction, files, solve, TESTS_SCRIPT, {"SCRIPT": f"/app/{s}", "CASES": cases})
    kw = rng.choice(WORDS)
    data = f"{name(rng)}.txt"
    pool = tuple(w for w in WORDS if kw not in w)
    lines = [sentence(rng, 5, avoid=tuple(w for w in WORDS if w not in pool)) for _ in range(rng.randint(6, 12))]
    hits = rng.randint(1, len(lines) - 1)
    for i in range(hits):
        lines[i] = f"{lines[i]} {kw}"
    rng.shuffle(lines)
    files = {data: "\n".join(lines) + "\n"}
    instruction = (f"Write an executable bash script `/app/{s}` that prints how many lines of the file given as its "
                   f"first argument contain `{kw}`. Run it on `/app/{data}` and save the output to `/app/{out}`.")
    solve = [f"echo '#!/bin/bash' > /app/{s}", f"echo 'grep -c {kw} \"$1\"' >> /app/{s}", f"chmod +x /app/{s}",
             f"/app/{s} /app/{data} > /app/{out}", f"cat /app/{out}"]
    tests = TESTS_OUT + TESTS_SCRIPT.replace("def test_script():\n    for arg, want in CASES.items():",
                                             "def test_script(tmp_path):\n    for text, want in CASES.items():\n"
                                             "        arg = tmp_path / \"probe.txt\"\n        arg.write_text(text)\n"
                                             "        arg = str(arg)")
    cases = {f"{kw} one\nnone\n{kw}\n": "2", "nothing here\n": "0", f"x {kw} y\n": "1"}
    return Instance(instruction, files, solve, tests,
                    {"OUT": f"/app/{out}", "EXPECTED": str(hits), "SCRIPT": f"/app/{s}", "CASES": cases})
