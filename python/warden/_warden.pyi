# Types of the native module (python/src/lib.rs).
from os import PathLike
from typing import Any, Callable, List, Literal, Optional, Union, final

__all__ = ["ACS_VERSION", "ApprovalError", "Guardian", "Policy", "PolicyError", "__version__"]

ACS_VERSION: str
__version__: str

class PolicyError(Exception):
    """A policy that does not load: its diagnostics, rendered, are the message."""

class ApprovalError(Exception):
    """An approval that was not granted: unknown ask, wrong approver, expired or granted."""

@final
class Policy:
    @staticmethod
    def from_file(path: Union[str, PathLike[str]]) -> Policy: ...
    @staticmethod
    def from_source(
        text: str, name: str = "policy", base_dir: Optional[Union[str, PathLike[str]]] = None
    ) -> Policy: ...
    @staticmethod
    def default() -> Policy: ...
    @property
    def digest(self) -> str: ...
    @property
    def warnings(self) -> str: ...

class Guardian:
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
        decision_log: Union[str, PathLike[str], Callable[[str], Any], None] = None,
        state: Union[str, PathLike[str], None] = None,
    ) -> Guardian: ...
    def handle(self, request: Union[bytes, bytearray, str]) -> bytes: ...
    def _decide(
        self, hook: str, session_id: Optional[str], metadata: str, payload: str
    ) -> str: ...
    def _approvals(self) -> str: ...
    def _approve(self, request_id: str, approver: str) -> str: ...
    def session_ids(self) -> List[str]: ...
    def evict_idle(self) -> int: ...
    def set_policy(self, policy: Policy) -> None: ...
    @property
    def policy_digest(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def strict(self) -> bool: ...
