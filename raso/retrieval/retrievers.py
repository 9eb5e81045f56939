"""Retrievers: the one place RASI/RASU ask for corpus sections.

Every retriever satisfies `SectionSearcher` (a `search(query, k, exclude_repos, exclude_skills)`
method returning `corpus_tools.index.Hit`s), so the algorithm switches methods by a config string:

* ``"bm25"``  — the section-level BM25 index itself (the paper's default).
* ``"field"`` — field-aware skill retrieval (name / description / body, sparse + dense fused),
  whose top skills are then searched section-wise with BM25.
* ``"dreamer"`` — SkillDreamer prospective retrieval (capabilities + pseudo-skills through the
  gateway), again narrowing the section search to the skills it finds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from corpus_tools.index import Hit, SectionIndex
    from corpus_tools.retrieval.dense import CallableEncoder, Encoder
    from corpus_tools.retrieval.fusion import FieldAwareRetriever

log = logging.getLogger(__name__)

RETRIEVER_KINDS: tuple[str, ...] = ("bm25", "field", "dreamer")


@runtime_checkable
class SectionSearcher(Protocol):
    """Anything that returns the top-k corpus sections for a query."""

    def search(
        self,
        query: str,
        k: int = 5,
        exclude_repos: Sequence[str] = (),
        exclude_skills: Sequence[str] = (),
    ) -> list[Hit]: ...


def build_retriever(kind: str, *, index: Any, gateway: Any = None, **options: Any) -> SectionSearcher:
    """Return a section searcher of the given kind over `index` (a `corpus_tools.index.SectionIndex`).

    `gateway` is needed by "dreamer" (its model calls); `options` go to the retriever's constructor
    (for "field": `skills=` records, `method=`; for "dreamer": `skills=`, Kc/Kr/K/alpha/beta/gamma).
    """
    kind = (kind or "").strip().lower()
    if kind not in RETRIEVER_KINDS:
        raise ValueError(f"unknown retriever kind {kind!r}; choose one of {', '.join(RETRIEVER_KINDS)}")
    if index is None:
        raise ValueError("build_retriever needs a section index (corpus_tools.index.SectionIndex)")
    if kind == "bm25":
        if options:
            raise ValueError(f"the bm25 retriever takes no options, got {sorted(options)}")
        return index
    if kind == "field":
        return FieldSectionRetriever.from_index(index, **options)
    # kind == "dreamer"
    if gateway is None:
        raise ValueError("the dreamer retriever calls the model: pass gateway=LLMGateway(...)")
    return DreamerSectionRetriever.from_index(index, gateway=gateway, **options)




# --------------------------------------------------------------------------------------------------
# Skill pools and encoders


def skills_from_index(index: SectionIndex) -> list[Any]:
    """Rebuild whole skills (name, description, body) from the sections of a SectionIndex, for when
    the original records are not at hand. Only sections of each skill's own SKILL.md count (reference
    files are left out); the first section stands in for the description."""
    from corpus_tools.retrieval.dataset import PoolSkill

    names: dict[str, str] = {}
    repos: dict[str, str] = {}
    texts: dict[str, list[str]] = {}
    skill_paths: dict[str, str] = {}
    for section in index.iter_sections():
        sid = section.skill_id
        names.setdefault(sid, section.skill_name)
        repos.setdefault(sid, section.repo)
        skill_paths.setdefault(sid, section.path)  # a skill's first section comes from its SKILL.md
        if section.path == skill_paths[sid]:
            texts.setdefault(sid, []).append(f"{section.heading_path}\n{section.text}")
    pool = []
    for sid in index.skills:
        parts = texts.get(sid, [])
        first = parts[0].split("\n", 1)[-1] if parts else ""
        pool.append(PoolSkill(id=sid, name=names.get(sid, sid), description=first[:400],
                              body="\n\n".join(parts), repo=repos.get(sid, "")))
    return pool


def default_encoder(cache_progress: bool = False) -> Encoder | None:
    """The int8 ONNX MiniLM when the `dense` extra is installed, else None."""
    try:
        from corpus_tools.retrieval.dense import OnnxMiniLMEncoder

        return OnnxMiniLMEncoder(progress=cache_progress)
    except (RuntimeError, FileNotFoundError) as exc:
        log.info("dense encoder unavailable (%s)", exc)
        return None


def litellm_encoder(model: str, *, api_base: str | None = None, batch_size: int = 64) -> CallableEncoder:
    """Any litellm embedding model (e.g. "openai/text-embedding-3-small") as a corpus_tools encoder."""
    from corpus_tools.retrieval.dense import CallableEncoder
    from raso.llm._litellm import litellm

    def embed(texts: list[str]) -> list[list[float]]:
        response = litellm.embedding(model=model, input=texts, api_base=api_base)
        return [item["embedding"] for item in response["data"]]

    return CallableEncoder(embed, f"litellm:{model}", batch_size=batch_size)


def embedding_cache_dir() -> Path:
    base = os.environ.get("RASO_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "raso") / "embeddings"


# --------------------------------------------------------------------------------------------------
# Skill-level rankings narrowed to sections


class _SkillNarrowedSearch:
    """Ranks whole skills first (subclasses say how), then returns the best BM25 sections of those
    skills. A section's score is its BM25 score scaled to [0, 1] over the allowed sections plus its
    skill's score scaled to [0, 1] over the chosen skills: a good section of a good skill wins, and a
    chosen skill whose sections miss every query term can still contribute its best-ranked section."""

    def __init__(self, index: SectionIndex) -> None:
        self.index = index
        self._skill_pos = {sid: i for i, sid in enumerate(index.skills)}

    def rank_skills(self, query: str, exclude_skills: set[str]) -> list[tuple[str, float]]:
        raise NotImplementedError

    def search(self, query: str, k: int = 5, exclude_repos: Sequence[str] = (),
               exclude_skills: Sequence[str] = ()) -> list[Hit]:
        from corpus_tools.index import Hit

        excluded = set(exclude_skills)
        banned_repos = set(exclude_repos)
        ranked = [(sid, score) for sid, score in self.rank_skills(query, excluded)
                  if sid in self._skill_pos and sid not in excluded]
        if banned_repos:
            repo_of = self._skill_repos()
            ranked = [(sid, s) for sid, s in ranked if repo_of.get(sid) not in banned_repos]
        if not ranked:
            return []
        skill_scores = np.array([s for _, s in ranked], dtype=np.float64)
        span = skill_scores.max() - skill_scores.min()
        skill_norm = (skill_scores - skill_scores.min()) / span if span > 0 else np.ones_like(skill_scores)
        prior = {self._skill_pos[sid]: float(v) for (sid, _), v in zip(ranked, skill_norm)}
        doc_skill = np.asarray(self.index.doc_skill)
        allowed = np.flatnonzero(np.isin(doc_skill, list(prior)))
        bm25 = np.asarray(self.index.scores(query))[allowed]
        top = bm25.max() if len(bm25) else 0.0
        bm25_norm = bm25 / top if top > 0 else np.zeros_like(bm25)
        combined = bm25_norm + np.array([prior[int(doc_skill[d])] for d in allowed])
        order = np.lexsort((allowed, -combined))[:k]
        return [Hit(self.index.section(int(allowed[i])), float(combined[i])) for i in order]

    def _skill_repos(self) -> dict[str, str]:
        if not hasattr(self, "_repos"):
            doc_skill = np.asarray(self.index.doc_skill)
            first_doc = {}
            for doc, pos in enumerate(doc_skill.tolist()):
                first_doc.setdefault(pos, doc)
            skills = self.index.skills
            self._repos = {skills[pos]: self.index.section(doc).repo for pos, doc in first_doc.items()}
        return self._repos


class FieldSectionRetriever(_SkillNarrowedSearch):
    """Field-aware skill retrieval (corpus_tools.retrieval.fusion) narrowed to sections.

    `method`: any of fusion.METHODS; default "hybrid-fields" (six per-field scores, uniform) when the
    dense encoder is available, else "tfidf-fields". `top_skills`: how many skills to draw from."""

    def __init__(self, index: SectionIndex, retriever: FieldAwareRetriever, *, method: str,
                 top_skills: int = 10) -> None:
        super().__init__(index)
        self.retriever = retriever
        self.method = method
        self.top_skills = top_skills

    @classmethod
    def from_index(cls, index: SectionIndex, *, skills: Sequence[Any] | None = None, method: str | None = None,
                   encoder: Encoder | None = None, cache_dir: str | Path | None = None,
                   top_skills: int = 10, mlp_path: str | Path | None = None) -> "FieldSectionRetriever":
        from corpus_tools.retrieval.dense import EmbeddingCache
        from corpus_tools.retrieval.fusion import METHODS, FieldAwareRetriever, FusionMLP, needs_dense

        if method is not None and method not in METHODS:
            raise ValueError(f"unknown field retrieval method {method!r}; choose one of {', '.join(METHODS)}")
        wants_dense = method is None or needs_dense(method)
        if wants_dense and encoder is None:
            encoder = default_encoder()
        if method is None:
            method = "hybrid-fields" if encoder is not None else "tfidf-fields"
            if encoder is None:
                log.warning("field retriever: no dense encoder (install the `dense` extra); using tfidf-fields")
        elif needs_dense(method) and encoder is None:
            raise RuntimeError(f"method {method!r} needs a dense encoder: install the `dense` extra")
        pool = list(skills) if skills is not None else skills_from_index(index)
        cache = EmbeddingCache(cache_dir or embedding_cache_dir()) if encoder is not None else None
        retriever = FieldAwareRetriever(pool, encoder=encoder, cache=cache)
        if METHODS[method][1] == "mlp":
            if mlp_path is None:
                raise ValueError(f"method {method!r} needs mlp_path= (a fusion model trained by `raso retrieval eval`)")
            retriever.mlps[method] = FusionMLP.load(mlp_path)
        return cls(index, retriever, method=method, top_skills=top_skills)

    def rank_skills(self, query: str, exclude_skills: set[str]) -> list[tuple[str, float]]:
        scores = self.retriever.scores(self.method, [query])[0]
        order = np.argsort(-scores, kind="stable")
        out = []
        for i in order:
            sid = self.retriever.ids[int(i)]
            if sid not in exclude_skills:
                out.append((sid, float(scores[int(i)])))
                if len(out) == self.top_skills:
                    break
        return out


class DreamerSectionRetriever(_SkillNarrowedSearch):
    """SkillDreamer (raso.retrieval.dreamer) narrowed to sections: the K skills it returns for a query, then
    their best sections. Each search makes 1 + (number of capabilities) optimizer calls."""

    def __init__(self, index: SectionIndex, dreamer: Any) -> None:
        super().__init__(index)
        self.dreamer = dreamer
        self.last_result: Any = None

    @classmethod
    def from_index(cls, index: SectionIndex, *, gateway: Any, skills: Sequence[Any] | None = None,
                   encoder: Encoder | None = None, cache_dir: str | Path | None = None,
                   use_dense: bool = True, **config: Any) -> "DreamerSectionRetriever":
        from corpus_tools.retrieval.dense import EmbeddingCache
        from corpus_tools.retrieval.fusion import FieldAwareRetriever
        from raso.retrieval.dreamer import DreamerConfig, FieldAwareScorer, SkillDreamer

        if use_dense and encoder is None:
            encoder = default_encoder()
        pool = list(skills) if skills is not None else skills_from_index(index)
        cache = EmbeddingCache(cache_dir or embedding_cache_dir()) if encoder is not None else None
        scorer = FieldAwareScorer(FieldAwareRetriever(pool, encoder=encoder, cache=cache))
        return cls(index, SkillDreamer(gateway, scorer, DreamerConfig(**config)))

    def rank_skills(self, query: str, exclude_skills: set[str]) -> list[tuple[str, float]]:
        result = self.dreamer.retrieve(query, exclude=sorted(exclude_skills))
        self.last_result = result
        # round-robin order is the ranking: scores fall with the merged position
        n = len(result.ranked)
        return [(sid, float(n - i)) for i, sid in enumerate(result.ranked)]
