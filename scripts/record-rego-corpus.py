#!/usr/bin/env python3
"""Records the Rego conformance corpus (tests/rego/corpus/) from a real OPA.

Each `NAME.json` beside `NAME.rego` lists cases: a rule (or a function, with `args`) and the
`input` it is evaluated with. This script evaluates every case in OPA and writes what OPA
answers into the case: `"expect": VALUE`, `"undefined": true`, or `"error": KIND` with OPA's
`"message"`. Everything else in a case (`difference`, `warden`: a documented difference, see
docs/rego.md) is kept as written. The file also gets the OPA version that answered.

OPA comes from the PyPI package opa-golib-python-bindings, which embeds OPA as a Go shared
library (scripts/install-opa-python.sh installs it in a virtualenv; run this script with that
virtualenv's python).

    record-rego-corpus.py           rewrite the corpus files with OPA's answers
    record-rego-corpus.py --check   fail (exit 1, with a diff) if a file differs from what OPA
                                    answers now: the corpus cannot drift from OPA
"""

import difflib
import json
import math
import pathlib
import re
import sys

from opa_bindings import engine as opa

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "rego" / "corpus"
ORIGIN = (
    "recorded from OPA (the opa-golib-python-bindings package) by "
    "scripts/record-rego-corpus.py; do not edit expect/undefined/error by hand"
)
# Keys the recording owns; any other key of a case is the author's and is kept.
RECORDED = ("expect", "undefined", "error", "message")


def opa_version():
    """The OPA module version linked into the bindings' shared library (its Go build info)."""
    lib = pathlib.Path(opa.__file__).parent / "libopabridge.so"
    found = re.search(rb"\tgithub\.com/open-policy-agent/opa\tv([0-9][0-9A-Za-z.+-]*)\t", lib.read_bytes())
    if not found:
        sys.exit(f"cannot find the OPA version in {lib}")
    return found.group(1).decode()


def normal(v):
    """JSON from OPA with integral floats as integers (Python reads `1e3` as 1000.0)."""
    if isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    if isinstance(v, list):
        return [normal(x) for x in v]
    if isinstance(v, dict):
        return {k: normal(x) for k, x in v.items()}
    return v


def error_kind(message):
    found = re.search(r"\b([a-z_]+_error)\b", message)
    return found.group(1) if found else "error"


def evaluate(e, package, case):
    """OPA's answer to one case, as the keys to put in it."""
    rule = case["rule"]
    try:
        if "args" in case:
            args = ", ".join(json.dumps(a, ensure_ascii=False) for a in case["args"])
            rows = e.eval_query(f"x := {package}.{rule}({args})", input=case["input"])
            if not rows:
                return {"undefined": True}
            return {"expect": normal(rows[0]["x"])}
        path = package.removeprefix("data.") + "." + rule
        return {"expect": normal(e.eval_document(path, input=case["input"]))}
    except opa.OpaUndefinedError:
        return {"undefined": True}
    except opa.OpaError as err:
        kind = error_kind(err.message)
        if err.code != "eval_error":
            # A parse, compile or type error is a mistake in the corpus, not an answer.
            sys.exit(f"OPA cannot evaluate {package}.{rule}: {err}")
        return {"error": kind, "message": err.message}


def dump_case(case):
    return json.dumps(case, ensure_ascii=False, separators=(", ", ": "))


def render(spec):
    """The file as this script writes it: one case per line."""
    head = {k: v for k, v in spec.items() if k != "cases"}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},")
    lines.append('  "cases": [')
    cases = spec["cases"]
    for i, c in enumerate(cases):
        lines.append("    " + dump_case(c) + ("," if i + 1 < len(cases) else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def record(path, version):
    spec = json.loads(path.read_text())
    package = spec["package"]
    e = opa.OpaEngine()
    e.print_handler = lambda *_: None
    modules = [path.with_suffix(".rego").name] + spec.get("modules", [])
    for m in modules:
        try:
            e.add_policy(m, (CORPUS / m).read_text())
        except opa.OpaError as err:
            sys.exit(f"OPA refuses {m}: {err}")
    if "data" in spec:
        e.add_data(json.loads((CORPUS / spec["data"]).read_text()))
    cases = []
    for case in spec["cases"]:
        mine = {k: v for k, v in case.items() if k not in RECORDED}
        answer = evaluate(e, package, mine)
        # rule, args, input first; then OPA's answer; then the author's notes.
        out = {k: mine[k] for k in ("rule", "args", "input") if k in mine}
        out.update(answer)
        out.update({k: v for k, v in mine.items() if k not in out})
        cases.append(out)
    e.close()
    new = {"origin": ORIGIN, "opa_version": version}
    new.update({k: v for k, v in spec.items() if k not in ("origin", "opa_version", "cases")})
    new["cases"] = cases
    return render(new)


def main():
    check = "--check" in sys.argv[1:]
    version = opa_version()
    files = sorted(CORPUS.glob("*.json"))
    files = [f for f in files if f.with_suffix(".rego").exists()]
    if not files:
        sys.exit(f"no corpus files in {CORPUS}")
    drift = 0
    cases = 0
    for f in files:
        text = record(f, version)
        cases += text.count('"rule": ')
        old = f.read_text()
        if text == old:
            continue
        if check:
            drift += 1
            rel = f.relative_to(ROOT)
            sys.stdout.writelines(
                difflib.unified_diff(
                    old.splitlines(True), text.splitlines(True), f"{rel} (checked in)", f"{rel} (OPA {version})"
                )
            )
        else:
            f.write_text(text)
    if drift:
        print(
            f"{drift} corpus file(s) differ from what OPA {version} answers; "
            "run scripts/record-rego-corpus.py and commit the result",
            file=sys.stderr,
        )
        sys.exit(1)
    print(f"{len(files)} corpus files, {cases} cases: {'as OPA' if check else 'recorded from OPA'} {version}")


if __name__ == "__main__":
    main()
