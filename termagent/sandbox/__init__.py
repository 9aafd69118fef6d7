"""Docker sandbox: base image, task images, one container per trial with limits, exec, verifier, cleanup.

    from termagent.sandbox import Sandbox, SandboxConfig, run_trial, run_trials, TrialResult

Where things are: the container pool in `pool.py` (Sandbox, SandboxConfig), one trial's lifecycle in
`lifecycle.py` (run_trial, run_trials, TrialResult, Agent), the live container handle in `trial.py`
(Trial), the verifier in `verifier.py`, images in `image.py` / `task_image.py`, the params section in
`settings.py` (SandboxParams), the progress lines of a loop of trials in `progress.py` (TrialProgress).
"""

from termagent.sandbox.lifecycle import GRADED_ERRORS, Agent, TrialResult, run_trial, run_trials
from termagent.sandbox.pool import Sandbox, SandboxConfig
from termagent.sandbox.settings import SandboxParams
from termagent.sandbox.trial import Trial

__all__ = ["GRADED_ERRORS", "Agent", "Sandbox", "SandboxConfig", "SandboxParams", "Trial", "TrialResult",
           "run_trial", "run_trials"]
