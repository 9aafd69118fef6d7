"""archives: tar.gz archives (easy: create one; medium: extract into a new directory; hard: list,
then extract one member whose path is not given)."""

from __future__ import annotations

import gzip
import io
import tarfile

from termagent.tasks.families.base import EXTS, WORDS, Instance, name, sentence, sha256

NAME, CATEGORY, TAGS = "tar-archive", "archives", ["archives", "tar", "gzip"]

TESTS_CREATE = '''
import tarfile


def test_archive():
    with tarfile.open(ARCHIVE, "r:gz") as tar:
        got = {m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    got = {hashlib.sha256(data).hexdigest(): name for name, data in got.items()}
    for path, digest in MEMBERS.items():
        assert digest in got and got[digest] == path, f"{path} missing from the archive (or under another path)"
'''

TESTS_FILES = '''
def test_files():
    for path, digest in EXPECTED.items():
        assert Path(path).is_file(), f"{path} is missing"
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest, f"{path} has other contents"
'''


def make_tar(members: dict[str, str]) -> bytes:
    """A deterministic .tar.gz: fixed mtimes, owners and modes, gzip header without a timestamp."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path, text in sorted(members.items()):
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode, info.uname, info.gname = len(data), 1700000000, 0o644, "root", "root"
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def build(rng, difficulty):
    d, arch = rng.choice(WORDS), name(rng)
    members = {f"{d}/{name(rng)}{i}.{rng.choice(EXTS)}": sentence(rng) + "\n" for i in range(rng.randint(2, 4))}
    if difficulty == "easy":
        files = dict(members)
        instruction = (f"Create the gzip-compressed tar archive `/app/{arch}.tar.gz` of the directory `/app/{d}` "
                       f"(paths inside the archive start with `{d}/`).")
        solve = [f"tar -czf /app/{arch}.tar.gz -C /app {d}"]
        return Instance(instruction, files, solve, TESTS_CREATE,
                        {"ARCHIVE": f"/app/{arch}.tar.gz", "MEMBERS": {p: sha256(t) for p, t in members.items()}},
                        shape="tar -czf ARCHIVE -C /app DIRECTORY")
    if difficulty == "medium":
        dest = rng.choice([w for w in WORDS if w != d])
        files = {f"{arch}.tar.gz": make_tar(members)}
        instruction = f"Extract the archive `/app/{arch}.tar.gz` into a new directory `/app/{dest}`."
        solve = [f"mkdir -p /app/{dest}", f"tar -xzf /app/{arch}.tar.gz -C /app/{dest}"]
        return Instance(instruction, files, solve, TESTS_FILES,
                        {"EXPECTED": {f"/app/{dest}/{p}": sha256(t) for p, t in members.items()}})
    sub = rng.choice([w for w in WORDS if w != d])
    target = f"{rng.choice(WORDS)}_{rng.randint(100, 999)}.{rng.choice(EXTS)}"
    path = f"{d}/{sub}/{target}"
    members[path] = sentence(rng, 8) + "\n"
    for i in range(rng.randint(1, 3)):
        members[f"{d}/{rng.choice(WORDS)}/{name(rng)}{i}.txt"] = sentence(rng) + "\n"
    out = f"{name(rng)}.{target.rsplit('.', 1)[1]}"
    files = {f"{arch}.tar.gz": make_tar(members)}
    instruction = (f"The archive `/app/{arch}.tar.gz` holds a file named `{target}` somewhere inside. Extract only "
                   f"that file and save it as `/app/{out}`.")
    solve = [f"tar -tzf /app/{arch}.tar.gz", f"tar -xzf /app/{arch}.tar.gz -O {path} > /app/{out}", f"cat /app/{out}"]
    tests = TESTS_FILES + f'''

def test_only_that_file():
    assert not Path("/app/{d}").exists(), "the whole archive was extracted into /app"
'''
    return Instance(instruction, files, solve, tests, {"EXPECTED": {f"/app/{out}": sha256(members[path])}})
