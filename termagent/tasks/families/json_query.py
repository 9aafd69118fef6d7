"""data_formats/json: read JSON with jq (easy: one field; medium: select; hard: find the key, then sum)."""

from __future__ import annotations

import json

from termagent.tasks.families.base import CITIES, PEOPLE, WORDS, Instance, name, words

NAME, CATEGORY, TAGS = "json-query", "data_formats", ["data_formats", "json", "jq"]

TESTS_VALUE = '''
def test_value():
    assert Path(OUT).read_text().strip() == EXPECTED
'''

TESTS_LINES = '''
def test_lines():
    assert Path(OUT).read_text().split() == EXPECTED
'''


def records(rng, n, num):
    rows = []
    for i in range(n):
        rows.append({"id": i + 1, "name": rng.choice(PEOPLE), "city": rng.choice(CITIES[:5]),
                     num: rng.randint(1, 500), "status": rng.choice(("open", "closed", "held"))})
    return rows


def build(rng, difficulty):
    f, out = f"{name(rng)}.json", f"{name(rng)}.txt"
    if difficulty == "easy":
        keys = words(rng, rng.randint(4, 7))
        obj = {k: rng.choice((rng.randint(1, 9999), rng.choice(WORDS))) for k in keys}
        key = rng.choice(keys)
        files = {f: json.dumps(obj, indent=2) + "\n"}
        instruction = f"Write the value of the field `{key}` of `/app/{f}` to `/app/{out}`."
        solve = [f"jq -r .{key} /app/{f} > /app/{out}"]
        return Instance(instruction, files, solve, TESTS_VALUE, {"OUT": f"/app/{out}", "EXPECTED": str(obj[key])},
                        shape="jq -r .FIELD FILE > OUTPUT")
    num = rng.choice(("amount", "weight", "price", "score", "count"))
    rows = records(rng, rng.randint(6, 14), num)
    if difficulty == "medium":
        city = rng.choice([r["city"] for r in rows])
        files = {f: json.dumps(rows, indent=1) + "\n"}
        instruction = (f"Write the `name` of every record in `/app/{f}` whose `city` is `{city}`, one per line, "
                       f"in file order, to `/app/{out}`.")
        solve = [f"jq -r '.[] | select(.city == \"{city}\") | .name' /app/{f} > /app/{out}", f"cat /app/{out}"]
        return Instance(instruction, files, solve, TESTS_LINES,
                        {"OUT": f"/app/{out}", "EXPECTED": [r["name"] for r in rows if r["city"] == city]})
    top = rng.choice(WORDS)
    status = rng.choice([r["status"] for r in rows])
    files = {f: json.dumps({"generated": "2024-05-01", top: rows}, indent=1) + "\n"}
    total = sum(r[num] for r in rows if r["status"] == status)
    instruction = (f"`/app/{f}` holds a list of records under one top-level key. Write the total `{num}` of the "
                   f"records whose `status` is `{status}` to `/app/{out}`.")
    solve = [f"jq keys /app/{f}", f"jq '[.{top}[] | select(.status == \"{status}\") | .{num}] | add' /app/{f} > /app/{out}",
             f"cat /app/{out}"]
    return Instance(instruction, files, solve, TESTS_VALUE, {"OUT": f"/app/{out}", "EXPECTED": str(total)})
