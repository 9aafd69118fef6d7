"""Harbor's terminus-2 texts, read from the installed Harbor package at run time (never copied here).

Harbor (>= Python 3.12) cannot be imported into this project's environment, so its files are read: from
the `harbor` package directory of another environment, or straight from a `harbor-*.whl` (a zip).

    source = locate_harbor(spec)             # spec: agent.harbor_package, else $HARBOR_PACKAGE_DIR, else the
                                             # .venv-harbor set-up made, else `uv tool dir`/harbor/..., else
                                             # `harbor` importable here
    texts = Terminus2Texts.load(source)      # every text terminus-2 sends, as format templates
    parser = load_json_parser(source)        # Harbor's own TerminusJSONPlainParser (a stdlib-only module)

Where the text lives:
- the first prompt: `agents/terminus_2/templates/terminus-json-plain.txt` (`{instruction}`,
  `{terminal_state}`); the timeout note: `templates/timeout.txt`;
- everything else is an f-string inside terminus-2's code (`terminus_2.py`: the completion question, the
  parse-error and warning messages, the cut-off reply's error, the output-limit marker; `tmux_session.py`:
  the "new output" / "screen" labels). Those are found with `ast` by where they sit (function, the
  variable they are assigned to, the placeholders they hold) and turned into `str.format` templates; when
  a Harbor release moves one, loading fails and names the file, the function and what was looked for.

Only the *logic* that fills these templates is ours (termagent/protocol/protocols.py); no text of Harbor's
is written in this repository.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import types
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

ENV_VAR = "HARBOR_PACKAGE_DIR"
T2 = "agents/terminus_2"  # inside the `harbor` package
PROMPT_TEMPLATE = f"{T2}/templates/terminus-json-plain.txt"
TIMEOUT_TEMPLATE = f"{T2}/templates/timeout.txt"
AGENT_SOURCE = f"{T2}/terminus_2.py"
TMUX_SOURCE = f"{T2}/tmux_session.py"
PARSER_SOURCE = f"{T2}/terminus_json_plain_parser.py"


class HarborPackageError(RuntimeError):
    """The Harbor package could not be found, or its terminus-2 files are not what this code expects."""


@dataclass(frozen=True)
class HarborSource:
    """Where Harbor's files are read from: a `harbor` package directory or a wheel."""

    location: Path
    how: str  # which rule found it (param, env, uv tool, import)
    version: str | None = None
    _wheel_root: str = field(default="harbor/", repr=False)

    @property
    def is_wheel(self) -> bool:
        return self.location.is_file()

    def read(self, rel: str) -> str:
        """The text of `harbor/<rel>`."""
        try:
            if self.is_wheel:
                with zipfile.ZipFile(self.location) as wheel:
                    return wheel.read(self._wheel_root + rel).decode("utf-8")
            return (self.location / rel).read_text(encoding="utf-8")
        except (KeyError, FileNotFoundError) as e:
            raise HarborPackageError(f"Harbor package {self.location} ({self.how}) has no harbor/{rel}: "
                                     "not a Harbor release with the terminus-2 agent") from e

    def describe(self) -> dict:
        return {"location": str(self.location), "found_by": self.how, "version": self.version}


def _package_version(package_dir: Path) -> str | None:
    """The version of an installed `harbor` package dir, from its sibling harbor-X.dist-info."""
    for info in sorted(package_dir.parent.glob("harbor-*.dist-info")):
        meta = info / "METADATA"
        if meta.is_file():
            for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    return None


def _wheel_version(wheel: Path) -> str | None:
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if re.fullmatch(r"harbor-[^/]+\.dist-info/METADATA", name):
                for line in z.read(name).decode("utf-8", errors="replace").splitlines():
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
    return None


def _source_at(path: Path, how: str) -> HarborSource:
    """A HarborSource for a wheel, a `harbor` package dir, or a dir (site-packages) holding one."""
    if path.is_file():
        if not zipfile.is_zipfile(path):
            raise HarborPackageError(f"{path} ({how}) is a file but not a wheel (zip)")
        return HarborSource(path, how, _wheel_version(path))
    if (path / "harbor" / "agents").is_dir():
        path = path / "harbor"
    if not (path / "agents").is_dir():
        raise HarborPackageError(f"{path} ({how}) is neither a harbor-*.whl, a `harbor` package directory nor "
                                 "a directory holding one")
    return HarborSource(path, how, _package_version(path))


HARBOR_VENV = ".venv-harbor"  # what scripts/setup.sh makes on a GPU machine (termagent/setup_plan.py)


def _venv_packages(venv: Path) -> list[Path]:
    """The `harbor` package dir(s) of a venv: <venv>/lib/python3.*/site-packages/harbor."""
    return sorted(p for p in venv.glob("lib/python3*/site-packages/harbor") if (p / "agents").is_dir())


def _setup_venv_candidates(cwd: Path | None = None, path: str | None = None) -> list[tuple[Path, str]]:
    """Harbor as scripts/setup.sh installs it: .venv-harbor beside the project (the working directory a stage
    runs in, then this package's checkout), then the venv of the `harbor` command on PATH (set-up links it into
    .venv/bin, so the link leads to .venv-harbor wherever that is)."""
    out: list[tuple[Path, str]] = []
    roots = [Path.cwd() if cwd is None else cwd, Path(__file__).resolve().parents[2]]
    for root in dict.fromkeys(r.resolve() for r in roots):
        out += [(p, f"{root / HARBOR_VENV} (set-up's Harbor venv)") for p in _venv_packages(root / HARBOR_VENV)]
    command = shutil.which("harbor", path=path)
    if command:
        venv = Path(command).resolve().parent.parent  # <venv>/bin/harbor -> <venv>
        out += [(p, f"the venv of `harbor` on PATH ({command} -> {venv})") for p in _venv_packages(venv)]
    return out


def _uv_tool_candidates() -> list[Path]:
    """harbor installed with `uv tool install harbor`: <uv tool dir>/harbor/lib/python3.*/site-packages/harbor."""
    uv = shutil.which("uv")
    if uv is None:
        return []
    try:
        tool_dir = subprocess.run([uv, "tool", "dir"], capture_output=True, text=True, timeout=30,
                                  check=True).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return []
    return sorted(Path(tool_dir).glob("harbor/lib/python3*/site-packages/harbor"))


def locate_harbor(spec: str | os.PathLike | None = None) -> HarborSource:
    """Find Harbor's package files. In order: `spec` (the agent.harbor_package param: a harbor-*.whl, a
    `harbor` package dir or the site-packages holding it), $HARBOR_PACKAGE_DIR (the same kinds), the
    .venv-harbor that set-up makes (beside the project, or behind the `harbor` command on PATH), the
    `uv tool install harbor` environment, a `harbor` importable by this interpreter."""
    if spec:
        return _source_at(Path(spec).expanduser(), "param agent.harbor_package")
    if os.environ.get(ENV_VAR):
        return _source_at(Path(os.environ[ENV_VAR]).expanduser(), f"${ENV_VAR}")
    tried = ["param agent.harbor_package (null)", f"${ENV_VAR} (unset)"]
    setup_venvs = _setup_venv_candidates()
    if setup_venvs:
        package, how = setup_venvs[0]
        return _source_at(package, how)
    tried.append(f"{HARBOR_VENV} in {Path.cwd()} and beside the package, and the `harbor` command on PATH "
                 "(none has lib/python3*/site-packages/harbor)")
    candidates = _uv_tool_candidates()
    if candidates:
        return _source_at(candidates[-1], "uv tool dir")
    tried.append("`uv tool dir` (no uv, or no harbor tool installed)")
    found = importlib.util.find_spec("harbor")
    if found is not None and found.submodule_search_locations:
        return _source_at(Path(next(iter(found.submodule_search_locations))), f"import harbor ({sys.executable})")
    tried.append(f"`import harbor` in {sys.executable}")
    raise HarborPackageError(
        "agent.protocol harbor-terminus-2 needs Harbor's package files, and none were found; tried: "
        + "; ".join(tried) + ". Run `make setup` on the GPU machine (it makes .venv-harbor), or set "
        "agent.harbor_package (or $HARBOR_PACKAGE_DIR) to a harbor-X.whl or to the `harbor` package directory "
        "of the environment Harbor is installed in.")


# ---- f-strings out of Harbor's code ---------------------------------------------------------------------

def _placeholder(node: ast.expr) -> str:
    """A name for an f-string's {expression}: `x` -> x, `a.b` -> b, `f(...)`/`a.f(...)` -> f, await -> inner."""
    if isinstance(node, ast.Await):
        return _placeholder(node.value)
    if isinstance(node, ast.Call):
        return _placeholder(node.func)
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ast.unparse(node)


def template_of(node: ast.expr) -> str | None:
    """An f-string (or plain string) node as a str.format template with named placeholders."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}")
    if not isinstance(node, ast.JoinedStr):
        return None
    out = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            out.append(str(part.value).replace("{", "{{").replace("}", "}}"))
        elif isinstance(part, ast.FormattedValue):
            if part.conversion != -1 or part.format_spec is not None:
                return None  # not a plain {x}: never the case in the texts used here
            out.append("{" + _placeholder(part.value) + "}")
    return "".join(out)


def placeholders(template: str) -> set[str]:
    import string

    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


class _Source:
    def __init__(self, harbor: HarborSource, rel: str):
        self.harbor, self.rel = harbor, rel
        self.tree = ast.parse(harbor.read(rel), filename=rel)

    def function(self, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return node
        raise self.error(name, "the function")

    def error(self, function: str, what: str) -> HarborPackageError:
        return HarborPackageError(
            f"Harbor {self.harbor.version or '?'} at {self.harbor.location}: harbor/{self.rel}, {function}(): "
            f"{what} was not found. termagent's harbor-terminus-2 protocol reads terminus-2's texts from this "
            "code; this Harbor release changed it (set agent.harbor_version / the package to the release the "
            "protocol was written for, or update termagent/protocol/harbor.py)")

    def strings(self, function: str, *, target: str | None = None, augmented: bool | None = None,
                returns: bool = False, branch: str | None = None) -> list[str]:
        """Templates of the string expressions in `function`, in source order: assigned to `target`
        (`augmented`: only `+=`, False: only `=`), or returned (`returns`); `branch`: only inside an
        `if ... == "<branch>"` (e.g. the parser_name == "json" branch)."""
        root: ast.AST = self.function(function)
        if branch is not None:
            ifs = [n for n in ast.walk(root) if isinstance(n, ast.If) and isinstance(n.test, ast.Compare)
                   and any(isinstance(c, ast.Constant) and c.value == branch for c in n.test.comparators)]
            if not ifs:
                raise self.error(function, f"the `== {branch!r}` branch")
            root = ast.Module(body=ifs[0].body, type_ignores=[])
        found: list[tuple[int, int, str]] = []
        for node in ast.walk(root):
            value = None
            if returns and isinstance(node, ast.Return):
                value = node.value
            elif target is not None and isinstance(node, (ast.Assign, ast.AugAssign)):
                if augmented is not None and isinstance(node, ast.AugAssign) != augmented:
                    continue
                names = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == target for t in names):
                    value = node.value
            if value is None:
                continue
            tpl = template_of(value)
            if tpl is not None:
                found.append((value.lineno, value.col_offset, tpl))
        return [t for _, _, t in sorted(found)]

    def one(self, function: str, what: str, need: set[str], **where) -> str:
        """The single template in `function` (selected as in `strings`) whose placeholders are exactly `need`."""
        hits = [t for t in self.strings(function, **where) if placeholders(t) == need]
        if len(hits) != 1:
            raise self.error(function, f"{what} (one string with the placeholders {sorted(need)}, found {len(hits)})")
        return hits[0]


@dataclass(frozen=True)
class Terminus2Texts:
    """Every text terminus-2 (JSON parser) sends, as str.format templates, with Harbor's placeholder names."""

    harbor: HarborSource
    initial_prompt: str  # {instruction} {terminal_state}
    timeout: str  # {command} {timeout_sec} {terminal_state} (only for a blocking command; see the docs)
    new_output: str  # {content}: the terminal's new output
    screen: str  # {screen}: the visible screen
    limit_marker: str  # {first_portion} {max_bytes} {omitted_bytes} {last_portion}
    limit_default_bytes: int
    feedback_error: str  # {error}
    feedback_error_warning: str  # {warning}, appended to feedback_error
    feedback_warning: str  # {warning}
    parse_error_prompt: str  # {feedback} {_get_error_response_type}
    error_response_type: str
    warning_observation: str  # {feedback} {_limit_output_length}
    confirmation: str  # {terminal_output}
    output_cut: str  # {limit_str}
    limit_str_known: str  # {output_limit}
    limit_str_unknown: str
    output_cut_warnings: str  # {warning}

    @classmethod
    def load(cls, harbor: HarborSource) -> Terminus2Texts:
        prompt = harbor.read(PROMPT_TEMPLATE)
        if placeholders(prompt) != {"instruction", "terminal_state"}:
            raise HarborPackageError(f"harbor/{PROMPT_TEMPLATE} ({harbor.location}): expected the placeholders "
                                     f"instruction and terminal_state, found {sorted(placeholders(prompt))}")
        agent, tmux = _Source(harbor, AGENT_SOURCE), _Source(harbor, TMUX_SOURCE)
        if PROMPT_TEMPLATE.rsplit("/", 1)[1] not in ast.unparse(agent.function("_get_prompt_template_path")):
            raise agent.error("_get_prompt_template_path", "the json prompt template's file name")
        limit_fn = agent.function("_limit_output_length")
        defaults = [d.value for d in limit_fn.args.defaults if isinstance(d, ast.Constant)]
        if not defaults or not isinstance(defaults[-1], int):
            raise agent.error("_limit_output_length", "the default max_bytes")
        feedback = agent.strings("_handle_llm_interaction", target="feedback", augmented=True)
        if [placeholders(t) for t in feedback] != [{"error"}, {"warning"}, {"warning"}]:
            raise agent.error("_handle_llm_interaction", "the three `feedback +=` strings (error, warning, warning)")
        ert = agent.strings("_get_error_response_type", returns=True, branch="json")
        if len(ert) != 1 or placeholders(ert[0]):
            raise agent.error("_get_error_response_type", "the json branch's returned name")
        limit_strs = agent.strings("_query_llm", target="limit_str", augmented=False)
        known = [t for t in limit_strs if placeholders(t) == {"output_limit"}]
        unknown = [t for t in limit_strs if not placeholders(t)]
        if len(known) != 1 or len(unknown) != 1:
            raise agent.error("_query_llm", "the two `limit_str =` strings")
        return cls(
            harbor=harbor,
            initial_prompt=prompt,
            timeout=harbor.read(TIMEOUT_TEMPLATE),
            new_output=_label(tmux, {"new_content"}, "content", "the new-output label"),
            screen=_label(tmux, {"visible_screen", "_get_visible_screen"}, "screen", "the screen label"),
            limit_marker=agent.one("_limit_output_length", "the output-limit marker",
                                   {"first_portion", "max_bytes", "omitted_bytes", "last_portion"}, returns=True),
            limit_default_bytes=int(defaults[-1]),
            feedback_error=feedback[0], feedback_error_warning=feedback[1], feedback_warning=feedback[2],
            parse_error_prompt=agent.one("_run_agent_loop", "the parse-error prompt",
                                         {"feedback", "_get_error_response_type"}, target="prompt"),
            error_response_type=ert[0].replace("{{", "{").replace("}}", "}"),
            warning_observation=agent.one("_run_agent_loop", "the warnings observation",
                                          {"feedback", "_limit_output_length"}, target="observation"),
            confirmation=agent.one("_get_completion_confirmation_message", "the json confirmation question",
                                   {"terminal_output"}, returns=True, branch="json"),
            output_cut=agent.one("_query_llm", "the cut-off reply's error", {"limit_str"}, target="error_msg",
                                 augmented=False),
            limit_str_known=known[0],
            limit_str_unknown=unknown[0].replace("{{", "{").replace("}}", "}"),
            output_cut_warnings=agent.one("_query_llm", "the cut-off reply's parser warnings", {"warning"},
                                          target="warnings_text"),
        )

    def fingerprint(self) -> str:
        """sha256 of every text used: a record says exactly which Harbor texts it was rendered with."""
        h = hashlib.sha256()
        for name in sorted(self.__dataclass_fields__):
            if name != "harbor":
                h.update(f"{name}\0{getattr(self, name)}\0".encode())
        return h.hexdigest()


def _label(tmux: _Source, names: set[str], name: str, what: str) -> str:
    """The one label get_incremental_output() puts before the terminal text held in one of `names` (each
    return of that kind must carry the same text), as a template with the placeholder `name`."""
    found = set()
    for template in tmux.strings("get_incremental_output", returns=True):
        held = placeholders(template)
        if len(held) == 1 and held <= names:
            found.add(template.replace("{" + held.pop() + "}", "{" + name + "}"))
    if len(found) != 1:
        raise tmux.error("get_incremental_output", f"{what} (one text around {sorted(names)}, found {len(found)})")
    return found.pop()


def load_json_parser(harbor: HarborSource):
    """Harbor's TerminusJSONPlainParser, executed from the package's own file (it imports only the standard
    library, so it runs in this Python), so a reply is judged and its errors/warnings worded exactly as
    terminus-2 does."""
    source = harbor.read(PARSER_SOURCE)
    tree = ast.parse(source)
    for node in ast.walk(tree):
        modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                   else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        for module in modules:
            if module.split(".")[0] not in sys.stdlib_module_names:
                raise HarborPackageError(f"harbor/{PARSER_SOURCE} ({harbor.location}) imports {module}: it can no "
                                         "longer be run outside Harbor's environment")
    module = types.ModuleType("harbor_terminus_json_plain_parser")
    module.__file__ = f"{harbor.location}!harbor/{PARSER_SOURCE}" if harbor.is_wheel else str(
        harbor.location / PARSER_SOURCE)
    sys.modules[module.__name__] = module  # dataclasses look their module up while the class is built
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102 (Harbor's own parser)
    parser_cls = getattr(module, "TerminusJSONPlainParser", None)
    if parser_cls is None:
        raise HarborPackageError(f"harbor/{PARSER_SOURCE} ({harbor.location}) has no TerminusJSONPlainParser")
    return parser_cls()


@lru_cache(maxsize=8)
def load(spec: str | None, env_value: str | None, expected_version: str | None):
    """(Terminus2Texts, parser) for a package spec, memoised per (spec, $HARBOR_PACKAGE_DIR, version)."""
    harbor = locate_harbor(spec)
    if expected_version and harbor.version != expected_version:
        raise HarborPackageError(
            f"agent.harbor_version is {expected_version!r} but the Harbor package found at {harbor.location} "
            f"({harbor.how}) is {harbor.version!r}: the prompt would not be the one the eval's Harbor sends. "
            "Point agent.harbor_package at that release, or change agent.harbor_version (null: any)")
    return Terminus2Texts.load(harbor), load_json_parser(harbor)
