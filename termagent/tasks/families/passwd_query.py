"""system_admin: questions about a passwd file (easy: one user's shell; medium: users by UID;
hard: shells by count)."""

from __future__ import annotations

from termagent.tasks.families.base import PEOPLE, Instance, name

NAME, CATEGORY, TAGS = "passwd-query", "system_admin", ["system_admin", "users", "awk", "cut"]

SHELLS = ("/bin/bash", "/bin/sh", "/usr/sbin/nologin", "/bin/zsh", "/bin/dash")

TESTS = '''
def test_output():
    assert Path(OUT).read_text().strip().splitlines() == EXPECTED
'''


def build(rng, difficulty):
    d = rng.choice(("etc", "srv", "conf", "backup"))
    path = f"{d}/passwd"
    out = f"{name(rng)}.txt"
    while True:
        users = rng.sample(PEOPLE, rng.randint(6, 12))
        rows = [["root", "0", "0", "root", "/root", "/bin/bash"]]
        for i, u in enumerate(users):
            uid = rng.choice((rng.randint(100, 999), rng.randint(1000, 1999)))
            rows.append([u, str(uid), str(uid), u.title(), f"/home/{u}", rng.choice(SHELLS[: rng.randint(2, 5)])])
        counts: dict[str, int] = {}
        for r in rows:
            counts[r[5]] = counts.get(r[5], 0) + 1
        if len(set(counts.values())) == len(counts):
            break
    text = "".join(f"{r[0]}:x:{r[1]}:{r[2]}:{r[3]}:{r[4]}:{r[5]}\n" for r in rows)
    files = {path: text}
    consts = {"OUT": f"/app/{out}"}
    if difficulty == "easy":
        r = rng.choice(rows[1:])
        instruction = f"Write the login shell of the user `{r[0]}` in `/app/{path}` to `/app/{out}`."
        solve = [f"grep '^{r[0]}:' /app/{path} | cut -d: -f7 > /app/{out}"]
        consts["EXPECTED"] = [r[5]]
        shape = "grep '^USER:' FILE | cut -d: -f7 > OUTPUT"
    elif difficulty == "medium":
        n = rng.choice((500, 1000, 1200, 1500))
        instruction = (f"Write the names of the users in `/app/{path}` whose UID is at least {n}, one per line, in "
                       f"file order, to `/app/{out}`.")
        solve = [f"awk -F: '$3 >= {n} {{print $1}}' /app/{path} > /app/{out}", f"cat /app/{out}"]
        consts["EXPECTED"] = [r[0] for r in rows if int(r[1]) >= n]
    else:
        instruction = (f"For each login shell used in `/app/{path}`, count the users that have it. Write one line "
                       f"`<shell> <count>` per shell, most used first, to `/app/{out}`.")
        solve = [f"cut -d: -f7 /app/{path} | sort | uniq -c | sort -rn",
                 f"cut -d: -f7 /app/{path} | sort | uniq -c | sort -rn | awk '{{print $2, $1}}' > /app/{out}",
                 f"cat /app/{out}"]
        consts["EXPECTED"] = [f"{s} {c}" for s, c in sorted(counts.items(), key=lambda kv: -kv[1])]
    return Instance(instruction, files, solve, TESTS, consts, shape=shape if difficulty == "easy" else "")
