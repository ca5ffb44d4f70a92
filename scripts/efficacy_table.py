#!/usr/bin/env python3
"""The efficacy table of benches/RESULTS.md: {embedded default, examples/agentdojo} x {with
lineage, without} per suite, as Markdown rows, from `warden efficacy --format json`.

Usage: python3 scripts/efficacy_table.py [WARDEN] [CORPUS]
(defaults: target/release/warden, benches/efficacy/agentdojo.tar.gz)"""
import json
import subprocess
import sys

warden = sys.argv[1] if len(sys.argv) > 1 else "target/release/warden"
corpus = sys.argv[2] if len(sys.argv) > 2 else "benches/efficacy/agentdojo.tar.gz"
POLICIES = [("embedded default", []), ("`examples/agentdojo/`", ["--policy", "examples/agentdojo/policy.ward"])]
VARIANTS = [("vm", "with (`agentdojo-vm`)"), ("raw", "without (`agentdojo-raw`, inference)")]


def cell(n, d, bold):
    pct = f"{100.0 * n / d:.1f}".rstrip("0").rstrip(".") if d else "—"
    s = f"{n}/{d} {pct}%"
    return f"**{s}**" if bold else s


print("| policy | lineage | suite | streams | attacker calls blocked | attacks stopped | benign calls blocked | benign tasks disturbed |")
print("|---|---|---|---|---|---|---|---|")
for name, args in POLICIES:
    for variant, label in VARIANTS:
        out = subprocess.run(
            [warden, "efficacy", *args, "--variant", variant, "--format", "json", corpus],
            capture_output=True, text=True, check=True,
        ).stdout
        d = json.loads(out)
        rows = list(d["suites"].items()) + [("**all**", d["total"])]
        for suite, s in rows:
            bold = suite == "**all**"
            print(
                f"| {name} | {label} | {suite} | {s['streams']} | "
                f"{cell(s['attacker_calls_blocked'], s['attacker_calls'], bold)} | "
                f"{cell(s['attacks_stopped'], s['successful_attacks'], bold)} | "
                f"{cell(s['benign_calls_blocked'], s['benign_calls'], bold)} | "
                f"{cell(s['benign_tasks_disturbed'], s['benign_tasks'], bold)} |"
            )
