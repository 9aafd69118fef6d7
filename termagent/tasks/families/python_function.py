"""python: small Python programs (easy: run one on a data file; medium: write a one-function module;
hard: read a module, fix its bug, then use it)."""

from __future__ import annotations

from termagent.tasks.families.base import WORDS, Instance, name

NAME, CATEGORY, TAGS = "python-function", "python", ["python", "scripting"]

PROGRAMS = {  # name -> (program source, what it computes from the numbers)
    "sum": ("print(sum(nums))", sum),
    "max": ("print(max(nums))", max),
    "min": ("print(min(nums))", min),
    "count": ("print(len(nums))", len),
    "range": ("print(max(nums) - min(nums))", lambda v: max(v) - min(v)),
}
OPS = {  # operator -> (words for the instruction, python)
    "+": ("the sum of `a` and `b`", lambda a, b: a + b),
    "-": ("`a` minus `b`", lambda a, b: a - b),
    "*": ("the product of `a` and `b`", lambda a, b: a * b),
    "%": ("the remainder of `a` divided by `b`", lambda a, b: a % b),
}

TESTS_OUT = '''
def test_output():
    assert Path(OUT).read_text().strip() == EXPECTED
'''

TESTS_FUNC = '''
import importlib.util


def load():
    spec = importlib.util.spec_from_file_location("module_under_test", MODULE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, FUNCTION)


def test_function():
    fn = load()
    for (a, b), want in CASES:
        assert fn(a, b) == want, f"{FUNCTION}({a}, {b}) should be {want}"
'''


def build(rng, difficulty):
    mod, out = f"{name(rng)}.py", f"{name(rng)}.txt"
    if difficulty == "easy":
        kind = rng.choice(sorted(PROGRAMS))
        src, fn = PROGRAMS[kind]
        nums = [rng.randint(1, 999) for _ in range(rng.randint(4, 12))]
        data = f"{name(rng)}.txt"
        program = f"import sys\n\n# {kind} of the numbers in a file\nnums = [int(x) for x in open(sys.argv[1]).read().split()]\n{src}\n"
        files = {mod: program, data: "\n".join(map(str, nums)) + "\n"}
        instruction = f"Run the Python program `/app/{mod}` on `/app/{data}` and write what it prints to `/app/{out}`."
        return Instance(instruction, files, [f"python3 /app/{mod} /app/{data} > /app/{out}"], TESTS_OUT,
                        {"OUT": f"/app/{out}", "EXPECTED": str(fn(nums))}, shape="python3 PROGRAM DATA > OUTPUT")
    op = rng.choice(sorted(OPS))
    words_, fn = OPS[op]
    func = f"{rng.choice(WORDS)}_{rng.choice(('value', 'calc', 'combine', 'apply'))}"
    cases = [((a, b), fn(a, b)) for a, b in ((rng.randint(10, 99), rng.randint(1, 9)) for _ in range(4))]
    consts = {"MODULE": f"/app/{mod}", "FUNCTION": func, "CASES": cases, "OUT": f"/app/{out}"}
    if difficulty == "medium":
        files = {"NOTES.txt": f"Python modules of project {rng.choice(WORDS)} live in /app.\n"}
        instruction = f"Create the Python module `/app/{mod}` defining a function `{func}(a, b)` that returns {words_}."
        solve = [f"echo 'def {func}(a, b):' > /app/{mod}", f"echo '    return a {op} b' >> /app/{mod}"]
        return Instance(instruction, files, solve, TESTS_FUNC, consts)
    wrong = rng.choice([o for o in sorted(OPS) if o != op])
    files = {mod: f"def helper(x):\n    return x\n\n\ndef {func}(a, b):\n    return a {wrong} b\n"}
    a, b = rng.randint(10, 99), rng.randint(1, 9)
    consts["EXPECTED"] = str(fn(a, b))
    instruction = (f"The function `{func}` in `/app/{mod}` has a bug: it should return {words_}. Fix it, then write "
                   f"the value of `{func}({a}, {b})` to `/app/{out}`.")
    stem = mod[:-3]
    pattern = "\\*" if wrong == "*" else wrong  # sed's regex: a literal star
    solve = [f"cat /app/{mod}", f"sed -i 's/return a {pattern} b/return a {op} b/' /app/{mod}",
             "cd /app", f"python3 -c 'from {stem} import {func}; print({func}({a}, {b}))' > /app/{out}", f"cat /app/{out}"]
    return Instance(instruction, files, solve, TESTS_FUNC + TESTS_OUT, consts, untouched=[])
