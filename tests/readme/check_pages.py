#!/usr/bin/env python3
"""The pages' examples and links, checked in a second (`make validate`, and so `make test`).

`make smoke` runs the examples of README.md and every other page, but takes ten minutes and a
fresh build. This checks, without running anything, what would make it miss one or mislead a
reader:

- every fenced block a reader would run (```console, ```sh, and the shells smoke.py does not
  run: bash, shell, zsh) is in a page the smoke visits, in a language it runs, with at least one
  command it would find; a block it skips says why (`<!-- smoke: skip (why) -->`), and an sh
  block, which shows no output, says whether it is run (`run-only (why)`) or skipped;
- every smoke marker is followed by a block (a marker above prose is a mistake);
- every relative link of those pages names a file that exists, and an anchor (`#...`) one of
  the headings of the page it points into;
- every citation of a page's section (`docs/protocol.md, "The lock rule"`, `README, "A
  transaction"`) in the repository's tracked text names a heading or a bold lead-in that page
  has;
- the README's layout map names every crate under crates/ (`crates/<name>` at a line's start);
- every `make <target> VAR=...` a page shows (in a block or a code span) sets a variable the
  target reads (`$(VAR)` in its recipe, or in a script the recipe runs);
- docs/deploy.md's prerequisites ("Before the first deploy") name, as code, every program its
  AWS examples run (the blocks skipped for needing an AWS account), and those the make targets
  they run call (`cargo`; `rustup` for a cross-build; `python3` for the tools' virtualenvs);
  with a Secrets Manager reference in template.yaml, the deployer's
  `secretsmanager:GetSecretValue`; with the lake bucket versioned, "Take it down" deletes its
  versions and delete markers.

Standard library only; exit status 1 and one line per problem when anything fails.
"""

import re
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True  # no __pycache__ beside the tests
import smoke  # noqa: E402  (the smoke test's own page list and parser: one truth)

SHELL_LANGS = ("bash", "shell", "zsh")
FENCE = re.compile(r"^\s*```\s*([\w+-]*)")
# [text](target): not images' sizes, not reference links; inline code is removed first.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`]*`")
# A page's section cited by name: docs/protocol.md, "The lock rule" / docs/x.md`, "..." /
# docs/x.md ("...") / README, "..." / README "..." (a Rust string may escape the quotes).
CITATION = re.compile(
    r"(README(?:\.md)?|docs/[\w-]+\.md)`?(?:,\s*|\s*\(\s*|\s+)\\?\"([^\"\\\n]{3,80})\\?\""
)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = CODE_SPAN.sub(lambda m: m.group(0).strip("`"), heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path):
    """(headings, bold lead-ins) of a Markdown file, outside fenced blocks."""
    heads, bold, fenced = [], [], False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.startswith("#"):
            heads.append(line.lstrip("#").strip())
        bold += re.findall(r"\*\*([^*]+)\*\*", line)
    return heads, bold


def check_blocks(page, problems):
    """The example blocks of one page, as the smoke would parse them."""
    lines = (ROOT / page).read_text().splitlines()
    parsed = {b.line: b for b in smoke.console_blocks(ROOT, page)}
    fenced, pending_marker = False, None
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if m and not fenced:
            fenced = True
            lang = m.group(1)
            if pending_marker and lang not in smoke.EXAMPLE_LANGS:
                problems.append(f"{page}:{pending_marker}: a smoke marker above a ```{lang} block, which the smoke does not run")
            pending_marker = None
            if lang in SHELL_LANGS:
                problems.append(f"{page}:{n}: a ```{lang} block: write it as ```console (with `$ ` and the output) or ```sh so the smoke runs it")
            elif lang in smoke.EXAMPLE_LANGS:
                block = parsed.get(n)
                if block is None:
                    problems.append(f"{page}:{n}: the smoke's parser does not see this ```{lang} block")
                elif not block.commands:
                    problems.append(f"{page}:{n}: no command the smoke would run (a console command starts with `$ `)")
                elif block.mode in ("skip", "run-only") and block.why and not re.fullmatch(r"\(.+\)", block.why):
                    problems.append(f"{page}:{n}: say why in parentheses: <!-- smoke: {block.mode} (why) -->")
                elif block.mode == "skip" and not block.why:
                    problems.append(f"{page}:{n}: a skipped block must say why: <!-- smoke: skip (why) -->")
                elif lang == "sh" and block.why == smoke.SH_DEFAULT_WHY:
                    problems.append(
                        f"{page}:{n}: an sh block shows no output: say whether the smoke runs it, "
                        "<!-- smoke: run-only (why) --> or <!-- smoke: skip (why) --> (or show it as ```console)"
                    )
            continue
        if m and fenced:
            fenced = False
            continue
        if fenced:
            continue
        if smoke.MARKER.match(line):
            if pending_marker:
                problems.append(f"{page}:{pending_marker}: a smoke marker with no block under it")
            pending_marker = n
        elif line.strip() and not line.lstrip().startswith("<!--") and pending_marker:
            problems.append(f"{page}:{pending_marker}: a smoke marker with no block under it")
            pending_marker = None
    if pending_marker:
        problems.append(f"{page}:{pending_marker}: a smoke marker with no block under it")


def check_links(page, problems):
    path = ROOT / page
    fenced = False
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in LINK.findall(CODE_SPAN.sub("", line)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                problems.append(f"{page}:{n}: a link to {target}, which does not exist")
            elif anchor and dest.suffix == ".md":
                if anchor not in {slug(h) for h in headings(dest)[0]}:
                    problems.append(f"{page}:{n}: a link to {target}: {dest.name} has no such heading")


def check_citations(problems):
    """Section names cited anywhere in the tracked text exist in the page they name."""
    files = subprocess.run(
        ["git", "ls-files", "*.md", "*.rs", "*.py", "*.yaml", "*.toml", "Makefile", "*.mjs", "*.sh"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()
    cache = {}
    for f in files:
        path = ROOT / f
        if not path.exists() or path == Path(__file__).resolve():  # its own examples
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for page, title in CITATION.findall(line):
                page = "README.md" if page.startswith("README") else page
                if not (ROOT / page).exists():
                    problems.append(f"{f}:{n}: cites {page}, which does not exist")
                    continue
                heads, bold = cache.setdefault(page, headings(ROOT / page))
                if not any(h.startswith(title) or title in h for h in heads) and not any(
                    b.startswith(title) for b in bold
                ):
                    problems.append(f'{f}:{n}: cites {page}, "{title}": no such heading there')


def check_layout(problems):
    """The README's layout map shows every crate of the workspace."""
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"^crates/([\w-]+)", readme, flags=re.M))
    for crate in sorted(p.name for p in (ROOT / "crates").iterdir() if (p / "Cargo.toml").exists()):
        if crate not in named:
            problems.append(f"README.md: the layout map does not name crates/{crate}")


DEPLOY_PAGE = "docs/deploy.md"
# What a shell runs without installing anything.
BUILTINS = {"export", "cd", "echo", "source", ".", "set", "unset", "read", "test", "[", "true", "false"}
# Programs a make recipe may call that a machine must have (the rest come from .tools/).
SYSTEM_TOOLS = ("cargo", "python3", "npm", "java", "docker")
SUBST = re.compile(r"\$\(([^()]*)\)")


def programs(command):
    """The programs a shell command runs: the first word of each of its commands, and of
    each $(...) in it (paths into the repository are not programs to install)."""
    found = set()
    for inner in SUBST.findall(command):
        found |= programs(inner)
    lexer = shlex.shlex(SUBST.sub("X", command.replace("\\\n", " ")), posix=True,
                        punctuation_chars=";&|")
    start = True
    for token in lexer:
        if token and set(token) <= set(";&|"):
            start = True
            continue
        if start and not re.match(r"[A-Za-z_][A-Za-z0-9_]*=", token):
            start = False
            if token not in BUILTINS and "/" not in token:
                found.add(token)
    return found


def make_rules():
    """The Makefile's targets: {target: (prerequisites, recipe text)}."""
    rules, current = {}, None
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"^([a-z][\w-]*):(?!=)([^#]*)", line)
        if m:
            current = m.group(1)
            rules[current] = (m.group(2).split(), [])
        elif line.startswith("\t") and current:
            rules[current][1].append(line)
        elif line.strip() and not line.startswith("#"):
            current = None
    return {k: (deps, "\n".join(recipe)) for k, (deps, recipe) in rules.items()}


def recipe_of(target, rules, seen=None):
    """A target's recipe with its prerequisites' (what `make target` runs)."""
    seen = seen if seen is not None else set()
    if target in seen or target not in rules:
        return ""
    seen.add(target)
    deps, recipe = rules[target]
    return "\n".join([recipe, *(recipe_of(d, rules, seen) for d in deps)])


def make_calls(text):
    """(target, [VAR, ...]) of each `make` a command line runs."""
    out = []
    for m in re.finditer(r"(?:^|[;&|(]\s*)make((?:\s+[^\s;&|#`]+)+)", text, flags=re.M):
        words = shlex.split(m.group(1), comments=True) if smoke.complete(m.group(1)) else m.group(1).split()
        targets = [w for w in words if "=" not in w and not w.startswith("-")]
        assigned = [w.split("=", 1)[0] for w in words if re.match(r"[A-Z_][A-Z0-9_]*=", w)]
        out += [(t, assigned) for t in targets[:1]]
    return out


def section(page, title):
    """A page's text under the heading starting with `title`, to the next heading of its level."""
    text, out, level = (ROOT / page).read_text().splitlines(), [], None
    for line in text:
        m = re.match(r"^(#+)\s+(.*)", line)
        if m and level is not None and len(m.group(1)) <= level:
            break
        if m and level is None and m.group(2).startswith(title):
            level = len(m.group(1))
            continue
        if level is not None:
            out.append(line)
    return "\n".join(out)


def check_make_variables(page, problems, rules):
    """Each variable a page passes to a make target is one the target reads."""
    path = ROOT / page
    shown = [c.text for b in smoke.console_blocks(ROOT, page) for c in b.commands]
    shown += [span.strip("`") for span in CODE_SPAN.findall(path.read_text())]
    for text in shown:
        for target, variables in make_calls(text):
            if target not in rules:
                continue
            recipe = recipe_of(target, rules)
            scripts = [ROOT / f for f in re.findall(r"[\w./-]+\.(?:py|sh)\b", recipe) if (ROOT / f).exists()]
            for var in variables:
                read = f"$({var})" in recipe or any(
                    re.search(rf"[\"'$]{{?{var}\b", f.read_text()) for f in scripts)
                if not read:
                    problems.append(f"{page}: `make {target} {var}=...`: make {target} does not read {var}")


def check_deploy_page(problems, rules):
    """docs/deploy.md's prerequisites name what its AWS examples need; its teardown fits the
    template's bucket."""
    needed = set()
    for block in smoke.console_blocks(ROOT, DEPLOY_PAGE):
        if block.mode != "skip" or "AWS account" not in (block.why or ""):
            continue
        for command in block.commands:
            needed |= programs(command.text)
            for target, _ in make_calls(command.text):
                recipe = recipe_of(target, rules)
                needed |= {t for t in SYSTEM_TOOLS if re.search(rf"(?<![\w/-]){t}\b", recipe)}
                if "--arm64" in recipe:
                    needed.add("rustup")  # the cross-build's target comes from rustup
    before = section(DEPLOY_PAGE, "Before the first deploy")
    named = {span.strip("`").split()[0] for span in CODE_SPAN.findall(before) if span.strip("`").strip()}
    for program in sorted(needed - named):
        problems.append(f'{DEPLOY_PAGE}, "Before the first deploy": the AWS examples run '
                        f"`{program}`, which the prerequisites do not name (as `{program}`)")
    template = (ROOT / "template.yaml").read_text()
    if "{{resolve:secretsmanager:" in template and "secretsmanager:GetSecretValue" not in before:
        problems.append(f'{DEPLOY_PAGE}, "Before the first deploy": template.yaml resolves secrets at '
                        "deploy, with the deployer's credentials: name secretsmanager:GetSecretValue")
    bucket = re.search(r"^  LakeBucket:\n((?:(?:    |\s*$).*\n)*)", template, flags=re.M)
    if bucket and re.search(r"VersioningConfiguration:\s+Status: Enabled", bucket.group(1)):
        down = section(DEPLOY_PAGE, "Take it down")
        if "delete marker" not in down or "version" not in down:
            problems.append(f'{DEPLOY_PAGE}, "Take it down": the lake bucket is versioned; emptying '
                            "it means deleting its object versions and delete markers: say so")


def main():
    problems = []
    check_layout(problems)
    rules = make_rules()
    check_deploy_page(problems, rules)
    visited = smoke.pages(ROOT)
    for page in visited:
        check_blocks(page, problems)
        check_links(page, problems)
        check_make_variables(page, problems, rules)
    check_citations(problems)
    for p in problems:
        print(f"check_pages: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    blocks = sum(len(smoke.console_blocks(ROOT, p)) for p in visited)
    print(f"check_pages: {len(visited)} pages, {blocks} example blocks, links and citations ok")


if __name__ == "__main__":
    main()
