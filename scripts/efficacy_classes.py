#!/usr/bin/env python3
"""The per-class efficacy table of benches/RESULTS.md (issue 30): the embedded default and
examples/agentdojo, with and without lineage, on AgentDojo's own attacks
(benches/efficacy/agentdojo.tar.gz) and on the adversarial corpus built from the same benign
runs (benches/efficacy/adversarial.tar.gz: new goals, harm without a destination, the user's
own destination with an attacker's amount or content, exfiltration inside the workspace, URL
smuggling), with benign tasks denied and asked apart. Run after `cargo build --release`."""
import json
import subprocess

WARDEN = "target/release/warden"
POLICIES = [("embedded default", None), ("`examples/agentdojo/`", "examples/agentdojo/policy.ward")]
CLASSES = ["agentdojo", "new_goal", "no_destination", "own_destination", "internal_exfil", "url_smuggling"]


def run(corpus, variant, policy):
    cmd = [WARDEN, "efficacy", "--variant", variant, "--format", "json", f"benches/efficacy/{corpus}.tar.gz"]
    if policy:
        cmd += ["--policy", policy]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def frac(n, d):
    return f"{n}/{d} {100 * n / d:.1f}%" if d else "-"


print("| policy | lineage | " + " | ".join(CLASSES) + " | benign denied | benign asked | benign disturbed |")
print("|---|---|" + "---|" * (len(CLASSES) + 3))
for name, policy in POLICIES:
    for variant, lineage in [("vm", "with"), ("raw", "without")]:
        cells = {}
        benign = {"d": 0, "a": 0, "x": 0, "n": 0}
        for corpus in ["agentdojo", "adversarial"]:
            r = run(corpus, variant, policy)
            for c, v in r["classes"].items():
                cells[c] = frac(v["attacker_calls_blocked"], v["attacker_calls"])
            for v in r["benign_sets"].values():
                benign["d"] += v["benign_tasks_denied"]
                benign["a"] += v["benign_tasks_asked"]
                benign["x"] += v["benign_tasks_disturbed"]
                benign["n"] += v["benign_tasks"]
        row = [cells.get(c, "-") for c in CLASSES]
        row += [frac(benign["d"], benign["n"]), frac(benign["a"], benign["n"]), frac(benign["x"], benign["n"])]
        print(f"| {name} | {lineage} | " + " | ".join(row) + " |")
