"""Retrievers: the one place RASI/RASU ask for corpus sections.

Every retriever satisfies `SectionSearcher` (a `search(query, k, exclude_repos, exclude_skills)`
method returning `corpus_tools.index.Hit`s whose sections keep their provenance), and is chosen and
configured by one `RetrievalOptions` (the `retrieval:` block of a run config). Every kind is vetted
unless `vet: false` (raso.retrieval.vetting: flagged and near-duplicate sections are left out and
reported):

* ``"two_stage"`` (the default) -- skills first, then sections: the index's skill-level BM25 (or
  TF-IDF) ranks whole skills, then the section BM25 picks the best sections of the `top_skills` best,
  at most `per_skill` per skill (corpus_tools.skill_index). With `skill_dense_weight` > 0 the
  lexical stage proposes `skill_candidates` skills and their ranking mixes in the dense cosine of
  each skill's name + description to the query (off by default: docs/retrieval-at-scale.md 5.6).
* ``"bm25"``   -- the section-level BM25 index itself (the paper's default, the default before issue 26).
  With `popularity_weight` > 0 (two_stage too, at the skill stage) the scores are multiplied by a
  prior that grows with the number of repositories carrying the content (off by default).
* ``"tfidf"``  -- whole skills ranked by TF-IDF cosine (sublinear tf), then their best BM25 sections.
* ``"hybrid"`` -- sparse + dense over sections: the BM25 top `candidates` sections, re-scored by the
  mean of their min-max-scaled BM25 score and dense cosine to the query (`dense_weight` shifts it).
* ``"field"``  -- field-aware skill retrieval (name / description / body; uniform or MLP fusion),
  then the section search narrowed to the skills it finds.
* ``"dreamer"`` -- SkillDreamer prospective retrieval (capabilities + pseudo-skills through the
  gateway; Kc/Kr/K, alpha/beta/gamma in `dreamer`), narrowed to sections the same way.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from raso.choices import RetrievalKind, choices_of
from raso.retrieval.dreamer import DreamerConfig

if TYPE_CHECKING:
    from corpus_tools.index import Hit, SectionIndex
    from corpus_tools.retrieval.dense import CallableEncoder, Encoder
    from corpus_tools.retrieval.fusion import FieldAwareRetriever

log = logging.getLogger(__name__)

RETRIEVER_KINDS: tuple[str, ...] = choices_of(RetrievalKind)


# Chosen on the dev split of both benchmarks (benchmarks/bench_retrieval_bm25_params.py --two-stage,
# docs/retrieval-at-scale.md section 5).
TOP_SKILLS = 10
TWO_STAGE_TOP_SKILLS = 20
TWO_STAGE_SKILL_WEIGHT = 0.5


class RetrievalOptions(BaseModel):
    """Which retriever RASI/RASU use and its options (only the chosen kind's options are read)."""

    model_config = ConfigDict(extra="forbid")

    kind: RetrievalKind = Field("two_stage", description="two_stage (default) | bm25 | tfidf | hybrid | field | "
                                "dreamer")
    k: int = Field(5, ge=1, description="sections retrieved per query")
    top_skills: int | None = Field(None, ge=1, description="two_stage, tfidf, field: skills whose sections are "
                                   f"searched (None: {TWO_STAGE_TOP_SKILLS} for two_stage, {TOP_SKILLS} for the others)")
    per_skill: int = Field(2, ge=1, description="two_stage: at most this many sections of one skill in a top K")
    skill_weight: float = Field(TWO_STAGE_SKILL_WEIGHT, ge=0.0, description="two_stage: weight of the skill's "
                                "min-max scaled score against the section's BM25 share of the best section's")
    skill_scoring: Literal["bm25", "tfidf", "fused"] = Field(
        "fused", description="two_stage: how the skill-level index ranks skills: fused (the default: the mean of "
        "BM25 and TF-IDF, each min-max scaled over its best 100 skills; best or tied on every query set of "
        "docs/retrieval-at-scale.md 5.7), bm25, or tfidf (cosine, sublinear tf)")
    skill_dense_weight: float = Field(
        0.0, ge=0.0, le=1.0, description="two_stage: weight of the dense cosine (query vs. the skill's name + "
        "description, by `encoder`) in the skill ranking, 1 - weight going to the lexical score, both min-max "
        "scaled over the `skill_candidates`; 0 = off (lexical only, the default). Above 0 a missing encoder is "
        "an error, never a silent fallback to lexical")
    skill_candidates: int = Field(
        50, ge=1, description="two_stage with skill_dense_weight or popularity_weight > 0: skills the lexical "
        "stage proposes for the re-ranking (at least top_skills); the re-ranked best top_skills go on to the "
        "section stage")
    popularity_weight: float = Field(
        0.0, ge=0.0, description="two_stage and bm25: weight w of the popularity prior: each candidate skill's "
        "(two_stage, at the skill stage) or section's (bm25, over the BM25 top `candidates`) score is multiplied "
        "by 1 + w x ln(1 + repositories carrying its content), from the index's `repos` column "
        "(docs/corpus-sources.md); 0 = off (the default). An index without the column, or whose counts are all "
        "0, ranks exactly as with 0")
    vet: bool = Field(True, description="leave out sections the injection / exfiltration scan flags and "
                      "near-duplicates of a section already retrieved; every drop is reported")
    fusion: Literal["uniform", "mlp"] = Field(
        "uniform", description="field: mean of the six min-max-scaled field scores, or a trained MLP over them")
    mlp_path: Path | None = Field(None, description="field + mlp: a fusion model saved by `raso retrieval eval`")
    field_method: str | None = Field(
        None, description="field: any corpus_tools.retrieval.fusion method name, overriding `fusion`")
    encoder: str = Field("minilm", description="dense encoder for hybrid/field/dreamer and two_stage's "
                         "skill_dense_weight: minilm (int8 ONNX, the `dense` extra), st:<sentence-transformers "
                         "model>, litellm:<embedding model>, or none (sparse only)")
    candidates: int = Field(50, ge=1, description="hybrid: BM25 sections re-scored with the dense encoder; "
                            "bm25 with popularity_weight > 0: BM25 sections re-ranked by the popularity prior")
    dense_weight: float = Field(0.5, ge=0.0, le=1.0, description="hybrid: weight of the dense cosine "
                                "(1 - weight goes to BM25), both min-max scaled over the candidates")
    dreamer: DreamerConfig = Field(default_factory=DreamerConfig,
                                   description="dreamer: kc, kr, k, alpha, beta, gamma, max_capabilities")
    cache_dir: Path | None = Field(None, description="embedding cache (default: $RASO_CACHE_DIR/embeddings)")

    @model_validator(mode="after")
    def _skill_reranking_is_consistent(self) -> "RetrievalOptions":
        if self.kind != "two_stage" or (self.skill_dense_weight == 0 and self.popularity_weight == 0):
            return self
        if self.skill_dense_weight > 0 and self.encoder.strip().lower() == "none":
            raise ValueError(f"skill_dense_weight {self.skill_dense_weight} needs a dense encoder, but encoder is "
                             "'none': set encoder (e.g. minilm) or skill_dense_weight 0")
        top_skills = self.top_skills or TWO_STAGE_TOP_SKILLS
        if self.skill_candidates < top_skills:
            raise ValueError(f"skill_candidates ({self.skill_candidates}) must be at least top_skills "
                             f"({top_skills}): the fused ranking picks the top skills among the candidates")
        return self


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


def build_retriever(options: RetrievalOptions | str | dict[str, Any] | None = None, *, index: Any,
                    gateway: Any = None, skills: Sequence[Any] | None = None,
                    encoder: Encoder | None = None) -> SectionSearcher:
    """The section searcher `options` describe, over `index` (a `corpus_tools.index.SectionIndex`).

    `options`: a `RetrievalOptions`, a dict of its fields, or just the kind ("bm25"). `gateway` is
    needed by "dreamer" (its model calls). `skills` (records with id, name, description, body) is the
    skill pool for tfidf/field/dreamer; by default it is rebuilt from the index. `encoder` overrides
    `options.encoder` with a ready encoder."""
    if options is None:
        options = RetrievalOptions()
    elif isinstance(options, str):
        kind = options.strip().lower()
        if kind not in RETRIEVER_KINDS:
            raise ValueError(f"unknown retriever kind {options!r}; choose one of {', '.join(RETRIEVER_KINDS)}")
        options = RetrievalOptions(kind=kind)
    elif isinstance(options, dict):
        options = RetrievalOptions.model_validate(options)
    if index is None:
        raise ValueError("build_retriever needs a section index (corpus_tools.index.SectionIndex)")
    searcher = _build(options, index=index, gateway=gateway, skills=skills, encoder=encoder)
    if not options.vet:
        return searcher
    from raso.retrieval.vetting import VettedSearcher

    return VettedSearcher(searcher)


def _build(options: RetrievalOptions, *, index: Any, gateway: Any, skills: Sequence[Any] | None,
           encoder: Encoder | None) -> SectionSearcher:
    kind = options.kind
    if kind == "bm25":
        if options.popularity_weight == 0:
            return index
        if not counts_repositories(index):
            log.info("popularity_weight %s ignored: the index counts no repositories per content (no `repos` "
                     "column, or all 0)", options.popularity_weight)
            return index
        return PopularitySectionRetriever(index, weight=options.popularity_weight, candidates=options.candidates)
    if kind == "two_stage":
        skill_encoder = None
        if options.skill_dense_weight > 0:
            skill_encoder = encoder if encoder is not None else encoder_from_spec(options.encoder)
            if skill_encoder is None:
                raise ValueError(f"two_stage retrieval with skill_dense_weight {options.skill_dense_weight} needs "
                                 f"the dense encoder {options.encoder!r}, which is not available: install the "
                                 "`dense` extra (pip install 'raso[dense]') or set retrieval.skill_dense_weight 0")
        return TwoStageSectionRetriever.from_index(index, top_skills=options.top_skills or TWO_STAGE_TOP_SKILLS,
                                                   per_skill=options.per_skill, scoring=options.skill_scoring,
                                                   skill_weight=options.skill_weight, vet=options.vet,
                                                   encoder=skill_encoder, skill_dense_weight=options.skill_dense_weight,
                                                   skill_candidates=options.skill_candidates,
                                                   popularity_weight=options.popularity_weight)
    if kind == "dreamer" and gateway is None:
        raise ValueError("the dreamer retriever calls the model: pass gateway=LLMGateway(...)")
    sparse_only = options.encoder.strip().lower() == "none"
    if kind == "tfidf":
        return FieldSectionRetriever.from_index(index, skills=skills, method="tfidf",
                                                top_skills=options.top_skills or TOP_SKILLS)
    if encoder is None and not sparse_only and kind in ("hybrid", "field", "dreamer"):
        encoder = encoder_from_spec(options.encoder)
    if kind == "hybrid":
        if encoder is None:
            raise RuntimeError("the hybrid retriever needs a dense encoder: install the `dense` extra "
                               "or set retrieval.encoder")
        return HybridSectionRetriever(index, encoder, candidates=options.candidates,
                                      dense_weight=options.dense_weight)
    if kind == "field":
        method = options.field_method
        if method is None and options.fusion == "mlp":
            method = "mlp"
        elif method is None and sparse_only:
            method = "tfidf-fields"
        return FieldSectionRetriever.from_index(index, skills=skills, method=method, encoder=encoder,
                                                cache_dir=options.cache_dir,
                                                top_skills=options.top_skills or TOP_SKILLS, mlp_path=options.mlp_path)
    return DreamerSectionRetriever.from_index(index, gateway=gateway, skills=skills, encoder=encoder,
                                              cache_dir=options.cache_dir, use_dense=not sparse_only,
                                              **options.dreamer.model_dump())


def encoder_from_spec(spec: str) -> Encoder | None:
    """'minilm' (None when the `dense` extra is missing), 'st:<model>', 'litellm:<model>' or 'none'."""
    spec = spec.strip()
    if spec.lower() == "none":
        return None
    if spec.startswith("litellm:"):
        return litellm_encoder(spec[len("litellm:"):])
    if spec in ("minilm", "onnx"):
        return default_encoder()
    from corpus_tools.retrieval.dense import make_encoder

    return make_encoder(spec)


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
            first_doc: dict[int, int] = {}
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


class _VectorCache:
    """Dense vectors of documents by number, each encoded once per process (`text_of(doc)` is what the encoder
    reads); cleared when it would hold more than `max_cached`."""

    def __init__(self, encoder: Encoder, text_of: Any, max_cached: int) -> None:
        self.encoder, self.text_of, self.max_cached = encoder, text_of, max_cached
        self._vectors: dict[int, np.ndarray] = {}

    def __call__(self, docs: Sequence[int]) -> np.ndarray:
        missing = [d for d in docs if d not in self._vectors]
        if missing:
            if len(self._vectors) + len(missing) > self.max_cached:
                self._vectors.clear()
            texts = [self.text_of(d) for d in missing]
            for d, v in zip(missing, np.asarray(self.encoder.encode(texts), dtype=np.float32)):
                self._vectors[d] = v
        return np.stack([self._vectors[d] for d in docs])


class TwoStageSectionRetriever:
    """Skills first, then their sections (corpus_tools.skill_index.two_stage_top_k) over a section index
    and its skill-level index. With `vet`, sections flagged by the build-time scan are left out at no
    query cost and reported by `take_dropped`.

    With an `encoder` and `skill_dense_weight` > 0 the skill ranking is fused: the lexical stage
    proposes `skill_candidates` skills, each candidate's name + description (the skill index's name
    and description columns; the encoder reads its first 128 word pieces) is embedded once per
    process and kept per skill, and (1 - w) x min-max(lexical) + w x min-max(cosine to the query)
    picks the `top_skills` whose sections stage two ranks, exactly as without it.

    With `popularity_weight` w > 0 and an index that counts repositories per content (its `repos`
    column, not all 0), the candidates' scores (lexical, or fused as above) are multiplied by
    1 + w x ln(1 + repositories) before the `top_skills` are picked; otherwise the weight is ignored."""

    def __init__(self, index: Any, skill_index: Any, *, top_skills: int = TWO_STAGE_TOP_SKILLS, per_skill: int = 2,
                 scoring: str = "bm25", skill_weight: float = TWO_STAGE_SKILL_WEIGHT, vet: bool = True,
                 workdir: Any = None, encoder: Encoder | None = None, skill_dense_weight: float = 0.0,
                 skill_candidates: int = 50, max_cached: int = 200_000, popularity_weight: float = 0.0) -> None:
        if skill_dense_weight > 0 and encoder is None:
            raise ValueError("skill_dense_weight > 0 needs a dense encoder")
        # ln(1 + repositories) of each skill document, or None: no prior (weight 0, or nothing counted).
        self.skill_popularity = skill_popularity(index, skill_index) if popularity_weight > 0 else None
        if popularity_weight > 0 and self.skill_popularity is None:
            log.info("popularity_weight %s ignored: the index counts no repositories per content (no `repos` "
                     "column, or all 0)", popularity_weight)
        self.popularity_weight = popularity_weight if self.skill_popularity is not None else 0.0
        self.encoder = encoder
        self.skill_dense_weight = skill_dense_weight
        self.skill_candidates = max(skill_candidates, top_skills)
        self.index = index
        self.skill_weight = skill_weight
        self.skill_index = skill_index
        self.top_skills = top_skills
        self._vectors_of = None if encoder is None else _VectorCache(
            encoder, lambda d: skill_dense_text(skill_index.skill(d)), max_cached)
        self.per_skill = per_skill
        self.scoring = scoring
        self.vet = vet
        self._workdir = workdir  # keeps a skill level built for an old index alive with this retriever
        self._dropped: list[Any] = []
        # Vetting (raso.retrieval.vetting) need not scan again what the build-time flags already vetted.
        self.skips_flagged_sections = vet and _has_flags(index)

    @classmethod
    def from_index(cls, index: Any, **options: Any) -> "TwoStageSectionRetriever":
        """Use the skill level saved with `index`; an index built before it existed gets one built now
        from its sections, in a temporary folder (a rebuild with `raso corpus build` saves that time)."""
        import tempfile

        from corpus_tools.skill_index import SkillIndex, skill_index_dir, write_skill_index

        directory = getattr(index, "directory", None)
        found = skill_index_dir(directory) if directory is not None else None
        workdir = None
        if found is not None:
            skill_index = SkillIndex.load(found)
        else:
            log.warning("the index %s has no skill level (built before it existed): building it from its %d "
                        "sections; rebuild the index with `raso corpus build` to skip this",
                        directory or "(in memory)", len(index))
            workdir = tempfile.TemporaryDirectory(prefix="raso-skills-")
            sections = (index.section(doc) for doc in range(len(index)))
            skill_index = SkillIndex.load(write_skill_index(sections, Path(workdir.name) / "skills"))
        ends = skill_index.section_start + skill_index.section_count
        if len(ends) and int(ends.max()) > len(index):
            raise ValueError(f"the skill level at {found} does not match its section index "
                             f"({int(ends.max())} > {len(index)} sections): rebuild the index")
        return cls(index, skill_index, workdir=workdir, **options)

    def search(self, query: str, k: int = 5, exclude_repos: Sequence[str] = (),
               exclude_skills: Sequence[str] = ()) -> list[Hit]:
        from corpus_tools.index import Hit
        from corpus_tools.skill_index import sections_of_skills, two_stage_top_k
        from corpus_tools.vetting import families_of

        if (self.skill_dense_weight > 0 or self.popularity_weight > 0) and k > 0:
            skill_docs, skill_scores = self.rank_skills(query, exclude_repos, exclude_skills)
            docs, scores, flagged = sections_of_skills(
                self.index, self.skill_index, query, skill_docs, skill_scores, k, per_skill=self.per_skill,
                skip_flagged=self.vet, skill_weight=self.skill_weight)
        else:
            docs, scores, flagged = two_stage_top_k(
                self.index, self.skill_index, query, k, top_skills=self.top_skills, per_skill=self.per_skill,
                exclude_repos=exclude_repos, exclude_skills=exclude_skills, scoring=self.scoring,
                skill_weight=self.skill_weight, skip_flagged=self.vet)
        if len(flagged):
            from corpus_tools.skill_index import doc_flags
            from raso.retrieval.vetting import drop_of

            bits = doc_flags(self.index, flagged)
            if bits is not None:  # always: sections are flagged from the flags the index stores
                self._dropped.extend(drop_of(self.index.section(int(d)), "flagged at build time: "
                                             + ", ".join(families_of(int(b))), query) for d, b in zip(flagged, bits))
        return [Hit(self.index.section(int(d)), float(s)) for d, s in zip(docs, scores)]

    def take_dropped(self) -> list[Any]:
        dropped, self._dropped = self._dropped, []
        return dropped

    def rank_skills(self, query: str, exclude_repos: Sequence[str] = (),
                    exclude_skills: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray]:
        """(skill documents, scores) of the `top_skills` best skills for `query`, best first: the lexical top
        `skill_candidates` re-ranked by the weighted sum of the min-max scaled lexical score and dense cosine
        (with `skill_dense_weight` > 0), times the popularity prior (with `popularity_weight` > 0); ties keep
        the lexical order."""
        skill_docs, lexical = self.skill_index.top(query, self.skill_candidates, exclude_repos, exclude_skills,
                                                   self.scoring)
        scores = np.asarray(lexical, dtype=np.float64)
        if len(skill_docs) == 0:
            return skill_docs, scores
        skill_docs = np.asarray(skill_docs)
        if self.skill_dense_weight > 0:
            assert self.encoder is not None
            query_vector = np.asarray(self.encoder.encode([query]), dtype=np.float32)[0]
            assert self._vectors_of is not None  # a weight > 0 needs an encoder (checked in __init__)
            cosine = self._vectors_of([int(d) for d in skill_docs]) @ query_vector
            w = self.skill_dense_weight
            scores = (1.0 - w) * _minmax(scores) + w * _minmax(cosine.astype(np.float64))
        if self.skill_popularity is not None and self.popularity_weight > 0:
            # A multiplicative prior on a log scale: it reorders skills that match about equally but cannot lift
            # a skill that does not match (score 0), and a content in 10,000 repositories is not 10,000 times
            # as likely as one in 1 to be the right skill (repository counts are heavy-tailed).
            scores = scores * (1.0 + self.popularity_weight * self.skill_popularity[skill_docs])
        order = np.lexsort((np.arange(len(scores)), -scores))[:self.top_skills]
        return skill_docs[order], scores[order]



def skill_dense_text(skill: Any) -> str:
    """What the dense encoder reads of a skill-level document: its name and description column (the skill
    file's first section: the front-matter description and any text before the first heading)."""
    return f"{skill.heading_path}\n{skill.text}"


def skill_popularity(index: Any, skill_index: Any) -> np.ndarray | None:
    """ln(1 + repositories carrying the content) of each skill document of `skill_index`, read from the `repos`
    column of its first section in `index`; None when the index has no such column or every count is 0."""
    from corpus_tools.build import POPULARITY_COLUMN
    from corpus_tools.skill_index import doc_column

    repos = doc_column(index, POPULARITY_COLUMN, np.asarray(skill_index.section_start, dtype=np.int64))
    if repos is None or not repos.any():
        return None
    return np.log1p(np.maximum(repos.astype(np.float64), 0.0))


def counts_repositories(index: Any) -> bool:
    """Whether every shard of a section index has the `repos` column and some count is above 0."""
    from corpus_tools.build import POPULARITY_COLUMN

    shards = getattr(index, "shards", None) or [index]
    columns = [getattr(shard, "doc_columns", {}).get(POPULARITY_COLUMN) for shard in shards]
    return all(c is not None for c in columns) and any(np.asarray(c).any() for c in columns)


class PopularitySectionRetriever:
    """Section BM25 with the popularity prior: the BM25 top `candidates` sections (filters applied there),
    each score multiplied by 1 + weight x ln(1 + repositories carrying the section's skill content), best k."""

    def __init__(self, index: Any, *, weight: float, candidates: int = 50) -> None:
        self.index = index
        self.weight = weight
        self.candidates = candidates

    def search(self, query: str, k: int = 5, exclude_repos: Sequence[str] = (),
               exclude_skills: Sequence[str] = ()) -> list[Hit]:
        from corpus_tools.build import POPULARITY_COLUMN
        from corpus_tools.index import Hit
        from corpus_tools.skill_index import doc_column

        docs, scores = self.index.top_k(query, max(k, self.candidates), exclude_repos, exclude_skills)
        if len(docs) == 0:
            return []
        docs = np.asarray(docs, dtype=np.int64)
        counts = doc_column(self.index, POPULARITY_COLUMN, docs)
        assert counts is not None  # built only over an index that counts repositories
        repos = np.maximum(counts.astype(np.float64), 0.0)
        boosted = np.asarray(scores, dtype=np.float64) * (1.0 + self.weight * np.log1p(repos))
        order = np.lexsort((docs, -boosted))[:k]
        return [Hit(self.index.section(int(docs[i])), float(boosted[i])) for i in order]


def _has_flags(index: Any) -> bool:
    shards = getattr(index, "shards", None) or [index]
    return all("flags" in getattr(shard, "doc_columns", {}) for shard in shards)


class HybridSectionRetriever:
    """Sparse + dense over sections: BM25 proposes the top `candidates` sections (filters applied
    there), the dense encoder re-scores them by cosine to the query, and the two scores, each
    min-max scaled over the candidates, are mixed (`dense_weight` for the cosine). Section vectors
    are kept per section number, so a section is encoded once per process."""

    def __init__(self, index: SectionIndex, encoder: Encoder, *, candidates: int = 50, dense_weight: float = 0.5,
                 max_cached: int = 200_000) -> None:
        self.index = index
        self.encoder = encoder
        self.candidates = candidates
        self.dense_weight = dense_weight
        from corpus_tools.index import index_text

        self._section_vectors = _VectorCache(encoder, lambda d: index_text(index.section(d)), max_cached)

    def search(self, query: str, k: int = 5, exclude_repos: Sequence[str] = (),
               exclude_skills: Sequence[str] = ()) -> list[Hit]:
        from corpus_tools.index import Hit

        docs, sparse = self.index.top_k(query, max(k, self.candidates), exclude_repos, exclude_skills)
        if len(docs) == 0:
            return []
        doc_list = [int(d) for d in docs]
        query_vector = np.asarray(self.encoder.encode([query]), dtype=np.float32)[0]
        dense = self._section_vectors(doc_list) @ query_vector
        fused = (1.0 - self.dense_weight) * _minmax(np.asarray(sparse, np.float64)) + \
            self.dense_weight * _minmax(dense.astype(np.float64))
        order = np.lexsort((docs, -fused))[:k]
        return [Hit(self.index.section(doc_list[i]), float(fused[i])) for i in order]


def _minmax(values: np.ndarray) -> np.ndarray:
    span = values.max() - values.min()
    return (values - values.min()) / span if span > 0 else np.ones_like(values)
