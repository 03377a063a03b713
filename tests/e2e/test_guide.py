"""The guide runs as written: the code blocks of README.md and docs/guide/*.md.

The convention, by a block's fenced info string (the page says it too, docs/guide/README.md):
- ```sh       runs, in order with the page's other `sh` blocks, in one bash (`set -euo pipefail`),
              against a local stack this module starts as `make run` does (the dev tenant's key in
              its work directory, the echo endpoint, the container-task grant); the page's
              `http://127.0.0.1:8080` (API), `http://127.0.0.1:8081` (echo) and `.build/local`
              (work directory) are that stack's. `jobsched` is the CLI of this tree; `curl` fails on
              an HTTP error answer (`--fail-with-body`), so a request the API refuses fails the page.
- ```sh no-run  does not run here (it deploys to AWS, starts a server, or needs a resource the
              local stack has not): bash reads it (`bash -n`), every `jobsched ...` in it is parsed
              by the CLI's own parser, every `make X` names a target of the Makefile, and every
              `cdk`/`make synth|deploy` command's `-c key=value` contexts, split as a shell splits
              them, go together through the CDK app's context parser (StackConfig.from_context), as
              the CDK CLI hands them over (strings).
- ```python   compiles. ```json parses (a `...` in it is a placeholder: not checked).
- other blocks (no info string, `text`) show output and are not run.
`bash`, `shell`, `py` and `console` are taken as `sh`, `sh`, `python` and `text`.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from jobsched.local.__main__ import boot
from jobsched.local.echo import EchoServer
from jobsched.local.runtime import Options

from ..infra.test_context import Node  # the CDK app's node, as the CDK CLI fills its context

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide"
PAGES = [ROOT / "README.md", *sorted(GUIDE.glob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
RUNS, NO_RUN = "sh", "no-run"
KNOWN = {"sh", "python", "json", "text", ""}
# Other names of the same kinds: a `bash` block runs as an `sh` one does.
ALIASES = {"bash": "sh", "shell": "sh", "py": "python", "console": "text", "output": "text"}
# The documented addresses, and what they are in the stack this module starts.
API, ECHO, WORKDIR = "http://127.0.0.1:8080", "http://127.0.0.1:8081", ".build/local"
PAGE_SECONDS = 90


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    flags: tuple[str, ...]
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        words = match.group(1).split()
        line = text.count("\n", 0, match.start()) + 1
        lang = words[0] if words else ""
        found.append(Block(page, line, ALIASES.get(lang, lang), tuple(words[1:]), match.group(2)))
    return found


ALL = [block for page in PAGES for block in blocks(page)]


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_guide_has_its_pages_and_every_block_says_what_it_is():
    names = {page.name for page in GUIDE.glob("*.md")}
    assert {"README.md", "getting-started.md", "jobs-and-schedules.md", "targets.md", "workflows.md",
            "watching-jobs.md", "deploying.md", "api.md"} <= names, names
    for block in ALL:
        assert block.lang in KNOWN, f"{block.where}: info string {block.lang!r} (one of {sorted(KNOWN)})"
        assert set(block.flags) <= {NO_RUN}, f"{block.where}: flags {block.flags} (only {NO_RUN!r})"
    assert any(b.lang == RUNS and NO_RUN not in b.flags for b in ALL)


def test_the_readme_is_the_front_page_and_its_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    first = next(b for b in blocks(ROOT / "README.md") if b.lang == RUNS)
    commands = [line.split("#")[0].strip() for line in first.text.splitlines()]
    assert commands[:2] == ["make run", "make test"], first.text
    assert "\nmake test\n" in (ROOT / ".ci" / "run").read_text() + "\n"


LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")
# Written on another branch at the same time; its link stands here already.
PENDING = {GUIDE / "client.md"}


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation but `-` and `_` dropped,
    spaces as `-`; a repeated one gets `-1`, `-2`, ..."""
    seen: dict[str, int] = {}
    text = FENCE.sub("", page.read_text())
    for heading in re.findall(r"^#{1,6} +(.+?) *$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
    return {slug if n == 0 else f"{slug}-{n}" for slug, count in seen.items() for n in range(count + 1)}


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_relative_link_names_a_file_and_a_heading_that_exist(page):
    for target, anchor in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path = (page.parent / target).resolve()
        assert path.exists() or path in PENDING, f"{_id(page)}: {target}"
        if anchor and path.suffix == ".md" and path.exists():
            assert anchor[1:] in anchors(path), f"{_id(page)}: {target}{anchor}: no such heading"


# --- blocks that run -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def local_stack(tmp_path_factory):
    """What `make run` starts (no seeded keys: the dev tenant, its key in the work directory), and
    its echo endpoint."""
    missing = [tool for tool in ("bash", "curl", "jq") if shutil.which(tool) is None]
    assert not missing, f"the guide's commands need {missing} (`make test` installs them: its doc-tools target)"
    saved_env = dict(os.environ)
    workdir = tmp_path_factory.mktemp("guide-local")
    runtime, _, _ = boot(Options(port=0, emulator_port=0, segments=2, workdir=workdir, keep_metrics=True), [],
                         progress=lambda text: None)
    echo = EchoServer(out=open(os.devnull, "w"))
    yield runtime, echo
    runtime.stop()
    echo.stop()
    os.environ.clear()
    os.environ.update(saved_env)  # the runtime pointed AWS_ENDPOINT_URL at its emulator


def _shims(directory: Path) -> Path:
    """`jobsched` (this tree's CLI) and `curl` that fails on an HTTP error answer."""
    directory.mkdir(exist_ok=True)
    jobsched = directory / "jobsched"
    program = "import sys; from jobsched.cli.main import entry; sys.argv[0] = 'jobsched'; entry()"
    jobsched.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c {shlex.quote(program)} \"$@\"\n")
    curl = directory / "curl"
    real = shutil.which("curl")
    curl.write_text("#!/bin/sh\n"  # curl refuses --fail-with-body beside a --fail of the page's own
                    f'for a in "$@"; do case "$a" in --fail|-[!-]*f*) exec {real} --max-time 20 "$@";; esac; done\n'
                    f'exec {real} --fail-with-body --max-time 20 "$@"\n')
    for shim in (jobsched, curl):
        shim.chmod(0o755)
    return directory


def script(page: Path, api: str, echo: str, workdir: str) -> str:
    parts = ["set -euo pipefail",
             'trap \'echo "guide: the block at $GUIDE_BLOCK failed: $BASH_COMMAND" >&2\' ERR']
    for block in blocks(page):
        if block.lang == RUNS and NO_RUN not in block.flags:
            text = block.text.replace(API, api).replace(ECHO, echo).replace(WORKDIR, workdir)
            parts += [f"GUIDE_BLOCK={shlex.quote(block.where)}", text]
    return "\n".join(parts) + "\n"


RUNNABLE = [page for page in PAGES if any(b.lang == RUNS and NO_RUN not in b.flags for b in blocks(page))]


@pytest.mark.parametrize("page", RUNNABLE, ids=_id)
def test_the_pages_commands_run_as_written_against_the_local_stack(page, local_stack, tmp_path):
    runtime, echo = local_stack
    workdir = str(runtime.options.workdir)
    env = {key: value for key, value in os.environ.items() if not key.startswith("JOBSCHED_")}
    env.update(PATH=f"{_shims(tmp_path / 'bin')}:{os.path.dirname(sys.executable)}:{env.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join([str(ROOT / "functions"), str(ROOT / "infra")]),
               # As a reader who followed getting-started.md has them, for the pages after it.
               JOBSCHED_URL=runtime.api_url, JOBSCHED_API_KEY=(Path(workdir) / "dev-key").read_text().strip(),
               JOBSCHED_WORKDIR=workdir)
    text = script(page, runtime.api_url, echo.url, workdir)
    done = subprocess.run(["bash", "-c", text], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=PAGE_SECONDS)
    print(done.stdout, "--- stderr:", done.stderr, sep="\n")  # what the commands printed (pytest -s shows it)
    assert done.returncode == 0, f"{_id(page)}:\n{done.stderr[-3000:]}\n--- stdout:\n{done.stdout[-3000:]}"


# --- blocks that do not run here: checked ----------------------------------------------------
NOT_RUN = [b for b in ALL if b.lang == RUNS and NO_RUN in b.flags]


def commands(text: str) -> list[list[str]]:
    """The simple commands of a block: its lines joined at a trailing backslash, each split as a
    shell splits it (comments dropped), then at `|`, `&&`, `||` and `;`."""
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue  # bash -n judges the syntax
        current: list[str] = []
        for word in words + [";"]:
            if word in ("|", "&&", "||", ";"):
                if current:
                    found.append(current)
                current = []
            else:
                current.append(word)
    return found


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.search(r"^\.PHONY:(.*)$", text, re.M).group(1).split())


@pytest.mark.parametrize("block", NOT_RUN, ids=lambda b: b.where)
def test_a_block_that_does_not_run_here_is_still_checked(block):
    from jobsched.cli.main import build_parser

    done = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True)
    assert done.returncode == 0, f"{block.where}: {done.stderr}"
    for words in commands(block.text):
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            words = words[1:]  # VAR=value before the command
        if not words:
            continue
        if words[0] == "jobsched":
            try:
                build_parser().parse_args(words[1:])
            except SystemExit:
                pytest.fail(f"{block.where}: the CLI refuses {shlex.join(words)}")
        if words[0] == "make":
            named = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
            assert set(named) <= make_targets(), f"{block.where}: {shlex.join(words)}"
        contexts = context_of(words)
        if contexts is not None:
            check_contexts(block, words, contexts)


def context_of(words: list[str]) -> dict[str, str] | None:
    """The `-c key=value` pairs a `cdk ...` or `make synth|deploy CDK_CONTEXT=...` command gives the
    app, as the CDK CLI hands them over; None for another command."""
    if words[0] in ("cdk", "npx") and "cdk" in words[:2]:
        given = words
    elif words[0] == "make" and {"synth", "deploy"} & set(words):
        given = shlex.split(next((w.split("=", 1)[1] for w in words if w.startswith("CDK_CONTEXT=")), ""))
    else:
        return None
    pairs = {}
    for flag, value in zip(given, given[1:]):
        if flag in ("-c", "--context"):
            key, separator, text = value.partition("=")
            assert separator, f"-c {value}: the CDK CLI takes key=value"
            pairs[key] = text
    return pairs


def check_contexts(block: Block, words: list[str], contexts: dict[str, str]) -> None:
    from jobsched_infra.config import ConfigError, StackConfig

    if any("..." in value or "<" in value for value in contexts.values()):
        return  # a placeholder the page fills in words; tests/infra/test_context.py has the samples
    try:
        StackConfig.from_context(Node(contexts))
    except ConfigError as exc:
        pytest.fail(f"{block.where}: {shlex.join(words)}: {exc}")


@pytest.mark.parametrize("block", [b for b in ALL if b.lang == "python"], ids=lambda b: b.where)
def test_a_python_block_compiles(block):
    compile(block.text, block.where, "exec")


@pytest.mark.parametrize("block", [b for b in ALL if b.lang == "json" and "..." not in b.text],
                         ids=lambda b: b.where)
def test_a_json_block_parses(block):
    json.loads(block.text)
