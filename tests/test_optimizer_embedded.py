"""RASI and RFSI with the real embedded model (Qwen2.5-Coder-0.5B, offline): a few small calls."""

from __future__ import annotations

import pytest
from optimizer_helpers import SpyRetriever, initialize, section, stages

from raso.llm import DEFAULT_LOCAL_MODEL, GatewayConfig, LLMGateway, RetryConfig, RoleConfig
from raso.optimizer.render import PromptLimits
from raso.skill import Skill

pytestmark = pytest.mark.embedded

LIMITS = PromptLimits(plan_tokens=256, lesson_tokens=160, skill_tokens=640, description_chars=800)


def _gateway() -> LLMGateway:
    # No skip: the README's install includes the `local` extra; without it this fails with the install hint.
    role = RoleConfig(model=DEFAULT_LOCAL_MODEL, temperature=0.0)
    return LLMGateway(GatewayConfig(roles={"optimizer": role}, retry=RetryConfig(max_attempts=1)))


@pytest.mark.parametrize("retrieval", [True, False], ids=["rasi", "rfsi"])
def test_embedded_init_writes_a_skill_md_with_front_matter(tmp_path, retrieval):
    gw = _gateway()
    spy = SpyRetriever([section(1, text="## Empty groups\nWhen a group has no rows, leave its output blank "
                                        "instead of writing 0.")])
    init = initialize(gw, spy if retrieval else None, k=1, num_requirements=2, limits=LIMITS)
    path = init.skill.save(tmp_path / "SKILL.md")
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\nname: ")
    parsed = Skill.load(path)
    assert parsed.name and parsed.description and len(parsed.body.strip()) > 20
    assert 1 <= len(init.requirements) <= 2
    assert stages(gw)[0] == "rasi.query_init" and stages(gw)[-1] == "rasi.skill_init"
    if retrieval:
        assert init.mode == "rasi" and len(spy.calls) == len(init.requirements)
        assert all(lesson.sources[0].section_id == "sec-1" for lesson in init.lessons)
    else:
        assert init.mode == "rfsi" and not spy.calls and "adapt" not in stages(gw)
