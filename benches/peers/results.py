"""Writes benches/RESULTS.md from one run of scripts/bench-peers.sh (criterion estimates, the
scaling bench's output, the Invariant script's JSON). Usage: see scripts/bench-peers.sh."""

import argparse
import json
import os
import platform
import re
import subprocess

HS = [10, 100, 1000, 10000, 1000000]


def median_ns(root, group, name, h=None):
    parts = [root, group, name] + ([str(h)] if h is not None else []) + ["new", "estimates.json"]
    path = os.path.join(*parts)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)["median"]["point_estimate"]


def fmt(ns):
    if ns is None:
        return "—"
    if ns < 1e3:
        return f"{ns:.1f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.2f} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "—"
    r = a / b
    return f"{r:,.0f}×" if r >= 100 else f"{r:.2f}×" if r < 10 else f"{r:.1f}×"


def machine():
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    nproc = os.cpu_count()
    return cpu, nproc, rustc, platform.platform()


def table(rows, root, group):
    out = ["| system | " + " | ".join(f"H = {h:,}" for h in HS) + " |"]
    out.append("|---|" + "---|" * len(HS))
    for label, name, extra in rows:
        cells = []
        for h in HS:
            v = extra.get(h) if extra is not None else median_ns(root, group, name, h)
            cells.append(fmt(v))
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def serve_figures(path):
    """Throughput (req/s) and server CPU per request (µs) from a serve_load run's output."""
    if not path or not os.path.exists(path):
        return None
    text = open(path).read()
    m = re.search(r"= ([0-9]+) req/s; latency p50 ([0-9.]+) ms, p99 ([0-9.]+) ms.*?"
                  r"server CPU ([0-9.]+) µs/request; (\d+) errors", text)
    if not m:
        return None
    return {"rps": float(m.group(1)), "p50": m.group(2), "p99": m.group(3),
            "cpu": float(m.group(4)), "errors": int(m.group(5))}


def issue19(w, a, g1, h1m, ha1m, scaling):
    """The targets of issue 19 (performance at the limit), each against this run."""
    M = a.main
    w("## Targets (issue 19)")
    w("")
    w("Lineage inference (the provenance issue) is on in every figure. Where each miss comes")
    w("from, with its profile: \"Profiles\" below.")
    w("")
    w("| measure | measured | target | met |")
    w("|---|---|---|---|")
    rows = []
    wd, hd = g1("warden", 1000), g1("hand_decide", 1000)
    r = wd / hd if wd and hd else None
    rows.append(("`decide` against the hand-written decide (taint window, H = 1 000)",
                 f"{fmt(wd)} / {fmt(hd)} = {r:.2f}×" if r else "—", "≤ 2×",
                 r is not None and r <= 2))
    rate_a = 1e9 / ha1m if ha1m else None
    rows.append(("`handle` + audit chain, envelopes/s on one core (H = 1 M)",
                 f"{rate_a:,.0f}/s ({fmt(ha1m)})" if rate_a else "—", "≥ 100 000",
                 rate_a is not None and rate_a >= 100000))
    rate = 1e9 / h1m if h1m else None
    rows.append(("`handle` without audit, envelopes/s on one core (H = 1 M)",
                 f"{rate:,.0f}/s ({fmt(h1m)})" if rate else "—", "≥ 200 000",
                 rate is not None and rate >= 200000))
    mem = re.search(r"\| 1000000 \| ([0-9.]+) MiB \| (\d+) \| (\d+) \| (\d+) \|", scaling)
    per_node = int(mem.group(3)) if mem else None
    rows.append(("bytes per provenance node (H = 1 M, live heap / nodes)",
                 str(per_node) if per_node else "—", "≤ 128",
                 per_node is not None and per_node <= 128))
    rp = re.search(r"\| 1000000 \| ([0-9.]+) s \| [0-9.]+ µs \| ([0-9]+) MB \|", scaling)
    wall, peak = (float(rp.group(1)), int(rp.group(2))) if rp else (None, None)
    rows.append(("`warden replay` of a 1 M-event session: wall (median of 3)",
                 f"{wall:.2f} s" if wall else "—", "≤ 3 s", wall is not None and wall <= 3))
    rows.append(("`warden replay` of a 1 M-event session: peak RSS",
                 f"{peak} MB" if peak else "—", "≤ 150 MB", peak is not None and peak <= 150))
    one, two = serve_figures(a.serve_one), serve_figures(a.serve_two)
    sr = two["rps"] / one["rps"] if one and two else None
    rows.append(("`warden serve` over HTTP, server on 2 cores against 1 (32 clients, in memory)",
                 (f"{two['rps']:,.0f} / {one['rps']:,.0f} req/s = {sr:.2f}×" if sr else "—"),
                 "≥ 1.8×", sr is not None and sr >= 1.8))
    for t, m_, target, ok in rows:
        w(f"| {t} | {m_} | {target} | {'**met**' if ok else '**missed**'} |")
    w("")
    if one and two:
        w("The serve rows: `tests/serve_load.rs` (1 000 sessions × 100 hooks, audit chain on, no")
        w("signatures), the server under `taskset -c 0` and then `taskset -c 0-1`; the load client")
        w("is not pinned and shares the machine's two cores:")
        w("")
        w("| server on | throughput | p50 | p99 | server CPU per request | server cores busy | errors |")
        w("|---|---|---|---|---|---|---|")
        for label, f in (("1 core", one), ("2 cores (shared with the client)", two)):
            w(f"| {label} | {f['rps']:,.0f} req/s | {f['p50']} ms | {f['p99']} ms |"
              f" {f['cpu']:.1f} µs | {f['rps'] * f['cpu'] / 1e6:.2f} | {f['errors']} |")
        w("")
        w("*Server cores busy* is throughput × CPU per request: on one core the server keeps its")
        w("core nearly full; on two it gets only what the load client (which needs most of a core")
        w("itself) leaves, so the second figure is bounded by the client, not by the server.")
        w(f"At its own CPU cost per request, two cores of its own would serve about 2 s /"
          f" {two['cpu']:.1f} µs = {2e6 / two['cpu']:,.0f} req/s,")
        w(f"{2e6 / two['cpu'] / one['rps']:.2f}× the one-core figure: an extrapolation from CPU"
          f" time, not a measurement;")
        w("measuring it needs a machine with cores for the client.")
        w("")
    # The cost of inference per argument: the default policy deciding a call with K
    # destination arguments the user typed, sent without lineage (every one inferred).
    w("Inference (`cargo bench --bench decide -- inference`, the embedded default policy, after")
    w("H tool outputs were indexed):")
    w("")
    ih = [10, 1000, 100000]
    w("| H (tool outputs indexed) | " + " | ".join(f"{h:,}" for h in ih) + " |")
    w("|---|" + "---|" * len(ih))
    one_ = [median_ns(M, "inference", "infer_one", h) for h in ih]
    w("| one argument value's sources inferred (`infer_one`) | " + " | ".join(fmt(v) for v in one_) + " |")
    for k in (1, 33):
        cells = [median_ns(M, "inference", f"arguments_{k}", h) for h in ih]
        w(f"| a call with {k} destination argument{'s' if k > 1 else ''} decided (`arguments_{k}`) | "
          + " | ".join(fmt(v) for v in cells) + " |")
    slope = []
    for h in ih:
        a1 = median_ns(M, "inference", "arguments_1", h)
        a33 = median_ns(M, "inference", "arguments_33", h)
        slope.append((a33 - a1) / 32 if a1 and a33 else None)
    w("| **each further argument** (slope between 1 and 33) | " + " | ".join(fmt(v) for v in slope) + " |")
    w("")
    w("Inference itself is the first row; the slope is what the whole default policy spends per")
    w("argument (two rules range over the arguments; each is checked on its own).")
    w("")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", required=True, help="the peers crate's target/criterion")
    ap.add_argument("--main", required=True, help="the main crate's target/criterion")
    ap.add_argument("--scaling", required=True, help="output of cargo bench --bench scaling")
    ap.add_argument("--invariant", required=True, help="the Invariant script's JSON (or a .err)")
    ap.add_argument("--serve-one", default="", help="serve_load output, server on one core")
    ap.add_argument("--serve-two", default="", help="serve_load output, server on two cores")
    ap.add_argument("--build-seconds", default="?")
    ap.add_argument("--run-seconds", default="?")
    a = ap.parse_args()
    P = a.peers

    inv = {}
    inv_note = ""
    if os.path.exists(a.invariant):
        with open(a.invariant) as f:
            j = json.load(f)
        inv = {int(k): v for k, v in j["medians_ns"].items()}
        inv_note = f"invariant-ai {j['version']}"
        if j.get("notes", {}).get("skipped"):
            inv_note += "; " + j["notes"]["skipped"]
    else:
        err = a.invariant.rsplit(".", 1)[0] + ".err"
        inv_note = open(err).read().strip() if os.path.exists(err) else "not run"

    g1 = lambda n, h: median_ns(P, "taint_window", n, h)  # noqa: E731
    g20 = lambda n, h: median_ns(P, "twenty_rules", n, h)  # noqa: E731

    cpu, nproc, rustc, plat = machine()
    L = []
    w = L.append
    w("# Benchmark results")
    w("")
    w("Warden against what a user would pick instead, measured in **one run** of")
    w("`scripts/bench-peers.sh` (generated by `benches/peers/results.py`; do not edit by hand: the")
    w("sections from \"Profiles\" on are written by hand or by other commands, and kept; work")
    w("measured after this run, with its own before and after, is there too).")
    w("Every number is a **median**. The machine has 2 cores shared with other builds, so numbers")
    w("may be noisy (a few tens of percent between runs); the ratios are taken within this run.")
    w("A single cell far off the rest of its row (a several-fold jump at one H only) is")
    w("most likely contention from other builds during that bench; rerun to confirm.")
    w("")
    w(f"- Machine: {nproc} cores (`nproc`), {cpu} (/proc/cpuinfo), {plat}")
    w(f"- Toolchain: {rustc}; release profile")
    w(f"- Peers: regorus 0.14 (features `arc`, `std`, `graph`), cedar-policy 4.14 (its default")
    w(f"  features off), {inv_note}")
    w(f"- Reproduce: `bash scripts/bench-peers.sh` (build {a.build_seconds} s, whole run"
      f" {a.run_seconds} s this time)")
    w("")
    w("## The workload")
    w("")
    w("One `toolCallRequest` decision — the generator's probe, a `send_email` in a fresh turn —")
    w("after a session history of H events from the checked-in generator")
    w("(`benches/support/history.rs`, five events per turn, untrusted tool output in every turn),")
    w("so every system must deny; each bench asserts the decision before it is timed.")
    w("")
    w("- **taint window** (1 rule): deny a call to send_email, send_money, update_password or")
    w("  post_webpage if untrusted content entered the session within the last 3 turns; else")
    w("  allow. Warden: `benches/policies/taint_window.ward`.")
    w("- **20 rules**: taint windows, argument provenance, per-turn rate limits and an Intent")
    w("  check: `benches/policies/twenty_rules.ward`, with the same rules in Rego")
    w("  (`benches/peers/policies/twenty_rules.rego`, `…_summary.rego`) and Cedar")
    w("  (`…/twenty_rules.cedar`).")
    w("")
    w("Systems (`benches/peers/benches/peers.rs`):")
    w("")
    w("- **warden**: `decide_event` on Warden's incrementally maintained session state (the")
    w("  event's provenance records, the turn, the rules, the combination).")
    w("- **hand-written, check**: the bare O(1) check — a struct with the last untrusted turn and")
    w("  a `match` on the tool name, handed the tool name and the turn number.")
    w("- **hand-written, decide**: the same job as `decide_event`, written by hand for this one")
    w("  policy (`HostSession` in `benches/peers/src/lib.rs`): read the turn and the tool from")
    w("  the event, look up and derive the labels of its provenance records, decide, keep the")
    w("  changes only if the step goes ahead.")
    w("- **regorus, history**: the policy in Rego over the history array (`input.history`, each")
    w("  entry `{method, turn, payload}`, the payloads as ACS sends them); engine prepared once,")
    w("  `set_input` + `eval_rule` per decision (the input document is built once per H and")
    w("  cloned, which is cheap in regorus). Lineage through `graph.reachable`.")
    w("- **regorus, summary**: the policy in Rego given the summary a host would maintain")
    w("  (turns since each label, per-turn counters, each argument's lineage origins); the input")
    w("  is built from the summary per decision. The host's own upkeep is not in the figure")
    w("  (it is what *hand-written, decide* and Warden do).")
    w("- **cedar**: `cedar-policy` with the same summary as the request context, built per")
    w("  decision; `Request::new` + `is_authorized`. Cedar cannot iterate a history or a")
    w("  lineage, so the host precomputes them; H only changes the numbers in the context.")
    w("- **invariant**: Invariant Guardrails' local analyzer (Python), the flow rule")
    w("  `(o: ToolOutput) -> (c: ToolCall)` with the turn window on event metadata;")
    w("  `LocalPolicy.analyze_pending(past, [probe])`, median of several runs")
    w("  (`benches/peers/invariant_bench.py`). Taint window only.")
    w("")
    w("## Taint window: median time per decision")
    w("")
    rows = [
        ("warden", "warden", None),
        ("hand-written, check", "hand_check", None),
        ("hand-written, decide", "hand_decide", None),
        ("regorus, history", "regorus_history", None),
        ("regorus, summary", "regorus_summary", None),
        ("cedar (host summary)", "cedar", None),
        ("invariant (Python)", None, inv),
    ]
    w(table(rows, P, "taint_window"))
    w("")
    w("Ratios in this run:")
    w("")
    w("| ratio | " + " | ".join(f"H = {h:,}" for h in HS) + " |")
    w("|---|" + "---|" * len(HS))
    for label, num, den in [
        ("warden / hand-written check", ("warden", g1), ("hand_check", g1)),
        ("warden / hand-written decide", ("warden", g1), ("hand_decide", g1)),
        ("regorus history / warden", ("regorus_history", g1), ("warden", g1)),
        ("regorus summary / warden", ("regorus_summary", g1), ("warden", g1)),
        ("cedar / warden", ("cedar", g1), ("warden", g1)),
    ]:
        cells = [ratio(num[1](num[0], h), den[1](den[0], h)) for h in HS]
        w(f"| {label} | " + " | ".join(cells) + " |")
    cells = [ratio(inv.get(h), g1("warden", h)) for h in HS]
    w("| invariant / warden | " + " | ".join(cells) + " |")
    w("")
    w("## 20 rules: median time per decision")
    w("")
    rows20 = [
        ("warden", "warden", None),
        ("regorus, history", "regorus_history", None),
        ("regorus, summary", "regorus_summary", None),
        ("cedar (host summary)", "cedar", None),
    ]
    w(table(rows20, P, "twenty_rules"))
    w("")
    w("| ratio | " + " | ".join(f"H = {h:,}" for h in HS) + " |")
    w("|---|" + "---|" * len(HS))
    for label, num in [
        ("regorus history / warden", "regorus_history"),
        ("regorus summary / warden", "regorus_summary"),
        ("cedar / warden", "cedar"),
    ]:
        cells = [ratio(g20(num, h), g20("warden", h)) for h in HS]
        w(f"| {label} | " + " | ".join(cells) + " |")
    w("")

    # handle, compile, memory
    h10 = median_ns(P, "handle", "handle", 10)
    h1m = median_ns(P, "handle", "handle", 1000000)
    ha10 = median_ns(P, "handle", "handle_audit", 10)
    ha1m = median_ns(P, "handle", "handle_audit", 1000000)
    comp = median_ns(a.main, "compile", "rules_1000")
    w("## `handle`, compile, memory")
    w("")
    w("| measure | H = 10 | H = 1,000,000 |")
    w("|---|---|---|")
    rate = lambda ns: f"{1e9 / ns:,.0f} /s" if ns else "—"  # noqa: E731
    w(f"| `Guardian::handle` (bytes in, bytes out) | {fmt(h10)} ({rate(h10)}) | {fmt(h1m)} ({rate(h1m)}) |")
    w(f"| `handle` + audit hashes (request_hash, chained entry_hash) | {fmt(ha10)} ({rate(ha10)}) | {fmt(ha1m)} ({rate(ha1m)}) |")
    w("")
    w("`handle` is one thread, one session: strict JSON decode, the decision on the session state,")
    w("the response encode. The second row is the same Guardian keeping the audit chain, as")
    w("`warden serve` does: each step's params canonicalized (JCS) and hashed (SHA-256) into an")
    w("entry whose hash chains to the previous one.")
    w("")
    w(f"Compile (parse + check + compile) of a generated 1 000-rule policy (`benches/compile.rs`):"
      f" **{fmt(comp)}** median.")
    w("")
    scaling = open(a.scaling).read() if os.path.exists(a.scaling) else ""
    tables, cur = [], []
    for line in scaling.splitlines() + [""]:
        if line.startswith("|"):
            cur.append(line)
        elif cur:
            tables.append("\n".join(cur))
            cur = []
    w("Memory and replay, from `cargo bench --bench scaling` in the same run (live heap held for")
    w("one session after H events of the taint-window policy, counted by a counting allocator;")
    w("`warden replay` wall time):")
    w("")
    for t in tables:
        w(t.strip())
        w("")
    m = re.search(r"per-event cost at the longest / at the shortest: ([0-9.]+)", scaling)
    if m:
        w(f"Replay cost per event, longest history against shortest: {m.group(1)}×.")
        w("")
    mem = re.search(r"\| 1000000 \| ([0-9.]+) MiB \| (\d+) \| (\d+) \| (\d+) \|", scaling)

    # Targets
    w("## Targets (issue 7)")
    w("")
    w("| target | measured | met |")
    w("|---|---|---|")
    tg = []
    d10, d1m = g1("warden", 10), g1("warden", 1000000)
    flat = d1m / d10 if d10 and d1m else None
    tg.append(("`decide` flat in H: 1M vs 10 within 1.5×",
               f"{fmt(d1m)} / {fmt(d10)} = {flat:.2f}×" if flat else "—",
               flat is not None and flat <= 1.5))
    hc = g1("hand_check", 1000)
    hd = g1("hand_decide", 1000)
    wd = g1("warden", 1000)
    r_hd = wd / hd if wd and hd else None
    r_hc = wd / hc if wd and hc else None
    tg.append(("within 3× of the hand-written Rust check (H = 1 000)",
               (f"{r_hd:.2f}× the hand-written decide; {r_hc:,.0f}× the bare check"
                if r_hd and r_hc else "—"),
               r_hd is not None and r_hd <= 3))
    rh = g1("regorus_history", 1000)
    r_rg = rh / wd if rh and wd else None
    tg.append(("≥ 100× faster than regorus at H = 1 000 (history array, taint window)",
               f"{r_rg:,.0f}×" if r_rg else "—", r_rg is not None and r_rg >= 100))
    hps = 1e9 / h1m if h1m else None
    hps_a = 1e9 / ha1m if ha1m else None
    tg.append(("`handle` ≥ 100 000 decisions/s on one core (with audit hash, H = 1M)",
               (f"{hps_a:,.0f}/s with the audit chain; {hps:,.0f}/s without"
                if hps and hps_a else "—"),
               hps_a is not None and hps_a >= 100000))
    tg.append(("compile of 1 000 rules < 100 ms", fmt(comp), comp is not None and comp < 100e6))
    for t, m_, ok in tg:
        w(f"| {t} | {m_} | {'**met**' if ok else '**missed**'} |")
    w("")
    notes = {
        0: "decide is not flat in H in this run. Not profiled yet; candidates are the "
           "persistent maps' depth (imbl grows a level per ×32 nodes) and cache misses on a "
           "1M-node graph, or plain noise from the shared cores (compare the 10k column). "
           "Closing it: profile at 1M; an arena-indexed node table keyed by interned ids.",
        1: "Warden is more than 3× the hand-written decide: see issue 19's targets below.",
        2: "regorus over the history is less than 100× slower than Warden at H = 1 000.",
        3: "handle is below 100 000/s with the audit chain: see issue 19's targets below.",
        4: "compile of 1 000 rules is over 100 ms.",
    }
    missed = [i for i, (_, _, ok) in enumerate(tg) if not ok]
    if missed:
        w("What would close the missed targets:")
        w("")
        for i in missed:
            w(f"- {tg[i][0]}: {notes[i]}")
        w("")
    w("The bare hand-written check is a few nanoseconds: a compare and a string match, with the")
    w("host's bookkeeping (parsing the event, deriving the labels of its provenance records,")
    w("keeping the state) not counted. The like-for-like reference is the hand-written")
    w("*decide*, which does that bookkeeping for this one policy; the target is judged on it.")
    w("")
    if mem:
        w(f"Memory at H = 1 000 000: {mem.group(1)} MiB for the session, {mem.group(2)}"
          f" provenance nodes, **{mem.group(3)} bytes per node**, {mem.group(4)} bytes per event.")
        w("")
    issue19(w, a, g1, h1m, ha1m, scaling)
    w("## How the peers were made equivalent, and where they are not")
    w("")
    w("- **Rego over history** recomputes, per decision, every provenance record's lineage")
    w("  (`graph.reachable` over the `derived_from` graph) to find the last turn untrusted")
    w("  content entered, and counts the current turn's calls by scanning the array. Rego has")
    w("  no recursion, so lineage depth uses `graph.reachable_paths`. Warden's rule that")
    w("  `agent_generated` content without parents takes the labels of the turn is not")
    w("  modelled in Rego (it does not change this history's result). The Intent is matched by")
    w("  exact tool name, not glob (the `glob` feature is left out to keep regorus trim).")
    w("- **Summary-fed regorus and Cedar** get exactly the facts the rules read, computed by the")
    w("  hand-written host; their medians are the engine's cost only. Cedar's context has")
    w("  `any_arg_untrusted` and `max_arg_depth` for the rules that quantify over arguments.")
    w("- **Invariant** is Python; its trace has no turns, so each event carries the generator's")
    w("  turn and its origin in `metadata`. Its flow rule is evaluated over the whole trace on")
    w("  every check (`analyze_pending`), pairing every tool output with the call: the cost grows")
    w("  with H², and by default Invariant refuses a check after 100 evaluation steps")
    w("  (`INVARIANT_MAX_ITERATIONS`), which a 100-event history already exceeds; the script")
    w("  lifts that cap to measure. It ran offline (local analyzer, no API key).")
    w("- The history's steps all went ahead; a denied probe leaves no trace, so every system")
    w("  decides the same probe on the same state again in each iteration.")
    print("\n".join(L))


if __name__ == "__main__":
    main()
