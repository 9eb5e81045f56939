"""The RASO algorithm steps: agent roles, Cross-Harness Adaptation, RASI/RFSI and RASU/RFSU (docs/design.md §1).

The initializers RASI / RFSI (raso.optimizer.rasi) write s0 with zero rollouts; the proposers RASU / RFSU
(raso.optimizer.rasu) propose s_{t+1} from the rollouts of s_t. Each is built from its options
(raso.optimizer.options) and called with the run's context (raso.optimizer.context.RunContext). The engine
(raso.engine) runs the loop and the validation gate.
"""

from .render import PromptLimits
from .types import Gradient, InitResult, Lesson, Requirement, RetrievedSection, SectionRef, UpdateProposal

__all__ = ["Gradient", "InitResult", "Lesson", "PromptLimits", "Requirement", "RetrievedSection", "SectionRef",
           "UpdateProposal"]
