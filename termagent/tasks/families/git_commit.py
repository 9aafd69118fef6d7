"""git: put a directory under version control (easy: git init; medium: init + commit; hard: init,
ignore a kind of file, commit, check the status)."""

from __future__ import annotations

from termagent.tasks.families.base import PEOPLE, WORDS, Instance, name, sentence

NAME, CATEGORY, TAGS = "git-commit", "git", ["git", "version_control"]

TESTS_INIT = '''
def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True)


def test_repository():
    assert Path(REPO, ".git").is_dir(), "no .git directory"
    assert git("rev-parse", "--is-inside-work-tree").stdout.strip() == "true"
'''

TESTS_COMMIT = TESTS_INIT + '''

def test_commit():
    log = git("log", "-1", "--format=%s|%an|%ae")
    assert log.returncode == 0, "no commit"
    assert log.stdout.strip() == f"{MESSAGE}|{AUTHOR}|{EMAIL}"


def test_tracked():
    assert sorted(git("ls-files").stdout.split()) == sorted(TRACKED)
    assert git("status", "--porcelain").stdout.strip() == "", "uncommitted changes left"
'''


def build(rng, difficulty):
    proj = f"{rng.choice(WORDS)}-{rng.choice(('api', 'site', 'tool', 'lib', 'app'))}"
    files = {}
    for i in range(rng.randint(2, 4)):
        files[f"{proj}/{name(rng)}{i}.{rng.choice(('py', 'sh', 'md', 'txt'))}"] = sentence(rng) + "\n"
    consts = {"REPO": f"/app/{proj}"}
    if difficulty == "easy":
        instruction = f"Initialise an empty git repository in `/app/{proj}`."
        return Instance(instruction, files, [f"git init /app/{proj}"], TESTS_INIT, consts, shape="git init DIRECTORY")
    author = rng.choice(PEOPLE)
    email = f"{author}@{rng.choice(WORDS)}.example"
    message = f"{rng.choice(('Add', 'Import', 'Start', 'Track'))} {rng.choice(WORDS)} {rng.choice(('files', 'sources', 'project'))}"
    consts.update(MESSAGE=message, AUTHOR=author, EMAIL=email)
    commit = f'git -c user.name={author} -c user.email={email} commit -m "{message}"'
    if difficulty == "medium":
        instruction = (f"Make `/app/{proj}` a git repository and commit all of its files with the message "
                       f"`{message}`, as author `{author}` with email `{email}`.")
        consts["TRACKED"] = sorted(p.split("/", 1)[1] for p in files)
        solve = [f"cd /app/{proj}", "git init", "git add -A", commit]
        return Instance(instruction, files, solve, TESTS_COMMIT, consts)
    ext = rng.choice(("log", "tmp", "bak"))
    for i in range(rng.randint(1, 3)):
        files[f"{proj}/{name(rng)}{i}.{ext}"] = sentence(rng) + "\n"
    consts["TRACKED"] = sorted([p.split("/", 1)[1] for p in files if not p.endswith(f".{ext}")] + [".gitignore"])
    instruction = (f"Make `/app/{proj}` a git repository. Add a `.gitignore` so that `.{ext}` files are never "
                   f"tracked, then commit everything else (and the `.gitignore`) with the message `{message}`, "
                   f"as author `{author}` with email `{email}`. Leave no uncommitted changes.")
    solve = [f"cd /app/{proj}", "git init", f"echo '*.{ext}' > .gitignore", "git add -A", commit, "git status --short"]
    tests = TESTS_COMMIT + f'''

def test_ignored():
    for path in Path(REPO).glob("*.{ext}"):
        assert git("check-ignore", "-q", path.name).returncode == 0, f"{{path.name}} is not ignored"
'''
    return Instance(instruction, files, solve, tests, consts)
