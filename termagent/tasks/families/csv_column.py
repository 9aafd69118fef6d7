"""data_formats/csv: columns of a CSV file (easy: cut one column; medium: sum by name; hard: group totals)."""

from __future__ import annotations

from termagent.tasks.families.base import CITIES, PEOPLE, Instance, name

NAME, CATEGORY, TAGS = "csv-column", "data_formats", ["data_formats", "csv", "awk", "cut"]

TESTS = '''
def test_output():
    assert Path(OUT).read_text().split() == EXPECTED
'''


def table(rng):
    cols = ["id", "name", "city", rng.choice(("units", "qty", "pieces")), rng.choice(("score", "points", "rank"))]
    order = cols[:]
    rng.shuffle(order)
    rows = []
    for i in range(rng.randint(6, 15)):
        row = {"id": str(100 + i), "name": rng.choice(PEOPLE), "city": rng.choice(CITIES[:6]),
               cols[3]: str(rng.randint(1, 90)), cols[4]: str(rng.randint(1, 9))}
        rows.append(row)
    text = ",".join(order) + "\n" + "".join(",".join(r[c] for c in order) + "\n" for r in rows)
    return order, rows, cols, text


def build(rng, difficulty):
    f, out = f"{name(rng)}.csv", f"{name(rng)}.txt"
    order, rows, cols, text = table(rng)
    files = {f: text}
    if difficulty == "easy":
        n = rng.randint(1, len(order))
        instruction = f"Write the values of column {n} of `/app/{f}`, without the header line, to `/app/{out}`."
        solve = [f"tail -n +2 /app/{f} | cut -d, -f{n} > /app/{out}"]
        expected = [r[order[n - 1]] for r in rows]
        shape = "tail -n +2 FILE | cut -d, -fCOLUMN > OUTPUT"
    elif difficulty == "medium":
        col = rng.choice(cols[3:])
        n = order.index(col) + 1
        instruction = f"Write the sum of the `{col}` column of `/app/{f}` to `/app/{out}`."
        solve = [f"head -1 /app/{f}", f"awk -F, 'NR > 1 {{s += ${n}}} END {{print s}}' /app/{f} > /app/{out}"]
        expected = [str(sum(int(r[col]) for r in rows))]
    else:
        col = rng.choice(cols[3:])
        n, g = order.index(col) + 1, order.index("city") + 1
        totals: dict[str, int] = {}
        for r in rows:
            totals[r["city"]] = totals.get(r["city"], 0) + int(r[col])
        instruction = (f"For each `city` in `/app/{f}`, compute the total of the `{col}` column. Write one line "
                       f"`<city>,<total>` per city, sorted by city, to `/app/{out}`.")
        solve = [f"head -1 /app/{f}",
                 f"awk -F, 'NR > 1 {{s[${g}] += ${n}}} END {{for (k in s) print k \",\" s[k]}}' /app/{f} | sort > /app/{out}",
                 f"cat /app/{out}"]
        expected = [f"{c},{t}" for c, t in sorted(totals.items())]
    return Instance(instruction, files, solve, TESTS, {"OUT": f"/app/{out}", "EXPECTED": expected},
                    shape=shape if difficulty == "easy" else "")
