"""Warden policies for Agent Control Standard (ACS) Guardians, in-process.

Load a policy, make a Guardian, and decide requests::

    import warden

    policy = warden.Policy.from_file("policy.ward")
    guardian = warden.Guardian(policy)
    result = guardian.decide("toolCallRequest", tool="send_money", args={"amount": 50})
    if result["decision"] != "allow":
        ...

``Guardian.handle`` takes a whole JSON-RPC request envelope (bytes) and returns the response
envelope (bytes), for callers that already speak ACS. See docs/python.md.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, TypedDict, Union

from . import _warden
from ._warden import ACS_VERSION, ApprovalError, Policy, PolicyError

__all__ = [
    "ACS_VERSION",
    "Approval",
    "ApprovalError",
    "Grant",
    "Guardian",
    "Policy",
    "PolicyError",
    "ProtocolError",
    "Result",
    "check",
    "__version__",
]

Decision = Literal["allow", "deny", "ask", "defer", "modify"]


class _ResultKeys(TypedDict):
    decision: Decision
    reason_codes: List[str]
    reasoning: Optional[str]
    policy_references: List[Dict[str, Any]]
    policy_data: Dict[str, Any]


class Result(_ResultKeys, total=False):
    """An ACS result as ``Guardian.decide`` returns it: ``decision``, ``reason_codes``,
    ``reasoning``, ``policy_references`` and ``policy_data`` are always there (empty when the
    Guardian said nothing of the kind); ``modifications``, ``ask_details``, ``defer_details``
    and ``chain_hash`` when the decision has them."""

    modifications: Dict[str, Any]
    ask_details: Dict[str, Any]
    defer_details: Dict[str, Any]
    chain_hash: str


class Approval(TypedDict):
    """One ask and where it stands (``Guardian.list_approvals``)."""

    session: str
    request_id: str
    status: Literal["pending", "granted", "expired"]
    approver: Dict[str, str]
    question: Optional[str]
    action_hash: str
    action: Any


class Grant(TypedDict):
    """What ``Guardian.approve`` granted: the next call of exactly the asked action, within
    ``expires_seconds``, goes ahead once."""

    session: str
    request_id: str
    action_hash: str
    expires_seconds: int
    intent: Literal["extended", "refused_strict", "unchanged"]

__version__: str = _warden.__version__


class ProtocolError(Exception):
    """The Guardian answered a request built by ``decide`` with a JSON-RPC error.

    ``code`` is the JSON-RPC error code (for instance -32003 when a strict Guardian saw no
    handshake), ``data`` the error's ``data`` member (a dict, or None), and ``response`` the
    whole response envelope.
    """

    def __init__(self, code: int, message: str, data: Any, response: Dict[str, Any]):
        super().__init__(f"{code} {message}")
        self.code = code
        self.message = message
        self.data = data
        self.response = response


class Guardian(_warden.Guardian):
    """Decides ACS requests against a policy, keeping per-session state between steps.

    ``Guardian(policy, *, strict=False, explain=False, on_decision_failure="deny",
    agent_id="python", session_id=None, idle_timeout=3600.0, decision_log=None, state=None)``.
    ``idle_timeout``: seconds without a request after which a session leaves memory (None:
    never). ``decision_log``: a path (one JSON line per decision, appended) or a callable given
    each record as a dict (docs/serve.md, "Decision logs", for the record). ``state``: a folder
    (str or os.PathLike, created if missing) every decision is journalled to before it is
    answered; a Guardian opened on it later restores its sessions, so their history still
    counts (one Guardian at a time per folder; it is let go when the Guardian is garbage
    collected). Raises OSError when the folder cannot be opened. Safe to share
    between threads: decisions release the GIL, and sessions decide in parallel (one session's
    steps are decided one at a time).
    """

    def __new__(
        cls,
        policy: Policy,
        *,
        strict: bool = False,
        explain: bool = False,
        on_decision_failure: Literal["deny", "error"] = "deny",
        agent_id: str = "python",
        session_id: Optional[str] = None,
        idle_timeout: Optional[float] = 3600.0,
        decision_log: Union[str, "os.PathLike[str]", Callable[[Dict[str, Any]], Any], None] = None,
        state: Union[str, "os.PathLike[str]", None] = None,
    ) -> "Guardian":
        log: Any = decision_log
        if decision_log is not None and callable(decision_log):
            sink = decision_log
            log = lambda text: sink(json.loads(text))  # noqa: E731
        return super().__new__(
            cls,
            policy,
            strict=strict,
            explain=explain,
            on_decision_failure=on_decision_failure,
            agent_id=agent_id,
            session_id=session_id,
            idle_timeout=idle_timeout,
            decision_log=log,
            state=state,
        )

    def list_approvals(self) -> List[Approval]:
        """Every ask the Guardian's sessions made, pending, granted or expired."""
        return json.loads(self._approvals())

    def approve(self, request_id: str, approver: str) -> Grant:
        """Grants the ask whose ``request_id`` the ask's result carried, as ``approver`` (the
        ask's approver id). Raises ApprovalError for an unknown ask, another approver, an ask
        that timed out or was granted already."""
        return json.loads(self._approve(request_id, approver))

    def end_session(self, session_id: Optional[str] = None) -> Result:
        """Ends a session (``steps/sessionEnd``; the Guardian's own when none is given): it
        takes no more steps and leaves memory at the next eviction."""
        return self.decide("sessionEnd", session_id=session_id, payload={"reason": "completed"})

    def decide(
        self,
        hook: str = "toolCallRequest",
        *,
        tool: Optional[str] = None,
        args: Optional[Mapping[str, Any]] = None,
        origin: Optional[str] = None,
        text: Optional[str] = None,
        outputs: Optional[Sequence[Any]] = None,
        payload: Optional[Mapping[str, Any]] = None,
        session_id: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> Result:
        """Builds the request for ``hook`` and returns the ACS result as a dict.

        ``tool`` sets ``payload.tool.name``; each of ``args`` becomes an argument
        ``{"value": v}`` (with ``origin``: ``{"value": v, "provenance": {"origin": origin}}``;
        without one Warden infers where the value was taken from). ``text`` is a
        ``userMessage`` or ``agentResponse`` text part; ``outputs`` the values a tool
        returned, for ``toolCallResult``. Content needs no provenance ids: Warden gives each
        item its hook's origin and an id (docs/python.md, "An agent loop"). ``payload`` gives
        any other members (or the whole payload). ``session_id`` defaults to the Guardian's own
        (``guardian.session_id``); ``metadata`` adds members to the envelope's metadata. In
        strict mode the session's handshake is sent first, once.

        The result has ``decision`` ("allow", "deny", "modify", "ask" or "defer"),
        ``reason_codes``, ``reasoning`` and, for "modify", ``modifications``. A JSON-RPC error
        raises ProtocolError.
        """
        if payload is not None and not isinstance(payload, Mapping):
            raise TypeError("payload must be a dict")
        if args is not None and not isinstance(args, Mapping):
            raise TypeError("args must be a dict")
        if outputs is not None and (isinstance(outputs, (str, bytes)) or not isinstance(outputs, Sequence)):
            raise TypeError("outputs must be a list of values")
        body: Dict[str, Any] = dict(payload or {})
        if tool is not None:
            body["tool"] = {**body.get("tool", {}), "name": tool}
        method = hook if "/" in hook else "steps/" + hook
        if args is not None or (method == "steps/toolCallRequest" and "arguments" not in body):
            arguments = dict(body.get("arguments", {}))
            for name, value in (args or {}).items():
                item: Dict[str, Any] = {"value": value}
                if origin is not None:
                    item["provenance"] = {"origin": origin}
                arguments[name] = item
            body["arguments"] = arguments
        if text is not None:
            body["content"] = list(body.get("content", [])) + [{"type": "text", "value": text}]
        if outputs is not None:
            body["outputs"] = list(body.get("outputs", [])) + [{"value": v} for v in outputs]
            body.setdefault("exit_status", "success")
        text_out = self._decide(hook, session_id, json.dumps(dict(metadata or {})), json.dumps(body))
        response = json.loads(text_out)
        if "error" in response:
            error = response["error"]
            raise ProtocolError(error.get("code", 0), error.get("message", ""), error.get("data"), response)
        result = response["result"]
        for key, empty in (("reason_codes", []), ("reasoning", None), ("policy_references", []), ("policy_data", {})):
            result.setdefault(key, empty)
        return result


def check(path: Union[str, "os.PathLike[str]"]) -> str:
    """Loads the policy at ``path`` (a ``str`` or an ``os.PathLike``, such as a ``Path``);
    returns its warnings (rendered, "" for none) or raises PolicyError with the rendered
    errors."""
    return Policy.from_file(os.fspath(path)).warnings
