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
from typing import Any, Dict, Mapping, Optional, Sequence

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
        origin: Optional[str] = None,
        text: Optional[str] = None,
        outputs: Optional[Sequence[Any]] = None,
        payload: Optional[Mapping[str, Any]] = None,
        session_id: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> Dict[str, Any]:
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
        return response["result"]


def check(path: str) -> str:
    """Loads the policy at ``path``; returns its warnings (rendered, "" for none) or raises
    PolicyError with the rendered errors."""
    return Policy.from_file(path).warnings
