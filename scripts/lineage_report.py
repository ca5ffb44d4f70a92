#!/usr/bin/env python3
"""How closely Warden's lineage inference reproduces declared lineage, per argument.

usage: lineage_report.py WARDEN CORPUS_DIR   (CORPUS_DIR holds agentdojo-vm/ and agentdojo-raw/)

Both variants of every stream are replayed with `--explain` through scripts/lineage_probe.ward,
whose rules only call `sources(args.NAME)` for every argument name in the corpus. With lineage
(`agentdojo-vm`) `sources` reads the declared `derived_from`; without (`agentdojo-raw`) it reads
what Warden inferred. For each argument of each toolCallRequest the two origin sets are compared:
same, superset (inference found more), subset (found less), overlapping, or disjoint.
"""
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def sources(warden, variant_dir):
    streams = sorted(glob.glob(os.path.join(variant_dir, "*", "*", "*.acs.jsonl")))
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "all.jsonl")
        keys = []
        with open(trace, "w") as f:
            for s in streams:
                rel = os.path.relpath(s, variant_dir)
                for line in open(s):
                    q = json.loads(line)
                    keys.append((rel, q["params"]["request_id"], q["method"]))
                    f.write(line.rstrip("\n") + "\n")
        res = subprocess.run(
            [warden, "replay", "--explain", "--policy", os.path.join(HERE, "lineage_probe.ward"), trace],
            capture_output=True, text=True, check=True,
        ).stdout.splitlines()
    for (rel, rid, method), line in zip(keys, res):
        if method != "steps/toolCallRequest":
            continue
        w = json.loads(line).get("result", {}).get("policy_data", {}).get("warden", {})
        for rule in w.get("rules", []):
            for c in rule.get("checks", []):
                t = c.get("text", "")
                if c.get("kind") == "call" and t.startswith("sources(args."):
                    got = c.get("returned")
                    if isinstance(got, str):
                        try:
                            got = json.loads(got)
                        except ValueError:
                            continue
                    if isinstance(got, list):
                        out[(rel, rid, t[len("sources(args."):-1])] = frozenset(got)
    return out


def main():
    warden, corpus = sys.argv[1], sys.argv[2]
    declared = sources(warden, os.path.join(corpus, "agentdojo-vm"))
    inferred = sources(warden, os.path.join(corpus, "agentdojo-raw"))
    tally = collections.Counter()
    by_arg = collections.defaultdict(collections.Counter)
    for key, d in declared.items():
        i = inferred.get(key)
        if i is None:
            kind = "missing"
        elif i == d:
            kind = "same"
        elif i > d:
            kind = "superset"
        elif i < d:
            kind = "subset"
        elif i & d:
            kind = "overlapping"
        else:
            kind = "disjoint"
        tally[kind] += 1
        by_arg[key[2]][kind] += 1
    total = sum(tally.values())
    print(f"arguments compared: {total}")
    for k in ["same", "superset", "subset", "overlapping", "disjoint", "missing"]:
        print(f"  {k:12} {tally[k]:6}  {100.0 * tally[k] / max(total, 1):5.1f}%")
    print("by argument (most compared first):")
    for name, c in sorted(by_arg.items(), key=lambda kv: -sum(kv[1].values()))[:15]:
        print(f"  {name:16} " + ", ".join(f"{k} {v}" for k, v in c.most_common()))


if __name__ == "__main__":
    main()
