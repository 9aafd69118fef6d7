"""Generation backends behind one interface: `make_policy(HFSpec(...) | "hf:DIR" | "openvino:IR_DIR" | "openai:URL" | "replay:FILE")`."""

from termagent.policy.base import ContextLengthExceeded, Generation, Policy, PolicyError
from termagent.policy.spec import (
           HFSpec,
           OpenAISpec,
           OpenVINOSpec,
           PolicySpec,
           ReplaySpec,
           make_policy,
           parse_spec,
)

__all__ = ["ContextLengthExceeded", "Generation", "HFSpec", "OpenAISpec", "OpenVINOSpec", "Policy", "PolicyError", "PolicySpec",
           "ReplaySpec", "make_policy", "parse_spec"]
