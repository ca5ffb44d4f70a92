# Types of the native module (python/src/lib.rs).
from os import PathLike
from typing import Optional, Union, final

__all__ = ["ACS_VERSION", "Guardian", "Policy", "PolicyError", "__version__"]

ACS_VERSION: str
__version__: str

class PolicyError(Exception):
    """A policy that does not load: its diagnostics, rendered, are the message."""

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
        on_decision_failure: str = "deny",
        agent_id: str = "python",
        session_id: Optional[str] = None,
    ) -> Guardian: ...
    def handle(self, request: Union[bytes, bytearray, str]) -> bytes: ...
    def _decide(
        self, hook: str, session_id: Optional[str], metadata: str, payload: str
    ) -> str: ...
    def set_policy(self, policy: Policy) -> None: ...
    @property
    def policy_digest(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def strict(self) -> bool: ...
