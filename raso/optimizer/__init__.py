"""The RASO algorithm steps: agent roles, Cross-Harness Adaptation, RASI/RFSI and RASU/RFSU (docs/design.md §1).

`initialize_skill` (raso.optimizer.rasi) writes s0 with zero rollouts; `propose_update` (raso.optimizer.rasu)
proposes s_{t+1} from the rollouts of s_t. The engine (raso.engine) runs the loop and the validation gate.
"""

from .render import PromptLimits
from .types import Gradient, InitResult, Lesson, Requirement, RetrievedSection, SectionRef, UpdateProposal

__all__ = ["Gradient", "InitResult", "Lesson", "PromptLimits", "Requirement", "RetrievedSection", "SectionRef",
           "UpdateProposal"]
