"""The embedded model samples reproducibly: the gateway seeds each in-process call from the run's seed and the
call's cache key (raso.llm.gateway.call_seed), so the same request gives the same text even at temperature > 0.
With prefix reuse on (the default) that holds for the same sequence of calls; RASO_LOCAL_PREFIX_REUSE=0 makes it
hold for any order (raso.llm.local.prefix_reuse)."""

from __future__ import annotations

import pytest

from raso.llm import DEFAULT_LOCAL_MODEL, GatewayConfig, LLMGateway, RetryConfig


@pytest.mark.embedded
def test_two_identical_seeded_calls_give_identical_text_at_a_high_temperature(monkeypatch) -> None:
    monkeypatch.setenv("RASO_LOCAL_PREFIX_REUSE", "0")
    gateway = LLMGateway(GatewayConfig.for_models(target=DEFAULT_LOCAL_MODEL, seed=5,
                                                  retry=RetryConfig(max_attempts=1)))
    messages = [{"role": "user", "content": "Name five unusual animals, one per line."}]

    def sample(tag: str) -> str:
        reply = gateway.complete("agent", messages, cache_key_extra=tag, temperature=1.0, max_tokens=32)
        assert not reply.cached and reply.completion_tokens > 5  # sampled, not replayed: this gateway has no cache
        return reply.text

    first, other, again = sample("iter001_val"), sample("iter001_val_r2"), sample("iter001_val")
    assert again == first  # the same request, the same seed: the same text, whatever ran in between
    assert other != first  # another repeat's tag, another seed: another sample
