#!/usr/bin/env python3
"""Checks docs/openapi.json and docs/participant-openapi.json and what they describe, with
existing validators.

- The document itself: openapi-spec-validator (OpenAPI 3.1).
- Instances against its schemas: openapi-schema-validator's OAS31Validator (JSON Schema 2020-12
  with OpenAPI's dialect and formats), each resolved inside the document by JSON pointer:
  * the document's own examples;
  * the API Gateway events in events/coordinator-*.json (path, Idempotency-Key, body);
  * the requests the README and the other pages show (curl -d bodies, `twopc submit` bodies,
    the ```json block under "A transaction" in docs/api.md) and the JSON answers printed under
    their curl commands, read from the pages themselves (every tracked Markdown file);
  * with --answers FILE (- for stdin): answers the real handler gave, as a JSON list of
    {"method", "path", "status", "body"} (crates/coordinator/tests/openapi.rs sends them).

This script only finds the operation and the response (by method, path and status) and hands
the instance to the validators. Run by `make validate` (and so `make test`), with the pinned
packages of .tools/venv. Exit status 1 and one line per failure when anything does not validate.
"""

import argparse
import json
import re
import shlex
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import referencing
import referencing.jsonschema
from openapi_schema_validator import OAS31Validator, oas31_format_checker
from openapi_spec_validator import validate as validate_spec

ROOT = Path(__file__).resolve().parents[2]
# Numbers as exact decimals, as the coordinator reads them (a float would round 38 digits).
load = lambda text: json.loads(text, parse_float=Decimal)


class Checker:
    def __init__(self, doc, uri="urn:dynamo-2pc:openapi"):
        self.doc = doc
        self.uri = uri
        resource = referencing.Resource.from_contents(
            doc, default_specification=referencing.jsonschema.DRAFT202012
        )
        self.registry = referencing.Registry().with_resource(uri, resource)
        self.failures = []
        self.checked = 0

    def schema_errors(self, pointer, instance):
        """The validator's errors for `instance` against the schema at `pointer` in the doc."""
        validator = OAS31Validator(
            {"$ref": f"{self.uri}#{pointer}"},
            registry=self.registry,
            format_checker=oas31_format_checker,
        )
        return [
            f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in validator.iter_errors(instance)
        ]

    def check(self, what, pointer, instance):
        self.checked += 1
        for error in self.schema_errors(pointer, instance):
            self.failures.append(f"{what}: {error}")

    def fail(self, what, message):
        self.failures.append(f"{what}: {message}")

    # ---------------------------------------------------------------- operations

    def operation(self, method, path):
        """(pointer to the operation, its path parameters), or None."""
        for template, item in self.doc["paths"].items():
            names = re.findall(r"{(\w+)}", template)
            pattern = "^" + re.sub(r"{\w+}", "([^/]+)", template) + "/?$"
            m = re.match(pattern, path)
            if m and method.lower() in item:
                esc = template.replace("~", "~0").replace("/", "~1")
                return f"/paths/{esc}/{method.lower()}", dict(zip(names, m.groups()))
        return None

    def resolve(self, node):
        while "$ref" in node:
            node = self.pointer(node["$ref"].lstrip("#"))
        return node

    def pointer(self, ptr):
        node = self.doc
        for part in ptr.strip("/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def parameters(self, op_ptr):
        """(pointer, parameter object) of an operation's parameters."""
        params = self.pointer(op_ptr).get("parameters", [])
        out = []
        for i, p in enumerate(params):
            ptr = f"{op_ptr}/parameters/{i}"
            if "$ref" in p:
                ptr = p["$ref"].lstrip("#")
            out.append((ptr, self.resolve(p)))
        return out

    def request(self, what, method, path, headers, body):
        """A request: its operation exists, its parameters and body validate."""
        found = self.operation(method, path)
        if found is None:
            return self.fail(what, f"{method} {path} is no operation of the document")
        op_ptr, path_params = found
        lower = {k.lower(): v for k, v in headers.items()}
        for ptr, p in self.parameters(op_ptr):
            value = (
                path_params.get(p["name"])
                if p["in"] == "path"
                else lower.get(p["name"].lower())
                if p["in"] == "header"
                else None
            )
            if value is None:
                if p.get("required"):
                    self.fail(what, f"missing parameter {p['name']}")
                continue
            self.check(f"{what} ({p['name']})", f"{ptr}/schema", value)
        body_spec = self.pointer(op_ptr).get("requestBody")
        if body is None:
            if body_spec and body_spec.get("required"):
                self.fail(what, "no body")
            return
        if not body_spec:
            return self.fail(what, "a body, but the operation takes none")
        self.check(f"{what} (body)", f"{op_ptr}/requestBody/content/application~1json/schema", body)

    def answer(self, what, method, path, status, body):
        """An answer: declared for its operation (or among the answers to no operation) and
        status, and its body validates."""
        found = self.operation(method, path)
        base = found[0] if found else "/x-other-answers"
        responses = self.pointer(base)["responses"]
        if str(status) not in responses:
            return self.fail(what, f"status {status} is not declared for {method} {path}")
        ptr = f"{base}/responses/{status}"
        if "$ref" in responses[str(status)]:
            ptr = responses[str(status)]["$ref"].lstrip("#")
        self.check(f"{what} ({status})", f"{ptr}/content/application~1json/schema", body)

    def answer_of_unknown_status(self, what, method, path, body):
        """An answer printed without its status (curl -s): it must validate against exactly one
        of its operation's declared answers, whose status is returned."""
        op_ptr, _ = self.operation(method, path)
        fits = []
        for status, response in self.pointer(op_ptr)["responses"].items():
            ptr = f"{op_ptr}/responses/{status}"
            if "$ref" in response:
                ptr = response["$ref"].lstrip("#")
            if "application/json" in self.pointer(ptr).get("content", {}):
                if not self.schema_errors(f"{ptr}/content/application~1json/schema", body):
                    fits.append(status)
        self.checked += 1
        if len(fits) != 1:
            return self.fail(what, f"fits the declared answers {fits}, not exactly one")
        return fits[0]

    # ---------------------------------------------------------------- the document's examples

    def examples(self):
        def walk(node, ptr):
            if isinstance(node, dict):
                if "schema" in node and "examples" in node:
                    for name, ex in node["examples"].items():
                        self.check(f"example {ptr}/examples/{name}", f"{ptr}/schema", ex["value"])
                if "schema" in node and "example" in node:
                    self.check(f"example {ptr}/example", f"{ptr}/schema", node["example"])
                for k, v in node.items():
                    walk(v, f"{ptr}/{k.replace('~', '~0').replace('/', '~1')}")
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    walk(v, f"{ptr}/{i}")

        walk(self.doc, "")


# -------------------------------------------------------------------- events/


def check_events(checker):
    files = sorted((ROOT / "events").glob("coordinator-*.json"))
    if not files:
        checker.fail("events/", "no coordinator-*.json samples")
    for f in files:
        event = load(f.read_text())
        body = event.get("body")
        checker.request(
            f"events/{f.name}",
            event["httpMethod"],
            event["path"],
            event.get("headers") or {},
            None if body is None else load(body),
        )


# -------------------------------------------------------------------- the pages


def blocks(text):
    """(language, first line number, lines, heading) of each fenced block."""
    out, heading, lang, start, lines = [], None, None, 0, []
    for n, line in enumerate(text.splitlines(), 1):
        if lang is None:
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
            elif line.startswith("```"):
                lang, start, lines = line[3:].strip(), n + 1, []
        elif line.startswith("```"):
            out.append((lang, start, lines, heading))
            lang = None
        else:
            lines.append(line)
    return out


def commands(lines, prompt):
    """(line index, argv, output lines) of each command: a command goes on over the following
    lines while its quotes are open; with a prompt ("$ "), what follows up to the next prompt is
    its output."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if prompt and not line.startswith(prompt):
            i += 1
            continue
        start, text = i, line[len(prompt) :]
        while True:
            try:
                argv = shlex.split(text, comments=not prompt)
                if text.rstrip().endswith("\\"):
                    raise ValueError("continued")
                break
            except ValueError:
                i += 1
                if i >= len(lines):
                    argv = []
                    break
                text = text.rstrip().rstrip("\\") + "\n" + lines[i]
        i += 1
        output = []
        while prompt and i < len(lines) and not lines[i].startswith(prompt):
            output.append(lines[i])
            i += 1
        out.append((start, argv, output))
    return out


def pipelines(argv):
    """A command line split at |, ; and &&."""
    part = []
    for word in argv:
        if word in ("|", ";", "&&"):
            yield part
            part = []
        else:
            part.append(word)
    yield part


def curl_request(argv):
    """(method, path, headers, body) of a curl command line."""
    method, url, headers, data = None, None, {}, None
    it = iter(argv[1:])
    for word in it:
        if word in ("-X", "--request"):
            method = next(it)
        elif word in ("-H", "--header"):
            name, _, value = next(it).partition(":")
            headers[name.strip()] = value.strip()
        elif word in ("-d", "--data", "--data-raw"):
            data = next(it)
        elif word in ("--aws-sigv4", "--user", "-u", "-o"):
            next(it)
        elif not word.startswith("-"):
            url = word
    path = re.sub(r"^(https?://[^/]+|\$API)", "", url or "")
    # A placeholder the reader fills in (`/transactions/<txId>`) stands for a real id.
    path = re.sub(r"<[A-Za-z]+>", "0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69", path)
    return method or ("POST" if data is not None else "GET"), path, headers, data


def pages():
    """README.md and every other tracked Markdown file (the pages make smoke runs)."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return ["README.md"] + sorted(p for p in tracked if p != "README.md")


def check_readme(checker):
    found = {"curl": 0, "answers": 0, "submit": 0, "json": 0}
    for page in pages():
        check_page(checker, page, found)
    for kind, n in found.items():
        if n == 0:
            checker.fail("README.md, docs/", f"no {kind} example found: have the pages changed shape?")
    return found


def check_page(checker, page, found):
    text = (ROOT / page).read_text()
    for lang, start, lines, heading in blocks(text):
        if lang == "json" and heading == "A transaction":
            # "POST /transactions            Idempotency-Key: order-42", then the body.
            first = lines[0].split()
            method, path = first[0], first[1]
            headers = dict([" ".join(first[2:]).split(": ", 1)]) if len(first) > 2 else {}
            checker.request(f"{page}:{start}", method, path, headers, load("\n".join(lines[1:])))
            found["json"] += 1
        if lang not in ("console", "sh"):
            continue
        prompt = "$ " if lang == "console" else ""
        for i, argv, output in commands(lines, prompt):
            where = f"{page}:{start + i}"
            for part in pipelines(argv):
                if part[:1] == ["curl"]:
                    method, path, headers, data = curl_request(part)
                    if checker.operation(method, path) is None:
                        continue  # not the API (the demo's /services/payments)
                    statuses = [
                        checker.answer_of_unknown_status(f"{where} (answer)", method, path, load(line))
                        for line in output
                        if line.startswith("{")
                    ]
                    found["answers"] += len(statuses)
                    # A request a page shows refused need not fit the schema (it may be
                    # refused for what the schema sees, as the coordinator does).
                    if not any(s and int(s) >= 400 for s in statuses):
                        body = None if data is None else load(data)
                        checker.request(where, method, path, headers, body)
                    found["curl"] += 1
            # echo '{...}' | twopc submit -: the body POSTed to /transactions.
            parts = list(pipelines(argv))
            if len(parts) == 2 and parts[0][:1] == ["echo"] and parts[1][-2:] == ["submit", "-"]:
                checker.request(where, "POST", "/transactions", {}, load(parts[0][1]))
                found["submit"] += 1


# -------------------------------------------------------------------- the participant's document


def check_participant_doc():
    """docs/participant-openapi.json: the document, its examples, the custom-participant events."""
    doc = json.loads((ROOT / "docs/participant-openapi.json").read_text())
    validate_spec(doc)  # raises on an invalid document
    checker = Checker(doc, "urn:dynamo-2pc:participant-openapi")
    checker.examples()
    files = sorted((ROOT / "events").glob("custom-participant-*.json"))
    if not files:
        checker.fail("events/", "no custom-participant-*.json samples")
    for f in files:
        event = load(f.read_text())
        # The lambda transport carries no signing headers: the body alone.
        found = checker.operation("POST", f"/{event['action']}")
        if found is None:
            checker.fail(f"events/{f.name}", f"action {event['action']!r} is no path of the document")
            continue
        body = f"{found[0]}/requestBody/content/application~1json/schema"
        checker.check(f"events/{f.name} (request)", body, event["request"])
    return doc, checker


# -------------------------------------------------------------------- main


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", help="a JSON list of handler answers to check (- for stdin)")
    args = parser.parse_args()

    doc = json.loads((ROOT / "docs/openapi.json").read_text())
    validate_spec(doc)  # raises on an invalid document
    checker = Checker(doc)
    checker.examples()
    check_events(checker)
    readme = check_readme(checker)
    answers = 0
    if args.answers:
        stream = sys.stdin if args.answers == "-" else open(args.answers)
        for a in load(stream.read()):
            checker.answer(f"answer {a['method']} {a['path']}", a["method"], a["path"], a["status"], a["body"])
            answers += 1

    for f in checker.failures:
        print(f"openapi: {f}", file=sys.stderr)
    print(
        f"docs/openapi.json: valid OpenAPI {doc['openapi']}; {checker.checked} instances checked "
        f"(examples, events, pages {readme}, {answers} handler answers), "
        f"{len(checker.failures)} failures"
    )
    pdoc, participant = check_participant_doc()
    for f in participant.failures:
        print(f"participant-openapi: {f}", file=sys.stderr)
    print(
        f"docs/participant-openapi.json: valid OpenAPI {pdoc['openapi']}; {participant.checked} "
        f"instances checked (examples, events), {len(participant.failures)} failures"
    )
    return 1 if checker.failures or participant.failures else 0


if __name__ == "__main__":
    sys.exit(main())
