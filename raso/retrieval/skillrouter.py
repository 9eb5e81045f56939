"""SkillRouter-style baseline: retrieve the single best whole skill and hand it to the agent as-is.

This is the paper's SkillRouter row: no adaptation, no requirement decomposition — the retrieved
corpus skill itself becomes the agent's skill (its provenance is kept in `metadata["source"]`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from raso.skill import Skill, slugify

DEFAULT_METHOD = "bm25"


class SkillRouter:
    """Ranks a pool of whole skills with a field-aware method (corpus_tools.retrieval.fusion.METHODS)
    and returns the best one as a `raso.skill.Skill`.

    `skills`: records with id, name, description, body (and optionally repo, path, commit, license),
    e.g. corpus_tools.ingest.SkillRecord. `retriever`: a prepared FieldAwareRetriever over the same
    pool (built from `skills` when omitted; dense methods then need `encoder`)."""

    def __init__(self, skills: Sequence[Any], *, method: str = DEFAULT_METHOD, retriever: Any = None,
                 encoder: Any = None) -> None:
        from corpus_tools.retrieval.fusion import METHODS, FieldAwareRetriever

        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
        if not skills:
            raise ValueError("SkillRouter needs a non-empty skill pool")
        self.skills = list(skills)
        self.method = method
        self.retriever = retriever or FieldAwareRetriever(self.skills, encoder=encoder)
        self._by_id = {str(s.id): s for s in self.skills}

    def rank(self, query: str, k: int = 5, *, exclude_repos: Sequence[str] = (),
             exclude_skills: Sequence[str] = ()) -> list[tuple[str, float]]:
        scores = np.array(self.retriever.scores(self.method, [query])[0], dtype=np.float64)
        banned_repos, banned = set(exclude_repos), set(exclude_skills)
        out = []
        for i in np.argsort(-scores, kind="stable"):
            sid = self.retriever.ids[int(i)]
            record = self._by_id.get(sid)
            if record is None or sid in banned or getattr(record, "repo", None) in banned_repos:
                continue
            out.append((sid, float(scores[int(i)])))
            if len(out) == k:
                break
        return out

    def route(self, query: str, *, exclude_repos: Sequence[str] = (), exclude_skills: Sequence[str] = ()) -> Skill:
        """The top skill for `query`, as-is. Raises LookupError when every skill is excluded."""
        ranked = self.rank(query, 1, exclude_repos=exclude_repos, exclude_skills=exclude_skills)
        if not ranked:
            raise LookupError("no skill left to route to after the exclusions")
        sid, score = ranked[0]
        return as_skill(self._by_id[sid], method=self.method, score=score, query=query)


def as_skill(record: Any, *, method: str = "", score: float | None = None, query: str = "") -> Skill:
    """A corpus record as a Skill, with its provenance in metadata["source"]."""
    source = {key: getattr(record, key) for key in ("id", "repo", "path", "commit", "license")
              if getattr(record, key, None)}
    metadata: dict[str, Any] = {"source": source}
    if method:
        metadata["router"] = {"method": method, "score": score, "query": query}
    name = (getattr(record, "name", "") or "").strip() or slugify(str(getattr(record, "id", "skill")))
    description = (getattr(record, "description", "") or "").strip() or f"Skill {name} from the corpus."
    return Skill(name=name, description=description, body=getattr(record, "body", "") or "", metadata=metadata)
