"""The installed wheel, end to end (run by scripts/python-wheel-test.sh in a fresh virtualenv):
policies load or raise with their diagnostics, envelopes are decided through `handle`, and
`decide` builds them, in the lenient and the strict protocol, from several threads."""

import json
import os
import threading
import unittest
import uuid

import warden

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

POLICY = """
rule no_rm on toolCallRequest
  when tool.name == "rm"
  => deny "no_rm": "never delete files"

default allow
"""


def envelope(tool, session, arguments=None, method="steps/toolCallRequest"):
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": method,
            "params": {
                "acs_version": warden.ACS_VERSION,
                "request_id": str(uuid.uuid4()),
                "timestamp": "2026-12-01T10:00:00Z",
                "metadata": {"agent_id": "test", "session_id": session},
                "payload": {"tool": {"name": tool}, "arguments": arguments or {}},
            },
        }
    ).encode()


class Installed(unittest.TestCase):
    def test_the_installed_wheel_is_imported(self):
        # Not the source tree: the package with its compiled extension, from site-packages.
        self.assertIn("site-packages", warden.__file__)
        self.assertTrue(warden._warden.__file__.endswith((".so", ".pyd")))
        self.assertEqual(warden.ACS_VERSION, "0.1.0")
        pkg = os.path.dirname(warden.__file__)
        for name in ("py.typed", "_warden.pyi"):
            self.assertTrue(os.path.exists(os.path.join(pkg, name)), name)


class Handle(unittest.TestCase):
    def setUp(self):
        self.guardian = warden.Guardian(warden.Policy.from_source(POLICY, name="demo"), explain=True)

    def test_allowed_and_denied_envelopes(self):
        session = str(uuid.uuid4())
        out = self.guardian.handle(envelope("ls", session))
        self.assertIsInstance(out, bytes)
        response = json.loads(out)
        self.assertEqual(response["id"], 7)
        self.assertEqual(response["result"]["decision"], "allow")

        response = json.loads(self.guardian.handle(envelope("rm", session)))
        self.assertEqual(response["result"]["decision"], "deny")
        self.assertEqual(response["result"]["reason_codes"], ["no_rm"])
        self.assertEqual(response["result"]["policy_data"]["warden"]["fired"], ["demo.no_rm"])

    def test_str_and_bytearray_are_accepted(self):
        body = envelope("rm", str(uuid.uuid4()))
        self.assertEqual(json.loads(self.guardian.handle(body.decode()))["result"]["decision"], "deny")
        self.assertEqual(json.loads(self.guardian.handle(bytearray(body)))["result"]["decision"], "deny")
        with self.assertRaises(TypeError):
            self.guardian.handle(42)

    def test_malformed_input_gets_a_json_rpc_error(self):
        response = json.loads(self.guardian.handle(b"{not json"))
        self.assertEqual(response["error"]["code"], -32700)
        self.assertIsNone(response["id"])


class Decide(unittest.TestCase):
    def test_decide_builds_the_envelope(self):
        g = warden.Guardian(warden.Policy.from_source(POLICY))
        allowed = g.decide("toolCallRequest", tool="ls", args={"path": "/tmp"})
        self.assertEqual(allowed["decision"], "allow")
        denied = g.decide(tool="rm", args={"path": "/"})
        self.assertEqual(denied["decision"], "deny")
        self.assertEqual(denied["reason_codes"], ["no_rm"])
        self.assertEqual(denied["reasoning"], "never delete files")
        self.assertEqual(g.decide("steps/toolCallRequest", tool="rm")["decision"], "deny")

    def test_a_policy_file_with_its_uses_and_a_modification(self):
        policy = warden.Policy.from_file(os.path.join(REPO, "examples", "pii_redaction.ward"))
        g = warden.Guardian(policy)
        session = str(uuid.uuid4())
        g.decide("sessionStart", payload={"intent": {"raw": "send 5000 to alice"}}, session_id=session)
        capped = g.decide(
            tool="send_money", args={"recipient": "alice", "amount": 5000}, origin="user_input", session_id=session
        )
        self.assertEqual(capped["decision"], "modify")
        self.assertEqual(capped["reason_codes"], ["pii.cap_amount"])
        self.assertIn("1000", json.dumps(capped["modifications"]))
        small = g.decide(tool="send_money", args={"recipient": "alice", "amount": 10}, session_id=session)
        self.assertEqual(small["decision"], "allow")

    def test_the_default_policy_and_per_argument_provenance(self):
        g = warden.Guardian(warden.Policy.default(), agent_id="mail-agent")
        self.assertEqual(g.agent_id, "mail-agent")
        s = str(uuid.uuid4())
        said = {"type": "text", "value": "email bob@example.com the report", "provenance": {"origin": "user_input"}}
        self.assertEqual(g.decide("userMessage", session_id=s, payload={"content": [said]})["decision"], "allow")
        injected = g.decide(tool="send_email", session_id=s, args={"to": "eve@evil.example"})
        self.assertEqual(injected["decision"], "deny")
        self.assertEqual(injected["reason_codes"], ["provenance.destination"])
        to = {"value": "bob@example.com", "provenance": {"origin": "user_input"}}
        asked = g.decide(tool="send_email", session_id=s, payload={"arguments": {"to": to}})
        self.assertEqual(asked["decision"], "allow")

    def test_an_agent_loop_without_ids_keeps_provenance(self):
        # The loop of docs/python.md, "An agent loop": no provenance ids anywhere.
        g = warden.Guardian(warden.Policy.default())
        s = str(uuid.uuid4())
        g.decide("sessionStart", session_id=s, payload={"intent": {"raw": "summarise bill.txt for me"}})
        self.assertEqual(g.decide("userMessage", session_id=s, text="summarise bill.txt for me")["decision"], "allow")
        self.assertEqual(g.decide(tool="read_file", session_id=s, args={"path": "bill.txt"})["decision"], "allow")
        read = g.decide("toolCallResult", tool="read_file", session_id=s, outputs=["Pay 98.70 to GB29 NWBK 6016 1331 9268 19"])
        self.assertEqual(read["decision"], "allow")
        paid = g.decide(tool="send_money", session_id=s, args={"recipient": "GB29 NWBK 6016 1331 9268 19", "amount": 98.70})
        self.assertEqual(paid["decision"], "deny")
        self.assertIn("provenance.destination", paid["reason_codes"])
        # Saying the value came from the user does not make it so.
        claimed = g.decide(
            tool="send_money", session_id=s, origin="user_input",
            args={"recipient": "GB29 NWBK 6016 1331 9268 19", "amount": 98.70},
        )
        self.assertEqual(claimed["decision"], "deny")
        typed = str(uuid.uuid4())
        g.decide("userMessage", session_id=typed, text="send 20 to GB29 NWBK 6016 1331 9268 19")
        mine = g.decide(tool="send_money", session_id=typed, args={"recipient": "GB29 NWBK 6016 1331 9268 19", "amount": 20})
        self.assertEqual(mine["decision"], "allow")

    def test_sessions_keep_their_history(self):
        policy = warden.Policy.from_source(
            """
rule burst on toolCallRequest
  when tool.name == "send_email" and count(toolCallRequest when tool.name == "send_email", session) >= 2
  => deny "burst": "two emails a session"

default allow
"""
        )
        g = warden.Guardian(policy)
        a, b = str(uuid.uuid4()), str(uuid.uuid4())
        self.assertEqual(g.decide(tool="send_email", session_id=a)["decision"], "allow")
        self.assertEqual(g.decide(tool="send_email", session_id=a)["decision"], "allow")
        self.assertEqual(g.decide(tool="send_email", session_id=a)["decision"], "deny")
        self.assertEqual(g.decide(tool="send_email", session_id=b)["decision"], "allow")

    def test_strict_mode_says_hello_for_decide(self):
        g = warden.Guardian(warden.Policy.from_source(POLICY), strict=True)
        self.assertTrue(g.strict)
        denied = g.decide(tool="rm")
        self.assertEqual(denied["decision"], "deny")
        self.assertIn("chain_hash", denied)  # the audit chain is on in strict mode
        self.assertEqual(g.decide(tool="ls")["decision"], "allow")
        # `handle` is the raw protocol: no handshake, no hook traffic.
        response = json.loads(g.handle(envelope("ls", str(uuid.uuid4()))))
        self.assertEqual(response["error"]["code"], -32003)

    def test_errors_raise_protocol_error(self):
        g = warden.Guardian(warden.Policy.from_source(POLICY))
        with self.assertRaises(warden.ProtocolError) as caught:
            g.decide("noSuchHook")
        self.assertEqual(caught.exception.code, -32601)
        self.assertIn("error", caught.exception.response)
        with self.assertRaises(TypeError):
            g.decide(payload=["not", "a", "dict"])

    def test_threads_share_a_guardian(self):
        g = warden.Guardian(warden.Policy.from_source(POLICY))
        results = []

        def work():
            session = str(uuid.uuid4())
            for i in range(50):
                tool = "rm" if i % 2 else "ls"
                results.append((tool, g.decide(tool=tool, session_id=session)["decision"]))

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len(results), 200)
        for tool, decision in results:
            self.assertEqual(decision, "deny" if tool == "rm" else "allow")


class Policies(unittest.TestCase):
    def test_a_policy_error_raises_with_its_diagnostics(self):
        with self.assertRaises(warden.PolicyError) as caught:
            warden.Policy.from_source('rule x on toolCallRequest when tool.nme == "a" => deny "a": "b"\ndefault allow\n')
        message = str(caught.exception)
        self.assertIn("check::unknown_field", message)
        self.assertIn("tool.nme", message)
        self.assertIn("policy:1:", message)

    def test_a_missing_file_raises(self):
        with self.assertRaises(warden.PolicyError) as caught:
            warden.Policy.from_file(os.path.join(REPO, "no-such-policy.ward"))
        self.assertIn("no-such-policy.ward", str(caught.exception))

    def test_check_and_default_and_reload(self):
        self.assertEqual(warden.check(os.path.join(REPO, "examples", "rate_limits.ward")), "")
        default = warden.Policy.default()
        self.assertEqual(len(default.digest), 64)
        g = warden.Guardian(default)
        self.assertEqual(g.policy_digest, default.digest)
        strict = warden.Policy.from_source(POLICY)
        g.set_policy(strict)
        self.assertEqual(g.policy_digest, strict.digest)
        self.assertEqual(g.decide(tool="rm")["decision"], "deny")


ASKING = """
rule big on toolCallRequest
  when tool.name == "send_money" and args.amount > 1000
  => ask "pay.big": "a large payment" approver human "alice"

default allow
"""


class Embedding(unittest.TestCase):
    """What a platform team used to write by hand (issue 38): approvals, decision logs,
    sessions, typed results, paths."""

    def test_an_ask_is_listed_and_approved_and_the_exact_call_then_goes_ahead(self):
        g = warden.Guardian(warden.Policy.from_source(ASKING))
        asked = g.decide(tool="send_money", args={"to": "bob", "amount": 5000})
        self.assertEqual(asked["decision"], "ask")
        [approval] = g.list_approvals()
        self.assertEqual(approval["status"], "pending")
        self.assertEqual(approval["approver"], {"type": "human", "id": "alice"})
        with self.assertRaises(warden.ApprovalError):
            g.approve(approval["request_id"], "mallory")
        grant = g.approve(approval["request_id"], "alice")
        self.assertEqual(grant["request_id"], approval["request_id"])
        self.assertEqual(g.list_approvals()[0]["status"], "granted")
        self.assertEqual(g.decide(tool="send_money", args={"to": "bob", "amount": 5000})["decision"], "allow")
        with self.assertRaises(warden.ApprovalError):
            g.approve("no-such-ask", "alice")

    def test_decision_logs_to_a_file_and_to_a_callable(self):
        import pathlib
        import tempfile

        seen = []
        g = warden.Guardian(warden.Policy.from_source(POLICY), decision_log=seen.append)
        g.decide(tool="rm")
        self.assertEqual(seen[-1]["decision"], "deny")
        self.assertEqual(seen[-1]["rules"], ["policy.no_rm"])
        with tempfile.TemporaryDirectory() as d:
            path = pathlib.Path(d) / "decisions.jsonl"
            g = warden.Guardian(warden.Policy.from_source(POLICY), decision_log=path)
            g.decide(tool="ls")
            g.decide(tool="rm")
            records = [json.loads(line) for line in path.read_text().splitlines()]
            self.assertEqual([r["decision"] for r in records], ["allow", "deny"])
        with self.assertRaises(TypeError):
            warden.Guardian(warden.Policy.from_source(POLICY), decision_log=42)

    def test_sessions_are_listed_ended_and_evicted(self):
        g = warden.Guardian(warden.Policy.from_source(POLICY), idle_timeout=0.05)
        s1, s2 = str(uuid.uuid4()), str(uuid.uuid4())
        g.decide(tool="ls", session_id=s1)
        g.decide(tool="ls", session_id=s2)
        self.assertEqual(sorted(g.session_ids()), sorted([s1, s2]))
        self.assertEqual(g.end_session(s1)["decision"], "allow")
        with self.assertRaises(warden.ProtocolError):
            g.decide(tool="ls", session_id=s1)
        import time

        time.sleep(0.1)
        self.assertGreaterEqual(g.evict_idle(), 1)
        self.assertNotIn(s2, g.session_ids())
        with self.assertRaises(ValueError):
            warden.Guardian(warden.Policy.from_source(POLICY), idle_timeout=-1)

    def test_results_always_carry_the_documented_keys(self):
        g = warden.Guardian(warden.Policy.from_source(POLICY))
        for tool in ("ls", "rm"):
            result = g.decide(tool=tool)
            for key in ("decision", "reason_codes", "reasoning", "policy_references", "policy_data"):
                self.assertIn(key, result, tool)
        self.assertEqual(g.decide(tool="ls")["reason_codes"], [])

    def test_a_state_folder_keeps_sessions_across_a_reopen(self):
        import gc
        import pathlib
        import tempfile

        burst = warden.Policy.from_source(
            """
rule burst on toolCallRequest
  when tool.name == "send_email" and count(toolCallRequest when tool.name == "send_email", session) >= 2
  => deny "burst": "two emails a session"

default allow
"""
        )
        with tempfile.TemporaryDirectory() as d:
            state = pathlib.Path(d) / "state"  # os.PathLike, created on first open
            a, b = str(uuid.uuid4()), str(uuid.uuid4())
            g = warden.Guardian(burst, state=state)
            self.assertEqual(g.decide(tool="send_email", session_id=a)["decision"], "allow")
            self.assertEqual(g.decide(tool="send_email", session_id=a)["decision"], "allow")
            self.assertEqual(g.decide(tool="send_email", session_id=b)["decision"], "allow")
            # One Guardian per folder: a second one is refused while the first is open.
            with self.assertRaises(OSError) as caught:
                warden.Guardian(burst, state=str(state))
            self.assertIn("could not be opened", str(caught.exception))
            del g
            gc.collect()
            # Reopened (as str this time): both sessions are back with their history, so the
            # count rule fires on a's third email and not on b's second.
            g = warden.Guardian(burst, state=str(state))
            self.assertEqual(sorted(g.session_ids()), sorted([a, b]))
            self.assertEqual(g.decide(tool="send_email", session_id=a)["decision"], "deny")
            self.assertEqual(g.decide(tool="send_email", session_id=b)["decision"], "allow")
            del g
            gc.collect()
            # A strict Guardian's sessions come back greeted: decide does not say hello again.
            s = str(uuid.uuid4())
            g = warden.Guardian(burst, strict=True, state=state)
            self.assertEqual(g.decide(tool="send_email", session_id=s)["decision"], "allow")
            del g
            gc.collect()
            g = warden.Guardian(burst, strict=True, state=state)
            self.assertEqual(g.decide(tool="send_email", session_id=s)["decision"], "allow")
            self.assertEqual(g.decide(tool="send_email", session_id=s)["decision"], "deny")
            del g
            gc.collect()
        with self.assertRaises(TypeError):
            warden.Guardian(burst, state=42)

    def test_paths_are_accepted_wherever_a_file_is(self):
        import pathlib

        path = pathlib.Path(REPO) / "examples" / "rate_limits.ward"
        self.assertEqual(warden.check(path), "")
        self.assertEqual(len(warden.Policy.from_file(path).digest), 64)


class Readme(unittest.TestCase):
    def test_the_readme_example_runs(self):
        import re
        import tempfile

        with open(os.path.join(REPO, "python", "README.md")) as f:
            [example] = re.findall(r"```python\n(.*?)```", f.read(), re.S)
        here = os.getcwd()
        with tempfile.TemporaryDirectory() as d:
            os.chdir(d)
            try:
                exec(compile(example, "python/README.md", "exec"), {})
                with open("decisions.jsonl") as f:
                    decisions = [json.loads(line)["decision"] for line in f]
            finally:
                os.chdir(here)
        self.assertEqual(decisions, ["allow", "allow", "allow"])


if __name__ == "__main__":
    unittest.main()
