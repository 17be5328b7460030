"""What oversight decided about one call, as plain data (docs/design.md §3.14).

core.serving.calls.approvals makes one for every ``tools/call`` an ``approve``
rule or a held tool concerns; the pipeline puts it on the request
(``Request.verdict``), where the call journal reads its outcome:
``allowed``, ``refused`` (by ``tool-change``), ``denied`` or ``timeout``
(by ``approval``).
"""

from dataclasses import dataclass
from typing import Any, Final, Literal

Outcome = Literal["allowed", "refused", "denied", "timeout"]
#: How long an "allow" holds: this call, the client session, or from now on.
Scope = Literal["once", "session", "always"]
SCOPES: Final = ("once", "session", "always")


@dataclass(frozen=True)
class Verdict:
    """What oversight decided about one call (plain data: the call journal records it)."""

    outcome: Outcome
    #: ``approval`` (an approve rule) or ``tool-change`` (a held tool).
    by: str
    #: The approval's id (``c-…`` a call, ``t-…`` a tool change).
    approval: str
    #: What the model reads when the call is refused; how it was allowed otherwise.
    text: str
    #: How an allowed call was allowed.
    scope: Scope | None = None

    @property
    def refused(self) -> bool:
        return self.outcome != "allowed"

    def tool_error(self) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": self.text}], "isError": True}
