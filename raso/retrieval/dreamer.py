"""SkillDreamer: prospective skill retrieval ("imagine before retrieval").

A task query states an objective; the skills that help are about how to execute it. So before
searching, the optimizer model (role "optimizer") does two things through the gateway:

1. capability inference (stage "dreamer.capabilities"): the capabilities the task needs, including
   unstated ones, plus semantic anchors — terms copied from the query that keep its specifics;
2. prospective skill generation (stage "dreamer.pseudo_skill"): one hypothetical SKILL.md per
   capability, used only as a search proxy, never shown to the agent.

Then for each capability j, every pool skill s gets  h_j(s) = alpha·sim(query, s) + beta·sim(pseudo_j, s);
the top Kc by h_j are kept, the first Kr of those are reranked by h_j + gamma·BM25(anchors, s)
(BM25 min-max scaled over the pool), and the per-capability lists are merged round-robin
(capability 1's first, capability 2's first, ..., then second places), skipping duplicates, up to K.
Defaults from the paper: Kc=20, Kr=20, K=15, alpha=2, beta=1, gamma=1.

`sim` comes from a `SkillScorer`: dense cosine against the whole skill when an encoder is available,
TF-IDF cosine otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel, Field, field_validator

from raso.prompts import DEFAULT_PROMPTS, PromptLibrary

log = logging.getLogger(__name__)


class Capability(BaseModel):
    capability: str = Field(description="one self-contained, searchable sentence naming the operation and its objects")

    @field_validator("capability")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a capability must not be empty")
        return value.strip()


class CapabilityInference(BaseModel):
    capabilities: list[Capability] = Field(min_length=1)
    anchors: list[str] = Field(default_factory=list, description="short terms copied from the task")


class PseudoSkill(BaseModel):
    name: str
    description: str
    body: str

    def to_markdown(self) -> str:
        return f"---\nname: {self.name}\ndescription: {self.description}\n---\n{self.body}"


class DreamerConfig(BaseModel):
    kc: int = Field(20, ge=1, description="candidates kept per capability by the hybrid score")
    kr: int = Field(20, ge=0, description="candidates reranked by BM25 against the anchors")
    k: int = Field(15, ge=1, description="skills returned after the round-robin merge")
    alpha: float = 2.0
    beta: float = 1.0
    gamma: float = 1.0
    max_capabilities: int = Field(4, ge=1, le=10)
    role: str = "optimizer"
    max_tokens: int = Field(640, ge=16, description="reply cap per call; a pseudo-skill asks for under 250 words")


class SkillScorer(Protocol):
    """Scores texts against every skill of a pool (columns follow `ids`)."""

    ids: list[str]

    def similarity(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), len(ids)) semantic similarity."""

    def lexical(self, text: str) -> np.ndarray:
        """(len(ids),) BM25 of `text` against each skill, min-max scaled to [0, 1]."""


class FieldAwareScorer:
    """A SkillScorer over a `corpus_tools.retrieval.fusion.FieldAwareRetriever`: dense cosine against
    the concatenated skill when the retriever has an encoder, else TF-IDF cosine."""

    def __init__(self, retriever: Any) -> None:
        self.retriever = retriever
        self.ids = list(retriever.ids)
        self.semantic_feature = "dense:concat" if retriever.encoder is not None else "tfidf:concat"

    def similarity(self, texts: Sequence[str]) -> np.ndarray:
        return self.retriever.feature(self.semantic_feature, list(texts))

    def lexical(self, text: str) -> np.ndarray:
        from corpus_tools.retrieval.fusion import minmax_rows

        return minmax_rows(self.retriever.feature("bm25:concat", [text]))[0]


@dataclass
class DreamResult:
    query: str
    ranked: list[str]
    scores: list[float]
    capabilities: list[str] = field(default_factory=list)
    anchors: list[str] = field(default_factory=list)
    pseudo_skills: list[PseudoSkill] = field(default_factory=list)
    per_capability: list[list[str]] = field(default_factory=list)
    error: str | None = None  # set when the model calls failed and the plain query ranking was used
    dropped_capabilities: list[str] = field(default_factory=list)  # capabilities whose pseudo-skill was unusable

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "ranked": self.ranked, "scores": self.scores,
                "capabilities": self.capabilities, "anchors": self.anchors,
                "pseudo_skills": [p.model_dump() for p in self.pseudo_skills],
                "per_capability": self.per_capability, "error": self.error,
                "dropped_capabilities": self.dropped_capabilities}


def round_robin(lists: Sequence[Sequence[str]], k: int) -> list[str]:
    """First items of every list in order, then second items, ...; duplicates skipped; at most k."""
    merged: list[str] = []
    seen: set[str] = set()
    depth = max((len(x) for x in lists), default=0)
    for position in range(depth):
        for items in lists:
            if position < len(items) and items[position] not in seen:
                seen.add(items[position])
                merged.append(items[position])
                if len(merged) == k:
                    return merged
    return merged


class SkillDreamer:
    """Prospective retrieval over a skill pool (see the module doc). `prompts` is the template library of its
    two calls (None = the package defaults)."""

    def __init__(self, gateway: Any, scorer: SkillScorer, config: DreamerConfig | None = None, *,
                 prompts: PromptLibrary | None = None) -> None:
        self.gateway = gateway
        self.scorer = scorer
        self.config = config or DreamerConfig()
        self.prompts = prompts or DEFAULT_PROMPTS

    # ---- model calls
    def infer_capabilities(self, query: str) -> CapabilityInference:
        prompt = self.prompts.render("dreamer_capabilities.md", query=query,
                                     max_capabilities=self.config.max_capabilities)
        result = self.gateway.structured(self.config.role, [{"role": "user", "content": prompt}],
                                         CapabilityInference, stage="dreamer.capabilities",
                                         max_tokens=self.config.max_tokens, prompts=self.prompts)
        result.capabilities = result.capabilities[: self.config.max_capabilities]
        return result

    def imagine_skill(self, query: str, capability: str) -> PseudoSkill:
        prompt = self.prompts.render("dreamer_pseudo_skill.md", query=query, capability=capability)
        return self.gateway.structured(self.config.role, [{"role": "user", "content": prompt}], PseudoSkill,
                                       stage="dreamer.pseudo_skill", max_tokens=self.config.max_tokens,
                                       prompts=self.prompts)

    # ---- retrieval
    def retrieve(self, query: str, *, exclude: Sequence[str] = (), k: int | None = None) -> DreamResult:
        """Rank pool skills for `query`; ids in `exclude` are never returned."""
        from raso.llm import LLMError

        cfg = self.config
        k = k or cfg.k
        mask = np.ones(len(self.scorer.ids), dtype=bool)
        if exclude:
            banned = set(exclude)
            mask &= np.array([sid not in banned for sid in self.scorer.ids])
        dropped: list[str] = []
        try:
            inference = self.infer_capabilities(query)
            kept, pseudo = [], []
            for capability in inference.capabilities:
                try:  # one unusable pseudo-skill costs its capability, not the whole prospective ranking
                    pseudo.append(self.imagine_skill(query, capability.capability))
                    kept.append(capability)
                except LLMError as exc:
                    dropped.append(f"{capability.capability[:80]!r}: {exc}")
            if not pseudo:
                raise LLMError("no capability got a usable pseudo-skill: " + "; ".join(dropped))
            inference.capabilities = kept
        except LLMError as exc:  # StructuredOutputError is an LLMError
            log.warning("SkillDreamer: model call failed (%s); ranking by the query alone", exc)
            scores = np.where(mask, self.scorer.similarity([query])[0], -np.inf)
            top = _top(scores, k)
            return DreamResult(query, [self.scorer.ids[i] for i in top], [float(scores[i]) for i in top],
                               error=f"{type(exc).__name__}: {exc}")
        sims = self.scorer.similarity([query] + [p.to_markdown() for p in pseudo])
        anchor_scores = self.scorer.lexical(" ".join(inference.anchors)) if inference.anchors and cfg.gamma else None
        per_capability: list[list[str]] = []
        best: dict[str, float] = {}
        for j in range(len(pseudo)):
            hybrid = cfg.alpha * sims[0] + cfg.beta * sims[j + 1]
            hybrid = np.where(mask, hybrid, -np.inf)
            candidates = _top(hybrid, cfg.kc)
            head, tail = candidates[: cfg.kr], candidates[cfg.kr:]
            reranked = hybrid[head] + (cfg.gamma * anchor_scores[head] if anchor_scores is not None else 0.0)
            head = head[np.argsort(-reranked, kind="stable")]
            final = [self.scorer.ids[i] for i in (*head, *tail)]
            per_capability.append(final)
            for i in head:
                sid = self.scorer.ids[i]
                value = float(hybrid[i] + (cfg.gamma * anchor_scores[i] if anchor_scores is not None else 0.0))
                best[sid] = max(best.get(sid, -np.inf), value)
            for i in tail:
                best.setdefault(self.scorer.ids[i], float(hybrid[i]))
        ranked = round_robin(per_capability, k)
        return DreamResult(query, ranked, [best[s] for s in ranked],
                           capabilities=[c.capability for c in inference.capabilities],
                           anchors=list(inference.anchors), pseudo_skills=pseudo, per_capability=per_capability,
                           dropped_capabilities=dropped)


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    finite = int(np.isfinite(scores).sum())
    k = min(k, finite)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part], kind="stable")]
