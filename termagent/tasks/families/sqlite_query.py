"""data_formats/sqlite: load an SQL script and query it with sqlite3 (easy: load; medium: load + count;
hard: find the table, then a grouped query)."""

from __future__ import annotations

from termagent.tasks.families.base import CITIES, PEOPLE, WORDS, Instance, name

NAME, CATEGORY, TAGS = "sqlite-query", "data_formats", ["data_formats", "sqlite", "sql"]

TESTS_DB = '''
import sqlite3


def test_database():
    con = sqlite3.connect(DB)
    rows = con.execute(f"SELECT * FROM {TABLE} ORDER BY id").fetchall()
    assert [list(r) for r in rows] == ROWS
'''

TESTS_OUT = TESTS_DB + '''

def test_output():
    assert Path(OUT).read_text().split() == EXPECTED
'''


def build(rng, difficulty):
    table, stem = rng.choice(WORDS), name(rng)
    db, script, out = f"{stem}.db", f"{name(rng)}.sql", f"{name(rng)}.txt"
    cities = rng.sample(CITIES, 4)
    while True:
        rows = [[i + 1, rng.choice(PEOPLE), rng.choice(cities), rng.randint(1, 300)] for i in range(rng.randint(6, 14))]
        totals: dict[str, int] = {}
        for r in rows:
            totals[r[2]] = totals.get(r[2], 0) + r[3]
        if len(set(totals.values())) == len(totals):
            break
    sql = [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT, city TEXT, amount INTEGER);"]
    sql += [f"INSERT INTO {table} VALUES ({r[0]}, '{r[1]}', '{r[2]}', {r[3]});" for r in rows]
    files = {script: "\n".join(sql) + "\n"}
    consts = {"DB": f"/app/{db}", "TABLE": table, "ROWS": rows, "OUT": f"/app/{out}"}
    load = f"sqlite3 /app/{db} < /app/{script}"
    if difficulty == "easy":
        instruction = f"Create the SQLite database `/app/{db}` by running the SQL script `/app/{script}`."
        return Instance(instruction, files, [load], TESTS_DB, consts, shape="sqlite3 DATABASE < SCRIPT")
    if difficulty == "medium":
        city = rng.choice([r[2] for r in rows])
        instruction = (f"Create the SQLite database `/app/{db}` from the SQL script `/app/{script}`, then write the "
                       f"number of rows of table `{table}` whose `city` is `{city}` to `/app/{out}`.")
        solve = [load, f"sqlite3 /app/{db} \"SELECT COUNT(*) FROM {table} WHERE city = '{city}'\" > /app/{out}"]
        consts["EXPECTED"] = [str(sum(r[2] == city for r in rows))]
        return Instance(instruction, files, solve, TESTS_OUT, consts)
    instruction = (f"Create the SQLite database `/app/{db}` from the SQL script `/app/{script}` (it makes one table). "
                   f"Then write the total `amount` per `city` to `/app/{out}`, one line `<city>|<total>` per city, "
                   "highest total first.")
    solve = [f"grep -i 'create table' /app/{script}", load,
             f"sqlite3 /app/{db} \"SELECT city, SUM(amount) AS t FROM {table} GROUP BY city ORDER BY t DESC\" > /app/{out}",
             f"cat /app/{out}"]
    consts["EXPECTED"] = [f"{c}|{t}" for c, t in sorted(totals.items(), key=lambda kv: -kv[1])]
    return Instance(instruction, files, solve, TESTS_OUT, consts)
