#!/usr/bin/env python3
"""The README and the pages under docs/, run as a new user runs them (`make smoke`).

In a fresh clone of the repository (HEAD, or --rev), with no TWOPC_* or other overrides in the
environment, and no `java` on PATH (what `make run` needs is Rust and make: its DynamoDB engine
is embedded):

1. `make run` in the background, until the API answers on :3000 (the first run builds);
2. every ```console and ```sh block of README.md, then of every other page (`pages`: docs/ in
   the order of PAGE_ORDER, then every other Markdown file of the repository), in order, in one
   bash session per block, against the same stack: each `$ ` command of a console block must
   exit 0 (unless the next command is `echo $?`, which then shows its status) and print what
   the page shows under it (transaction ids, v4 or v5, are compared as a placeholder: the CLI
   sends a fresh idempotency key, from which the id derives). Each line of an sh block is a
   command (a line ending in `\` or inside quotes goes on) that must exit 0; its output is not
   compared. A block preceded by `<!-- smoke: run-only (why) -->` is run but its output is not
   compared; `<!-- smoke: skip (why) -->` is not run (tests/readme/check_pages.py, part of
   `make validate`, fails on a block the smoke would not visit and on a marker without a why);
3. the live page in headless Chromium (tests/browser/live-page.mjs): a transfer made on the page,
   and the update pushed back over the WebSocket; the README's console URL serves the console
   (its browser test is crates/twopc/tests/console.rs);
4. Ctrl-C (SIGINT to the process group, as a terminal sends it): make and twopc must both be
   gone, nothing left running from the clone;
5. `make run` again: the balances are the ones committed before the restart (kept in .twopc/);
6. `make run ARGS="--port 3001 --in-memory"`: a fresh in-memory stack answers on :3001;
7. with `java` back on PATH, `make run ARGS="--engine dynamodb-local --port 3001 --in-memory"`:
   the stack on DynamoDB Local (installed into .tools/ if missing), and after Ctrl-C nothing of
   it, the JVM included, left running.

Any failure stops the run with the failing command, its output and the log of `make run`; the
clone is kept for a look (its path is printed). Standard library only.

--here runs all of it in this checkout instead of a clone, for CI, whose checkout is itself a
fresh clone: it refuses unless git reports nothing changed or untracked and there is no .twopc/
or data-lake/, so the pages meet exactly what a new user's clone holds, except that `make run` finds the
build `make test` made (a second full build was most of CI's time).
"""

import argparse
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BUILD_TIMEOUT_S = 1800  # the first `make run` of a clone compiles the workspace
STOP_TIMEOUT_S = 60
# Transaction ids: random (v4) or derived from an idempotency key (v5; the CLI always sends one).
TX_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[45][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


class SmokeFailure(Exception):
    pass


def say(msg):
    print(f"smoke: {msg}", flush=True)


def clean_env():
    """The environment of a new user's shell: none of this project's overrides, no make
    variables from a parent make, no AWS settings."""
    drop = ("TWOPC_", "AWS_", "MAKE", "MFLAGS", "CARGO_TARGET_DIR", "RUST_LOG")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def path_without(program, path, into):
    """A PATH that finds every command of `path` but `program`: one folder, `into`, of links to
    the first of each name along `path` (as a shell finds it). A machine without Java, for the
    commands run with it, on a machine that has one."""
    into.mkdir()
    for folder in path.split(os.pathsep):
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        for name in names:
            target, link = Path(folder) / name, into / name
            if name == program or os.path.lexists(link):
                continue
            if target.is_file() and os.access(target, os.X_OK):
                link.symlink_to(target)
    if shutil.which(program, path=str(into)):
        raise SmokeFailure(f"{program} is still found on the PATH made without it")
    return str(into)


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


# --- the pages --------------------------------------------------------------------------------

# The pages whose examples build on one another, in the order they run after README.md (the
# balances the later ones print depend on the transfers the earlier ones make). Every other
# Markdown file of the repository follows, in path order.
PAGE_ORDER = (
    "docs/api.md",
    "docs/participants.md",
    "docs/lake.md",
    "docs/configuration.md",
    "docs/deploy.md",
    "docs/operations.md",
    "docs/bench.md",
    "docs/limitations.md",
)
# Fenced blocks that are examples to run: console (`$ ` commands and their output) and sh.
EXAMPLE_LANGS = ("console", "sh")
# An sh block shows no output to compare; unmarked, it is run (check_pages.py asks for a marker).
SH_DEFAULT_WHY = "(an sh block shows no output)"
MARKER = re.compile(r"\s*<!--\s*smoke:\s*(skip|run-only)\b\s*(.*?)\s*-->")


def pages(root):
    """The Markdown files the smoke visits, in the order it visits them: README.md, the pages
    of PAGE_ORDER, then every other tracked Markdown file (paths relative to root)."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    first = ["README.md", *PAGE_ORDER]
    return [p for p in first if p in tracked] + sorted(p for p in tracked if p not in first)



class Command:
    def __init__(self, text, line):
        self.text = text
        self.line = line
        self.expected = []


class Block:
    def __init__(self, page, lang, line, mode, why):
        self.page = page
        self.lang = lang
        self.line = line
        self.mode = mode  # compare | run-only | skip
        self.why = why
        self.commands = []


def complete(command, comments=False):
    """Whether a shell command is complete (no open quote, no trailing backslash)."""
    if command.endswith("\\"):
        return False
    try:
        shlex.split(command, comments=comments)
        return True
    except ValueError:
        return False


def console_blocks(root, page):
    """The example blocks of a page: ```console blocks (compared unless marked) and ```sh
    blocks (run, never compared: they show no output)."""
    blocks = []
    lines = (root / page).read_text().splitlines()
    i = 0
    directive = None
    while i < len(lines):
        line = lines[i]
        m = MARKER.match(line)
        if m:
            directive = (m.group(1), m.group(2))
        elif line.strip() == "```sh":
            mode, why = directive or ("run-only", SH_DEFAULT_WHY)
            block = Block(page, "sh", i + 1, mode, why)
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                if lines[i].strip() and not lines[i].lstrip().startswith("#"):
                    cmd = Command(lines[i], i + 1)
                    while not complete(cmd.text, comments=True) and i + 1 < len(lines):
                        i += 1
                        cmd.text += "\n" + lines[i]
                    block.commands.append(cmd)
                i += 1
            blocks.append(block)
            directive = None
        elif line.strip() == "```console":
            mode, why = directive or ("compare", "")
            block = Block(page, "console", i + 1, mode, why)
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                if lines[i].startswith("$ "):
                    cmd = Command(lines[i][2:], i + 1)
                    while not complete(cmd.text) and i + 1 < len(lines):
                        i += 1
                        cmd.text += "\n" + lines[i]
                    block.commands.append(cmd)
                elif block.commands:
                    block.commands[-1].expected.append(lines[i])
                i += 1
            blocks.append(block)
            directive = None
        elif line.strip():
            directive = None if not line.startswith("<!--") else directive
        i += 1
    return blocks


def normalize(lines):
    out = [TX_ID.sub("<uuid>", line.rstrip()) for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def run_block(block, clone, env):
    """Runs a block's commands in one bash session; returns [(command, status, output lines)]."""
    marker = f"--smoke-{uuid.uuid4().hex}--"
    script = ["exec 2>&1"]
    for n, cmd in enumerate(block.commands):
        script.append(cmd.text)
        script.append(f"__rc=$?; printf '\\n{marker} {n} %d\\n' $__rc; (exit $__rc)")
    out = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        timeout=900,
    ).stdout
    results, current = [], []
    for line in out.splitlines():
        m = re.match(rf"{marker} (\d+) (\d+)$", line)
        if m:
            results.append((block.commands[int(m.group(1))], int(m.group(2)), current))
            current = []
        else:
            current.append(line)
    if len(results) != len(block.commands):
        raise SmokeFailure(
            f"{block.page}:{block.line}: the block stopped after {len(results)} of "
            f"{len(block.commands)} commands:\n" + "\n".join(current)
        )
    return results


def check_block(block, results):
    for n, (cmd, status, output) in enumerate(results):
        first = cmd.text.splitlines()[0]
        shown_status = n + 1 < len(results) and results[n + 1][0].text.strip() == "echo $?"
        if status != 0 and not shown_status:
            raise SmokeFailure(
                f"{block.page}:{cmd.line}: `{first}` exited {status}:\n" + "\n".join(output)
            )
        if block.mode == "compare":
            want, got = normalize(cmd.expected), normalize(output)
            if want != got:
                raise SmokeFailure(
                    f"{block.page}:{cmd.line}: `{first}` printed something else.\n"
                    f"--- {block.page} shows\n" + "\n".join(want) + "\n--- it printed\n" + "\n".join(got)
                )
        say(f"  ok  {block.page}:{cmd.line}  $ {first[:90]}")


# --- the local stack --------------------------------------------------------------------------


class Stack:
    """`make run` (with its ARGS) in its own process group, as a terminal's foreground job."""

    def __init__(self, clone, env, port, command, log):
        self.clone, self.port, self.command = clone, port, command
        self.log_path = log
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=clone,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # A terminal's job gets SIGINT's default action, whatever our parent set.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )

    def tail(self, n=40):
        lines = Path(self.log_path).read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def wait_ready(self):
        url = f"http://127.0.0.1:{self.port}/transactions/{uuid.uuid4()}"
        started = last_note = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                raise SmokeFailure(
                    f"`{self.command}` exited ({self.proc.returncode}) before answering on "
                    f":{self.port}; its output ends with:\n{self.tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=5):
                    pass
                return
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    return
                raise SmokeFailure(f"GET {url} answered {e.code}")
            except (urllib.error.URLError, OSError):
                pass
            now = time.monotonic()
            if now - started > BUILD_TIMEOUT_S:
                raise SmokeFailure(f"nothing answered on :{self.port} in {BUILD_TIMEOUT_S} s")
            if now - last_note > 30:
                last = (self.tail(1) or "...").strip()
                say(f"  waiting for :{self.port} ({int(now - started)} s): {last[:100]}")
                last_note = now
            time.sleep(0.5)  # polling a process that is building and starting

    def interrupt(self):
        """Ctrl-C: SIGINT to the whole foreground group; everything must stop."""
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise SmokeFailure(f"`{self.command}` still running {STOP_TIMEOUT_S} s after Ctrl-C")
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while True:
            left = leftovers(self.clone)
            if not left:
                break
            if time.monotonic() > deadline:
                raise SmokeFailure(
                    "still running after Ctrl-C:\n" + "\n".join(left) + f"\n{self.tail()}"
                )
            time.sleep(0.2)  # the group's last processes exiting
        self.log.close()


# What `make run` keeps in a checkout (ignored by git): its data and the data lake's files. A
# fresh clone has neither; --here refuses a checkout that has them.
LOCAL_STATE = (".twopc", "data-lake")

# Processes that were running before the smoke started (with --here, the shell and make that
# run it have their working folder in the checkout): never the smoke's leftovers.
BEFORE = set()


def leftovers(clone):
    """Processes the smoke started from the clone: their command line or working folder is
    inside it, and they were not running before the smoke began (`BEFORE`)."""
    found = []
    clone = str(clone)
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid() or int(pid) in BEFORE:
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(f"/proc/{pid}/cwd")
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1]
        except OSError:
            continue
        if state == "Z":
            continue
        if clone in cmdline or cwd == clone or cwd.startswith(clone + "/"):
            found.append(f"  pid {pid}: {cmdline.strip()[:160]}")
    return found


def must_run(argv, **kwargs):
    """Runs a command to its end; its output (stdout and stderr), or a failure naming it."""
    out = subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, **kwargs
    )
    if out.returncode != 0:
        raise SmokeFailure(f"{' '.join(argv)} exited {out.returncode}:\n{out.stdout}")
    return out.stdout


def twopc(clone, env, *args):
    return must_run(["./target/debug/twopc", *args], cwd=clone, env=env)


# --- the run ----------------------------------------------------------------------------------


def smoke(clone, with_java, logs):
    # What the pages promise beyond their examples: make run (README.md) and its options
    # (docs/configuration.md).
    restart_args = 'make run ARGS="--port 3001 --in-memory"'
    reference_args = 'make run ARGS="--engine dynamodb-local --port 3001 --in-memory"'
    for page, promised in (
        ("README.md", "make run"),
        ("docs/configuration.md", restart_args),
        ("docs/configuration.md", reference_args),
    ):
        if promised not in (clone / page).read_text():
            raise SmokeFailure(f"{page} no longer shows `{promised}`: update this test")
    env = dict(with_java, PATH=path_without("java", with_java["PATH"], logs / "path-without-java"))

    say("make run, with no java on PATH (a fresh clone builds first)")
    began = time.monotonic()
    stack = Stack(clone, env, 3000, "make run", logs / "make-run-1.log")
    stack.wait_ready()
    say(f"  ok  the first answer {time.monotonic() - began:.1f} s after `make run` began")
    started = time.monotonic()
    for page in pages(clone):
        for block in console_blocks(clone, page):
            if block.mode == "skip":
                say(f"  skip {page}:{block.line} {block.why}")
                continue
            note = f" (output not compared: {block.why.strip('()')})" if block.mode == "run-only" else ""
            say(f"{page}:{block.line}: {len(block.commands)} command(s){note}")
            check_block(block, run_block(block, clone, env))

    say("the live page in headless Chromium")
    shot = logs / "live-page.png"
    page = must_run(
        ["node", str(HERE.parent / "browser" / "live-page.mjs"), "http://127.0.0.1:3000/", str(shot)]
    )
    say(f"  ok  {page.strip()}")
    with urllib.request.urlopen("http://127.0.0.1:3000/console", timeout=10) as r:
        console = r.read().decode()
    if "operator console" not in console:
        raise SmokeFailure(f"http://127.0.0.1:3000/console (README.md) is not the console:\n{console[:500]}")
    say("  ok  the console at http://127.0.0.1:3000/console")

    balances = twopc(clone, env, "accounts")
    say("Ctrl-C")
    stack.interrupt()
    say("  ok  make and twopc serve stopped")

    say("make run again: committed balances kept in .twopc/")
    stack = Stack(clone, env, 3000, "make run", logs / "make-run-2.log")
    stack.wait_ready()
    again = twopc(clone, env, "accounts")
    if again != balances:
        raise SmokeFailure(f"balances before the restart:\n{balances}after:\n{again}")
    say("  ok  the same balances after the restart")
    stack.interrupt()

    say(restart_args)
    stack = Stack(clone, env, 3001, restart_args, logs / "make-run-3.log")
    stack.wait_ready()
    url = ["--url", "http://127.0.0.1:3001"]
    fresh = twopc(clone, env, *url, "get", "accounts", "alice")
    if '"balance":100' not in fresh.replace(" ", ""):
        raise SmokeFailure(f"the in-memory stack is not freshly seeded: alice is {fresh}")
    done = twopc(clone, env, *url, "transfer", "--from", "alice", "--to", "bob", "--amount", "1")
    if not done.startswith("COMMITTED"):
        raise SmokeFailure(f"transfer on :3001: {done}")
    stack.interrupt()
    say(f"  ok  in memory on :3001; the pages' checks took {int(time.monotonic() - started)} s")

    say(f"{reference_args}, java back on PATH")
    stack = Stack(clone, with_java, 3001, reference_args, logs / "make-run-4.log")
    stack.wait_ready()
    done = twopc(clone, with_java, *url, "transfer", "--from", "alice", "--to", "bob", "--amount", "1")
    if not done.startswith("COMMITTED"):
        raise SmokeFailure(f"transfer on DynamoDB Local: {done}")
    if "DynamoDB Local" not in stack.tail(200):
        raise SmokeFailure(f"`{reference_args}` did not say it runs on DynamoDB Local:\n{stack.tail()}")
    stack.interrupt()
    say("  ok  on DynamoDB Local; it stopped with make run")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="HEAD", help="the commit to clone (default HEAD)")
    ap.add_argument("--keep", action="store_true", help="keep the clone even when it passes")
    ap.add_argument(
        "--here",
        action="store_true",
        help="run in this checkout (a fresh clone with nothing changed, as CI's is) instead of a new clone",
    )
    args = ap.parse_args()

    for port in (3000, 3001):
        if not port_free(port):
            sys.exit(f"smoke: port {port} is in use; the pages' commands need it: stop that process")
    rev = subprocess.run(
        ["git", "rev-parse", "--short", args.rev], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    if dirty and args.rev == "HEAD":
        say("note: uncommitted changes are not in a fresh clone; testing the last commit")
    work = Path(tempfile.mkdtemp(prefix="twopc-smoke-"))
    logs = work / "logs"
    logs.mkdir()
    if args.here:
        if args.rev != "HEAD":
            sys.exit("smoke: --here runs the checkout as it is; --rev needs a clone")
        state = [d for d in LOCAL_STATE if (REPO / d).exists()]
        if dirty or state:
            sys.exit(
                "smoke: --here needs a checkout as fresh as a clone: "
                + ("git reports changes or untracked files" if dirty else f"{', '.join(state)} hold data")
                + "; run make smoke without --here"
            )
        clone = REPO
        say(f"in this checkout, {rev} (--here)")
    else:
        clone = work / "dynamo-2pc"
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        subprocess.run(["git", "checkout", "--quiet", rev], cwd=clone, check=True)
        say(f"fresh clone of {rev} in {clone}")
    BEFORE.update(int(p) for p in os.listdir("/proc") if p.isdigit())
    env = clean_env()
    started = time.monotonic()
    try:
        smoke(clone, env, logs)
    except (SmokeFailure, subprocess.TimeoutExpired) as e:
        print(f"\nsmoke: FAILED: {e}", file=sys.stderr)
        for pid_line in leftovers(clone):
            pid = int(pid_line.split()[1].rstrip(":"))
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        print(f"smoke: the clone and the logs are kept in {work}", file=sys.stderr)
        sys.exit(1)
    say(f"PASSED in {int(time.monotonic() - started)} s")
    if args.here:  # leave the checkout as fresh as it was, so that --here runs again
        subprocess.run(["rm", "-rf", *(str(REPO / d) for d in LOCAL_STATE)], check=False)
    if args.keep:
        say(f"kept {work}")
    else:
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
