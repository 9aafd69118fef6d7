"""Failure classes of a trial. Names match Harbor's exception types where Harbor has one, so error
counts read the same in our metrics and in Harbor's job results."""

from __future__ import annotations


class SandboxError(RuntimeError):
    """Base class: something went wrong running a task in its container (infrastructure)."""


class BuildError(SandboxError):
    """A base or task image could not be built; the message ends with the build log tail."""


class AgentTimeoutError(SandboxError):
    """The agent phase ran past the task's agent timeout. Graded: the trial's reward is 0. `record` holds the
    episode as far as it got (the agent ended it with ended_by "timeout"), or None."""

    def __init__(self, message: str, record: dict | None = None):
        super().__init__(message)
        self.record = record


class VerifierTimeoutError(SandboxError):
    """The task's tests ran past the verifier timeout."""


class VerifierError(SandboxError):
    """The verifier ran but produced no readable reward (never turned into a silent 0)."""


class OutOfMemoryError(SandboxError):
    """The container's memory limit was hit: the kernel OOM killer ended a process (exit 137)."""
