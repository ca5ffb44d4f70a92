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
from typing import Any, Dict, Mapping, Optional

from . import _warden
from ._warden import ACS_VERSION, Policy, PolicyError

__all__ = [
    "ACS_VERSION",
    "Guardian",
    "Policy",
    "PolicyError",
    "ProtocolError",
    "check",
    "__version__",
]

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
    agent_id="python", session_id=None)``. Safe to share between threads: decisions release
    the GIL.
    """

    def decide(
        self,
        hook: str = "toolCallRequest",
        *,
        tool: Optional[str] = None,
        args: Optional[Mapping[str, Any]] = None,
        origin: str = "agent_generated",
        payload: Optional[Mapping[str, Any]] = None,
        session_id: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> Dict[str, Any]:
        """Builds the request for ``hook`` and returns the ACS result as a dict.

        ``tool`` sets ``payload.tool.name``; each of ``args`` becomes an argument
        ``{"value": v, "provenance": {"origin": origin}}``; ``payload`` gives any other members
        (or the whole payload, for hooks other than tool calls). ``session_id`` defaults to the
        Guardian's own (``guardian.session_id``); ``metadata`` adds members to the envelope's
        metadata. In strict mode the session's handshake is sent first, once.

        The result has ``decision`` ("allow", "deny", "modify", "ask" or "defer"),
        ``reason_codes``, ``reasoning`` and, for "modify", ``modifications``. A JSON-RPC error
        raises ProtocolError.
        """
        if payload is not None and not isinstance(payload, Mapping):
            raise TypeError("payload must be a dict")
        if args is not None and not isinstance(args, Mapping):
            raise TypeError("args must be a dict")
        body: Dict[str, Any] = dict(payload or {})
        if tool is not None:
            body["tool"] = {**body.get("tool", {}), "name": tool}
        method = hook if "/" in hook else "steps/" + hook
        if args is not None or (method == "steps/toolCallRequest" and "arguments" not in body):
            arguments = dict(body.get("arguments", {}))
            for name, value in (args or {}).items():
                arguments[name] = {"value": value, "provenance": {"origin": origin}}
            body["arguments"] = arguments
        text = self._decide(hook, session_id, json.dumps(dict(metadata or {})), json.dumps(body))
        response = json.loads(text)
        if "error" in response:
            error = response["error"]
            raise ProtocolError(error.get("code", 0), error.get("message", ""), error.get("data"), response)
        return response["result"]


def check(path: str) -> str:
    """Loads the policy at ``path``; returns its warnings (rendered, "" for none) or raises
    PolicyError with the rendered errors."""
    return Policy.from_file(path).warnings
