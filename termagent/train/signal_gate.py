"""No optimizer step without outcome signal (issue 41, item 4), for the GRPO and MT-GRPO trainers.

A generation batch in which every group ties (all pass or all fail: every advantage TRL computed from the reward
is 0) teaches nothing about solving, yet an optimizer step on it still moves a LoRA adapter: Adam's first moment
keeps pushing along the previous steps' direction, and MT-GRPO's turn credit (format, exit codes) adds gradients
that say nothing about the outcome. The gate:
- `observe(advantages)` after each generation batch is scored: does any row carry a non-zero outcome advantage
  (over every process)?
- `skip_loss()`: the micro-batches of a batch without signal are not forwarded (with beta = 0 their loss and
  gradient are exactly 0; with a KL term they still train unless the whole step is skipped);
- `GateCallback.on_pre_optimizer_step`: when no generation batch of the optimizer step had signal, every gradient
  is dropped (set to None), so torch's optimizers leave each parameter and its moments untouched: the adapter is
  bit-identical after the step. The step still counts against max_steps and is counted in `skipped`.
"""

from __future__ import annotations


class SignalGate:
    def __init__(self, enabled: bool, beta: float = 0.0):
        self.enabled = enabled
        self.beta = beta
        self.batch_signal = True  # the current generation batch
        self.step_signal = False  # any generation batch of the current optimizer step
        self.skipped = 0  # optimizer steps skipped so far
        self.last_skipped = False  # the last finished optimizer step was skipped

    def observe(self, accelerator, advantages) -> bool:
        """Record whether a scored generation batch (this process's rows of TRL's advantages) has signal."""
        import torch

        local = torch.tensor([float(torch.count_nonzero(advantages).item() > 0)], device=advantages.device)
        signal = bool(accelerator.gather(local).sum().item() > 0)
        self.batch_signal = signal
        self.step_signal = self.step_signal or signal
        return signal

    def skip_loss(self) -> bool:
        return self.enabled and not self.batch_signal and self.beta == 0.0

    def skip_step(self) -> bool:
        return self.enabled and not self.step_signal

    def end_step(self) -> None:
        self.step_signal = False


def zero_loss(model):
    """A loss of 0 that backward accepts and that leaves every parameter's gradient untouched."""
    import torch

    device = next(model.parameters()).device
    return torch.zeros((), device=device, requires_grad=True)


def make_gate_callback(gate: SignalGate):
    from transformers import TrainerCallback

    class GateCallback(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            gate.last_skipped = gate.skip_step()
            if gate.last_skipped:
                model.zero_grad(set_to_none=True)  # torch optimizers skip parameters without a gradient
                gate.skipped += 1

        def on_step_end(self, args, state, control, **kwargs):
            gate.end_step()

    return GateCallback()
