"""Why a call could not be answered, each with what the coordinator may assume: the HTTP
status and code (docs/participant-openapi.json) and, on Lambda, the function error's
``errorType`` (the class name: the Rust SDK's ``ErrorKind`` names)."""

from __future__ import annotations


class CallFailed(Exception):
    status = 500
    code = "internal"


class Retryable(CallFailed):
    """Nothing was done; the same call may succeed later."""

    status, code = 503, "unavailable"


class Undetermined(CallFailed):
    """The call may or may not have acted."""

    status, code = 500, "internal"


class Invalid(CallFailed):
    """The call itself is wrong; repeating it will not help."""

    status, code = 400, "invalid_request"


class Fatal(CallFailed):
    """Anything else."""


class Busy(Retryable):
    """A copy of this message is being carried out right now."""

    code = "busy"


class StoreUnavailable(Retryable):
    """The state store throttled or failed before writing."""


class StoreUndetermined(Undetermined):
    """The state store did not answer: a write may have landed."""


class HookFailed(Undetermined):
    """A hook failed; the next message (or the sweep) calls it again, or cancels."""

    code = "hook_failed"
