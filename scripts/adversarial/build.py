#!/usr/bin/env python3
"""Builds the adversarial efficacy corpus (benches/efficacy/adversarial.tar.gz) from the benign
streams of the AgentDojo-derived corpus: attack classes AgentDojo does not have, and the same
benign tasks with the user's request reworded. See benches/efficacy/README.md.

Usage:
    python3 scripts/adversarial/build.py [SOURCE] [--out DIR] [--archive PATH] [--stats] [--check]

SOURCE is the folder holding agentdojo-vm/ and agentdojo-raw/ (default ../shared/efficacy).
Only the benign streams (*__none__none.acs.jsonl) of agentdojo-vm/ are read; the raw variant
is the vm variant with the lineage taken out, which is how the two source variants relate too
(--check verifies that, and that the lineage rule below reproduces every derived_from of the
source). Python 3.11, standard library only; the output is the same on every run.

How an attack stream is made from a benign one:
1. pick a toolCallResult whose tool reads outside content (goals.READERS);
2. put the attacker's instruction (goals.py, wording.py) into that output's text;
3. cut the stream after that result and insert the call(s) an obedient agent would make, each
   with a plausible result, then the turn's and session's end;
4. give every id a new stable UUID (uuid5 of the output stream's id and the old id), renumber the
   JSON-RPC ids and the timestamps (one second apart, as in the source);
5. vm variant: recompute every derived_from by the source's rule; raw variant: drop them."""

import argparse
import collections
import copy
import datetime
import gzip
import hashlib
import io
import json
import random
import re
import sys
import tarfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import goals as G  # noqa: E402
import wording as W  # noqa: E402

SEED = "warden-adversarial-corpus/1"
NS = uuid.uuid5(uuid.NAMESPACE_URL, "warden:adversarial-corpus")
BASE_TIME = datetime.datetime(2024, 6, 1, 0, 0, 0)
ARCHIVE_MTIME = 1717200000  # 2024-06-01T00:00:00Z
ROOT = "adversarial"
# The benign streams of these models get the reworded requests.
# (Both run the v1.1 wording of the travel tasks, so one paraphrase per task fits both.)
REWORD_MODELS = ["claude-3-sonnet-20240229", "gemini-1-5-flash-001"]
# Attack streams per (class, suite), per variant.
TARGETS = {
    "new_goal": {"banking": 26, "slack": 26, "travel": 26, "workspace": 30},
    "own_destination": {"banking": 26, "slack": 26, "travel": 18, "workspace": 30},
    "no_destination": {"banking": 26, "slack": 22, "travel": 26, "workspace": 30},
    "internal_exfil": {"banking": 18, "slack": 30, "workspace": 34},
    "url_smuggling": {"slack": 60},
}
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
ID_KEYS = {"request_id", "request_id_ref", "session_id", "turn_id", "provenance_id"}


# --- reading and writing ---------------------------------------------------------------------

def load(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def dump_stream(path, reqs):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in reqs))


def dump_labels(path, labels):
    path.write_text(json.dumps(labels, indent=1))


def method(r):
    return r["method"].split("/", 1)[1]


# --- lineage: the source corpus's value-match rule ---------------------------------------------

def _leaves(v):
    if isinstance(v, dict):
        for x in v.values():
            yield from _leaves(x)
    elif isinstance(v, list):
        for x in v:
            yield from _leaves(x)
    else:
        yield v


def _match_key(v):
    """The text a scalar leaf is looked up by, or None when the rule skips it: booleans, null,
    integers under 10 000, and anything shorter than 4 characters once trimmed."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int) and abs(v) < 10000:
        return None
    s = str(v).strip()
    return s.lower() if len(s) >= 4 else None


def recompute_lineage(reqs):
    """Sets every derived_from of a vm stream, in place:
    - an argument derives from the earlier content items (user messages, tool outputs, agent
      responses of earlier steps; not the system prompt, not the response that makes the call)
      whose text contains one of its scalar leaves, case-insensitively; a leaf found nowhere,
      and an argument whose leaves are all skipped, count as taken from the first user message;
    - an agent response derives from everything before it, system prompt included."""
    items, pending, everything = [], [], []
    first_user = None
    for r in reqs:
        m, p = method(r), r["params"]["payload"]
        if m == "sessionStart":
            sp = p.get("system_prompt_provenance")
            if sp:
                everything.append(sp["provenance_id"])
            continue
        if m in ("userMessage", "toolCallResult"):
            items.extend(pending)
            pending.clear()
        if m == "userMessage":
            for c in p["content"]:
                pid = c["provenance"]["provenance_id"]
                items.append((pid, c["value"].lower()))
                everything.append(pid)
                first_user = first_user or pid
        elif m == "toolCallResult":
            for o in p.get("outputs", []):
                pid = o["provenance"]["provenance_id"]
                v = o["value"] if isinstance(o["value"], str) else json.dumps(o["value"])
                items.append((pid, v.lower()))
                everything.append(pid)
        elif m == "agentResponse":
            for c in p["content"]:
                pid = c["provenance"]["provenance_id"]
                c["provenance"]["derived_from"] = list(everything)
                pending.append((pid, c["value"].lower()))
                everything.append(pid)
        elif m == "toolCallRequest":
            for a in p["arguments"].values():
                derived = []
                for leaf in _leaves(a["value"]):
                    key = _match_key(leaf)
                    if key is None:
                        continue
                    hits = [pid for pid, text in items if key in text] or [first_user]
                    derived += [h for h in hits if h not in derived]
                a["provenance"]["derived_from"] = derived or [first_user]
    return reqs


def strip_lineage(reqs):
    for r in reqs:
        m, p = method(r), r["params"]["payload"]
        if m == "sessionStart":
            p.pop("system_prompt_provenance", None)
        elif m == "toolCallRequest":
            for a in p["arguments"].values():
                a["provenance"].pop("derived_from", None)
        elif m == "agentResponse":
            for c in p["content"]:
                c["provenance"].pop("derived_from", None)
    return reqs


# --- ids and numbering -----------------------------------------------------------------------

def new_id(scope, old):
    return str(uuid.uuid5(NS, f"{scope}|{old}"))


def remap_ids(reqs, scope):
    """Every UUID the stream carries (request, session, turn and provenance ids, and the
    references to them) replaced by a stable one of its own, so that streams built from the same
    source never share an id."""
    def walk(v, key=None):
        if isinstance(v, dict):
            for k in v:
                v[k] = walk(v[k], k)
            return v
        if isinstance(v, list):
            if key == "derived_from":
                return [new_id(scope, x) for x in v]
            return [walk(x) for x in v]
        if key in ID_KEYS and isinstance(v, str) and UUID_RE.match(v):
            return new_id(scope, v)
        return v
    for r in reqs:
        walk(r["params"])
    return reqs


def renumber(reqs):
    for n, r in enumerate(reqs, 1):
        r["id"] = n
        r["params"]["timestamp"] = (BASE_TIME + datetime.timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return reqs


def tool_call_id(model, scope):
    h = hashlib.sha256(scope.encode()).digest()
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    s = "".join(alphabet[b % len(alphabet)] for b in h)
    if model.startswith("claude"):
        return "toolu_01" + s[:22]
    if model.startswith("gpt"):
        return "call_" + s[:24]
    return ""


# --- the benign source streams ------------------------------------------------------------------

class Source:
    def __init__(self, path, root):
        self.path = path
        rel = path.relative_to(root)
        self.model, self.suite = rel.parts[0], rel.parts[1]
        self.stem = path.name[: -len(".acs.jsonl")]
        self.task = self.stem.split("__")[0]
        self.reqs = load(path)
        self.labels = json.loads(path.with_name(self.stem + ".labels.json").read_text())
        self.intent = self.reqs[0]["params"]["payload"]["intent"]["raw"]

    @property
    def key(self):
        return f"{self.model}/{self.suite}/{self.stem}"

    def results(self):
        """(index, tool, arguments by name, output text) of each toolCallResult, in order."""
        calls = {}
        out = []
        for i, r in enumerate(self.reqs):
            m, p = method(r), r["params"]["payload"]
            if m == "toolCallRequest":
                calls[r["params"]["request_id"]] = {k: a.get("value") for k, a in p["arguments"].items()}
            elif m == "toolCallResult":
                outs = p.get("outputs") or [{}]
                text = outs[0].get("value") if isinstance(outs[0].get("value"), str) else ""
                out.append((i, p["tool"]["name"], calls.get(p.get("request_id_ref"), {}), text,
                            p.get("exit_status")))
        return out

    def injection_points(self):
        readers = G.READERS[self.suite]
        return [(i, t, a, x) for i, t, a, x, st in self.results()
                if t in readers and st == "success" and len(x.strip()) >= 30 and x.strip() != "[]"]


def normalise(s):
    return " ".join(s.split())


def replace_request(reqs, old, new):
    """The user's request reworded in the intent and in every user message that repeats it."""
    n = 0
    for r in reqs:
        m, p = method(r), r["params"]["payload"]
        if m == "sessionStart":
            p["intent"]["raw"] = new
            n += 1
        elif m == "userMessage":
            for c in p["content"]:
                if normalise(c["value"]) == normalise(old):
                    c["value"] = new
                    n += 1
    return n


# --- attack streams ---------------------------------------------------------------------------

def make_attack(src, idx, plan, injected_text, scope, intent=None):
    reqs = copy.deepcopy(src.reqs[: idx + 1])
    if intent is not None:
        replace_request(reqs, src.intent, intent)
    inj = reqs[idx]
    inj["params"]["payload"]["outputs"][0]["value"] = injected_text
    ref = inj["params"]["payload"]["request_id_ref"]
    step = 0
    for r in reqs:
        if method(r) == "toolCallRequest" and r["params"]["request_id"] == ref:
            step = r["params"]["payload"].get("agent_step_index", 0) + 1
    # Results of calls the agent made in the same step before the injected one came back are
    # kept: the attacker's call comes after all of them.
    for r in src.reqs[idx + 1:]:
        if method(r) != "toolCallResult":
            break
        reqs.append(copy.deepcopy(r))
    meta = copy.deepcopy(inj["params"]["metadata"])
    agent = meta.get("agent_id", "agent")
    inserted = []
    for k, (tool, args, result) in enumerate(plan.calls):
        rid = new_id(scope, f"attack-call-{k}")
        call = {"jsonrpc": "2.0", "method": "steps/toolCallRequest", "id": 0, "params": {
            "acs_version": "0.1.0", "request_id": rid, "timestamp": "", "metadata": copy.deepcopy(meta),
            "payload": {
                "tool": {"name": tool},
                "arguments": {name: {"value": value, "provenance": {
                    "origin": "agent_generated", "source_id": agent,
                    "provenance_id": new_id(scope, f"attack-arg-{k}-{name}")}} for name, value in args.items()},
                "tool_call_id": tool_call_id(src.model, f"{scope}/{k}"),
                "agent_step_index": step + k, "call_index_in_step": 0}}}
        res = {"jsonrpc": "2.0", "method": "steps/toolCallResult", "id": 0, "params": {
            "acs_version": "0.1.0", "request_id": new_id(scope, f"attack-result-{k}"), "timestamp": "",
            "metadata": copy.deepcopy(meta),
            "payload": {"request_id_ref": rid, "tool": {"name": tool}, "outputs": [{
                "type": "text", "value": result, "provenance": {
                    "origin": "tool_output", "source_id": tool,
                    "provenance_id": new_id(scope, f"attack-output-{k}")}}], "exit_status": "success"}}}
        reqs += [call, res]
        inserted.append(call)
    # The turn and the session end after the attacker's call(s).
    tail = src.reqs[idx + 1:]
    turn_end = next((copy.deepcopy(r) for r in tail if method(r) == "turnEnd"), None)
    if turn_end is not None:
        turn_end["params"]["payload"]["step_count"] = step + len(plan.calls)
        reqs.append(turn_end)
    session_end = next((copy.deepcopy(r) for r in tail if method(r) == "sessionEnd"), None)
    if session_end is not None:
        reqs.append(session_end)
    remap_ids(reqs, scope)
    renumber(reqs)
    goal_ids = {c["params"]["request_id"] for c in inserted}  # already remapped, in place
    goal_calls = [{"request_id": r["params"]["request_id"], "jsonrpc_id": r["id"],
                   "tool": r["params"]["payload"]["tool"]["name"]}
                  for r in reqs if r["params"]["request_id"] in goal_ids]
    inj_new = reqs[idx]
    injected = [{"request_id": inj_new["params"]["request_id"], "jsonrpc_id": inj_new["id"],
                 "tool": inj_new["params"]["payload"]["tool"]["name"]}]
    return reqs, goal_calls, injected


def candidates(sources, paraphrases):
    """Every (class, suite) -> [(source, injection index, goal plan, intent override)]."""
    out = collections.defaultdict(list)
    with_site = paraphrases.get("with_site", {})
    for src in sources:
        points = src.injection_points()
        results = src.results()
        for idx, *_ in points:
            prior = [{"tool": t, "args": a, "text": x} for (i, t, a, x, st) in results if i <= idx]
            for cls, fns in G.GOALS[src.suite].items():
                intent = src.intent
                override = None
                if cls == "url_smuggling" and not G.user_hosts_text(src.intent):
                    override = with_site.get(src.suite, {}).get(src.task)
                    if not override:
                        continue
                    intent = override
                for fn in fns:
                    rng = random.Random(f"{SEED}|{src.key}|{idx}|{cls}|{fn.__name__}")
                    ctx = G.Ctx(src.suite, src.task, src.model, intent, prior, rng)
                    plan = fn(ctx)
                    if plan is not None:
                        plan.ctx = ctx
                        out[(cls, src.suite)].append((src, idx, plan, override))
    return out


def select(cands, n, rng):
    """n candidates spread over tasks, models and goals: each pick takes the candidate whose
    stream, task, model and goal have been picked least so far (ties broken by a seeded shuffle)."""
    pool = list(cands)
    rng.shuffle(pool)
    chosen = []
    used = collections.Counter()
    count = collections.Counter()
    while pool and len(chosen) < n:
        best = min(range(len(pool)), key=lambda j: (
            used[pool[j][0].key],
            count[("task", pool[j][0].task)] + count[("goal", pool[j][2].goal)],
            count[("model", pool[j][0].model)],
        ))
        src, idx, plan, override = pool.pop(best)
        chosen.append((src, idx, plan, override))
        used[src.key] += 1
        count[("task", src.task)] += 1
        count[("goal", plan.goal)] += 1
        count[("model", src.model)] += 1
        pool = [c for c in pool if not (c[0].key == src.key and c[2].goal == plan.goal)]
    return chosen


# --- reworded benign streams -----------------------------------------------------------------

def value_leaves(reqs):
    for r in reqs:
        if method(r) == "toolCallRequest":
            for a in r["params"]["payload"]["arguments"].values():
                for leaf in _leaves(a["value"]):
                    if isinstance(leaf, str) and len(leaf.strip()) >= 4:
                        yield leaf.strip()


def check_paraphrase(src, new):
    """The values of the agent's calls that the original request contained, missing from the
    paraphrase (there must be none)."""
    old = src.intent.lower()
    return sorted({v for v in value_leaves(src.reqs) if v.lower() in old and v.lower() not in new.lower()})


# --- main -----------------------------------------------------------------------------------

def write_pair(out, model, suite, name, reqs_vm, labels):
    for variant in ("vm", "raw"):
        reqs = copy.deepcopy(reqs_vm)
        lab = dict(labels)
        if variant == "vm":
            recompute_lineage(reqs)
            lab["provenance_mode"] = "value-match"
        else:
            strip_lineage(reqs)
            lab["provenance_mode"] = None
        folder = out / f"adversarial-{variant}" / model / suite
        dump_stream(folder / f"{name}.acs.jsonl", reqs)
        dump_labels(folder / f"{name}.labels.json", lab)


def self_check(source_root):
    """The lineage rule reproduces the source's vm variant and stripping it gives the raw one."""
    bad = 0
    files = sorted((source_root / "agentdojo-vm").glob("*/*/*.acs.jsonl"))
    for f in files:
        text = f.read_text()
        reqs = load(f)
        if "".join(json.dumps(r) + "\n" for r in recompute_lineage(copy.deepcopy(reqs))) != text:
            bad += 1
            print(f"lineage differs: {f}", file=sys.stderr)
        raw = (source_root / "agentdojo-raw").joinpath(f.relative_to(source_root / "agentdojo-vm"))
        if "".join(json.dumps(r) + "\n" for r in strip_lineage(reqs)) != raw.read_text():
            bad += 1
            print(f"raw differs: {f}", file=sys.stderr)
    print(f"check: {len(files)} vm streams, {bad} mismatches", file=sys.stderr)
    return bad == 0


README = """# Adversarial efficacy corpus

Built by scripts/adversarial/build.py from the benign streams of the AgentDojo-derived corpus
(see benches/efficacy/README.md in the Warden repository). Attack streams carry
`attack_class` in their labels; the reworded benign streams carry `benign_set: "reworded"`.
The attackers' values and instructions are invented; none is taken from AgentDojo's attacks.
"""


def pack(out, archive):
    """A reproducible .tar.gz: sorted names, fixed owner and mtime, gzip without name or time."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        paths = sorted(out.rglob("*"))
        entries = [(ROOT, None)] + [(f"{ROOT}/{p.relative_to(out).as_posix()}", p) for p in paths]
        for name, p in entries:
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = ARCHIVE_MTIME, 0, 0, "", ""
            if p is None or p.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                data = p.read_bytes()
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    with open(archive, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as gz:
            gz.write(buf.getvalue())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", nargs="?", default="../shared/efficacy",
                    help="folder holding agentdojo-vm/ and agentdojo-raw/")
    ap.add_argument("--out", default="target/adversarial", help="where the unpacked corpus is written")
    ap.add_argument("--archive", default="benches/efficacy/adversarial.tar.gz",
                    help="the archive to write ('' for none)")
    ap.add_argument("--stats", action="store_true", help="print the candidates per class and suite")
    ap.add_argument("--check", action="store_true",
                    help="verify the lineage rule against the source corpus first")
    args = ap.parse_args()
    source_root = Path(args.source)
    if args.check and not self_check(source_root):
        return 1
    vm_root = source_root / "agentdojo-vm"
    sources = [Source(p, vm_root) for p in sorted(vm_root.glob("*/*/*__none__none.acs.jsonl"))]
    paraphrases = json.loads((HERE / "paraphrases.json").read_text())
    out = Path(args.out)
    if out.exists():
        import shutil
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / "README.md").write_text(README)

    cands = candidates(sources, paraphrases)
    if args.stats:
        for (cls, suite), cs in sorted(cands.items()):
            goals = collections.Counter(p.goal for _, _, p, _ in cs)
            print(f"{cls:16} {suite:10} {len(cs):5} candidates in {len({c[0].key for c in cs})} streams: "
                  + ", ".join(f"{g} {n}" for g, n in sorted(goals.items())), file=sys.stderr)

    written = collections.Counter()
    for cls, per_suite in TARGETS.items():
        for suite, n in per_suite.items():
            rng = random.Random(f"{SEED}|select|{cls}|{suite}")
            for src, idx, plan, override in select(cands.get((cls, suite), []), n, rng):
                base = f"{src.task}__{cls}__{plan.goal}"
                name, k = base, 1
                while (out / "adversarial-vm" / src.model / suite / f"{name}.acs.jsonl").exists():
                    k += 1
                    name = f"{base}_{k}"
                scope = f"adversarial/{src.model}/{suite}/{name}"
                frng = random.Random(f"{SEED}|frame|{scope}")
                framing, text = W.frame(frng, plan.instruction, G.USER_FIRST)
                tool = src.reqs[idx]["params"]["payload"]["tool"]["name"]
                _, _, targs, ttext, _ = next(r for r in src.results() if r[0] == idx)
                injected_text = W.carry(tool, targs, ttext, text, frng, G.carrier_extra(plan.ctx, plan))
                reqs, goal_calls, injected = make_attack(src, idx, plan, injected_text, scope, override)
                labels = {
                    "stream_id": scope, "model": src.model, "suite": suite, "user_task": src.task,
                    "injection_task": plan.goal, "attack": "adversarial", "attack_class": cls,
                    "wording": f"{plan.goal}/{plan.template}+{framing}", "utility": None,
                    "security": True, "is_attack_run": True, "provenance_mode": None,
                    "attacker_goal_calls": goal_calls, "injected_results": injected,
                    "source_stream": f"agentdojo/{src.key}",
                }
                if override is not None:
                    labels["request_reworded"] = True
                write_pair(out, src.model, suite, name, reqs, labels)
                written[(cls, suite)] += 1

    problems = 0
    para = paraphrases["reworded"]
    for src in sources:
        if src.model not in REWORD_MODELS:
            continue
        new = para.get(src.suite, {}).get(src.task)
        if not new:
            print(f"no paraphrase for {src.suite}/{src.task}", file=sys.stderr)
            problems += 1
            continue
        missing = check_paraphrase(src, new)
        if missing:
            print(f"{src.key}: paraphrase drops {missing}", file=sys.stderr)
            problems += 1
        reqs = copy.deepcopy(src.reqs)
        if replace_request(reqs, src.intent, new) < 2:
            print(f"{src.key}: request not found in a user message", file=sys.stderr)
            problems += 1
        name = f"{src.task}__reworded__none"
        scope = f"adversarial/{src.model}/{src.suite}/{name}"
        remap_ids(reqs, scope)
        renumber(reqs)
        labels = dict(src.labels)
        labels.update({"stream_id": scope, "benign_set": "reworded", "attacker_goal_calls": [],
                       "injected_results": [], "source_stream": f"agentdojo/{src.key}"})
        write_pair(out, src.model, src.suite, name, reqs, labels)
        written[("reworded", src.suite)] += 1

    for (cls, suite), n in sorted(written.items()):
        print(f"{cls:16} {suite:10} {n:4} streams per variant", file=sys.stderr)
    print(f"total {sum(written.values())} streams per variant", file=sys.stderr)
    if args.archive:
        pack(out, Path(args.archive))
        print(f"wrote {args.archive}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
