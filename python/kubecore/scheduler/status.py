"""Outcomes of plugins: a `Code` and a `Status` (upstream framework.Code / framework.Status).

Plugins report outcomes as statuses, never by raising. `None` stands for Success everywhere a
status is returned (upstream's nil *Status), so the common case allocates nothing.

Codes and what the framework does with them:

    Success                        go on
    Error                          internal failure; the pod goes to the error backoff
    Unschedulable                  rejected here; preemption (PostFilter) may help
    UnschedulableAndUnresolvable   rejected here; preemption cannot help (PostFilter skips the node)
    Wait                           Permit only: hold the pod until allowed, rejected or timed out
    Skip                           PreFilter/PreScore: skip my Filter/Score; Bind: not mine
    Pending                        rejected until an external event (queueing hint Queue skips backoff)

`Status.message()` joins the reasons with ", " like upstream's Message().
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

__all__ = ["Code", "Status", "as_status", "is_success", "code_of", "message_of"]


class Code(enum.IntEnum):
    """The outcome of running a plugin (values as upstream's iota order)."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6

    @property
    def label(self) -> str:
        """Upstream's Code.String(): "Success", "UnschedulableAndUnresolvable", ..."""
        return _LABELS[self]


_LABELS = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}
_REJECTED = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})


class Status:
    """A code, the reasons behind it, the plugin that produced it and, for errors, the cause.

    Invariant: `error` is set only when `code` is ERROR (then `reasons == [str(error)]` unless the
    plugin gave its own reasons).
    """

    __slots__ = ("code", "reasons", "plugin", "error")

    def __init__(self, code: Code = Code.SUCCESS, *reasons: str, plugin: str = "",
                 error: BaseException | None = None) -> None:
        self.code = code
        self.reasons: list[str] = [r for r in reasons if r] if reasons else []
        self.plugin = plugin
        self.error = error

    # ---- predicates ------------------------------------------------------------------------

    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    def is_wait(self) -> bool:
        return self.code is Code.WAIT

    def is_skip(self) -> bool:
        return self.code is Code.SKIP

    def is_rejected(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending (upstream IsRejected)."""
        return self.code in _REJECTED

    # ---- views -----------------------------------------------------------------------------

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        """Set the plugin (in place) and return self, as upstream's WithPlugin."""
        self.plugin = plugin
        return self

    def with_error(self, error: BaseException) -> Status:
        """Attach a cause; the message becomes the error's text when no reason was given."""
        self.error = error
        if not self.reasons:
            self.reasons = [str(error)]
        return self

    def as_error(self) -> BaseException | None:
        """None for success; the cause for errors; otherwise an exception carrying the message."""
        if self.code is Code.SUCCESS:
            return None
        if self.error is not None:
            return self.error
        return StatusError(self.message())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return (self.code, self.reasons, self.plugin) == (other.code, other.reasons, other.plugin)

    def __hash__(self) -> int:
        return hash((self.code, tuple(self.reasons), self.plugin))

    def __repr__(self) -> str:
        who = f" plugin={self.plugin!r}" if self.plugin else ""
        return f"Status({self.code.label}{who}: {self.message()!r})"


class StatusError(Exception):
    """A non-success status seen as an exception (upstream Status.AsError)."""


def as_status(error: BaseException, *, plugin: str = "") -> Status:
    """An ERROR status wrapping `error` (upstream AsStatus)."""
    return Status(Code.ERROR, str(error), plugin=plugin, error=error)


def is_success(status: Status | None) -> bool:
    return status is None or status.code is Code.SUCCESS


def code_of(status: Status | None) -> Code:
    return Code.SUCCESS if status is None else status.code


def message_of(status: Status | None) -> str:
    return "" if status is None else status.message()


def join_reasons(statuses: Iterable[Status]) -> list[str]:
    """All reasons of `statuses`, in order."""
    out: list[str] = []
    for s in statuses:
        out.extend(s.reasons)
    return out
