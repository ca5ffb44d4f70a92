"""Invariant Guardrails (invariant-ai, local analyzer, no network) on the taint-window policy.

For each H: the generator's history (dumped by `dump_histories`) as an Invariant trace, the probe
as the pending event, and `LocalPolicy.analyze_pending(past, pending)` timed; the median of
several runs per H is written as JSON. Usage: invariant_bench.py HIST_DIR OUT.json
"""

import json
import os
import statistics
import sys
import time

os.environ.setdefault("LOCAL_POLICY", "1")

from importlib.metadata import version  # noqa: E402

from invariant.analyzer import LocalPolicy  # noqa: E402

# The same policy: a consequential call within 3 turns of untrusted content (a tool output
# whose origin is untrusted) is refused. Invariant has no turns: the host numbers each event's
# turn in its metadata, as it does for the Rego history array.
POLICY = """
raise "taint.window" if:
    (o: ToolOutput) -> (c: ToolCall)
    o.metadata["origin"] in ["tool_output", "retrieved", "a2a_inbound", "external"]
    c.function.name in ["send_email", "send_money", "update_password", "post_webpage"]
    c.metadata["turn"] - o.metadata["turn"] <= 3
"""

HS = [int(h) for h in os.environ.get("INVARIANT_HS", "10,100,1000,10000").split(",")]
BUDGET_S = float(os.environ.get("INVARIANT_BUDGET_S", "20"))
MAX_ONE_S = float(os.environ.get("INVARIANT_MAX_ONE_S", "60"))
# Invariant stops a check after 100 evaluation steps by default (INVARIANT_MAX_ITERATIONS),
# which a history of 100 events already exceeds; lift the cap to measure (set before import).
os.environ.setdefault("INVARIANT_MAX_ITERATIONS", "1000000000")


def turn_of(env):
    return int(env["params"]["metadata"]["turn_id"][1:])


def to_invariant(env):
    """One ACS envelope as Invariant trace events (turnStart has none)."""
    method, p = env["method"], env["params"]["payload"]
    turn, n = turn_of(env), env["id"]
    meta = {"turn": turn}
    if method == "steps/userMessage":
        return [{"role": "user", "content": p["content"][0]["value"], "metadata": meta}]
    if method == "steps/toolCallRequest":
        args = {k: a["value"] for k, a in p["arguments"].items()}
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": p["tool"]["name"], "arguments": args},
            "metadata": meta,
        }
        return [{"role": "assistant", "content": "", "tool_calls": [call], "metadata": meta}]
    if method == "steps/toolCallResult":
        out = p["outputs"][0]
        return [
            {
                "role": "tool",
                "tool_call_id": f"c{n - 1}",
                "content": out["value"],
                "metadata": {"turn": turn, "origin": out["provenance"]["origin"]},
            }
        ]
    if method == "steps/agentResponse":
        return [{"role": "assistant", "content": p["content"][0]["value"], "metadata": meta}]
    return []


def main():
    hist_dir, out_path = sys.argv[1], sys.argv[2]
    policy = LocalPolicy.from_string(POLICY)
    results = {"version": version("invariant-ai"), "medians_ns": {}, "runs": {}, "notes": {}}
    for h in HS:
        lines = [json.loads(x) for x in open(os.path.join(hist_dir, f"history-{h}.jsonl"))]
        past = [e for env in lines[:-1] for e in to_invariant(env)]
        pending = to_invariant(lines[-1])
        times = []
        start = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            r = policy.analyze_pending(past, pending)
            dt = time.perf_counter() - t0
            assert len(r.errors) >= 1, f"Invariant must deny the probe at H={h}: {r}"
            times.append(dt)
            spent = time.perf_counter() - start
            if len(times) >= 50 or (len(times) >= 3 and spent > BUDGET_S) or dt > MAX_ONE_S:
                break
        med = statistics.median(times)
        results["medians_ns"][str(h)] = med * 1e9
        results["runs"][str(h)] = len(times)
        print(f"invariant H={h}: median {med * 1e3:.3f} ms over {len(times)} runs", flush=True)
        # The flow rule pairs every tool output with every call: quadratic in H. Skip an H whose
        # extrapolated time per check is above MAX_ONE_S, and say so.
        later = [x for x in HS if x > h]
        if later and med * (later[0] / h) ** 2 > MAX_ONE_S:
            est = med * (later[0] / h) ** 2
            results["notes"]["skipped"] = (
                f"H = {later[0]:,} not run: one check extrapolates to about {est:,.0f} s"
                f" (time × {(later[0] / h) ** 2:,.0f} from H = {h:,}, quadratic)"
            )
            break
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
