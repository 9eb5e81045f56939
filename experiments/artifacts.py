"""What cells of one experiment share, built once and kept under <results>/<experiment>/shared/:

* the section index (nested seeded subsamples of it for the corpus-fraction sweep, each with a corpus card);
* the requirement decomposition per (harness, seed): RFSI and RASI use the same pairs, so RFSI differs from RASI
  only in the lessons (the paper's control);
* each initial skill s0 per (harness, seed, initialization, retrieval options): every update method of a row starts
  from the same s0 file.

The decomposition's and s0's folder names carry a key of everything that produces them (`producer_options`: the
models and how they are reached, the prompt templates, the prompt limits, the init options, the task and harness
descriptions; a retrieving s0 adds its retrieval options and its corpus's digest, never the index's path, so an
index rebuilt in place makes a new s0): a changed model, prompt, option or corpus makes a new artifact instead of
reusing another's. The decomposition reads no corpus (the query-init role sees only the task and harness
descriptions), so one decomposition serves every corpus of a (harness, seed).

Each artifact is written atomically with its own ledger of model calls (its cost is reported in the init stage of
every cell that uses it) and reused when present, so an interrupted experiment never pays for it twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from corpus_tools.card import CARD_FILE, STARTER_NAME
from corpus_tools.identity import corpus_identity, corpus_record
from raso.engine.config import OptimizeConfig
from raso.engine.replay import PersistentLedger
from raso.engine.run_dir import atomic_write_json
from raso.harness import Harness
from raso.llm import LLMGateway, UsageLedger
from raso.llm.ledger import priced_usd
from raso.llm.view import UnitGateway
from raso.optimizer.types import Requirement

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """Build an artifact once when cells run in parallel: a lock per path for the threads of one process and an
    exclusive file lock (`<path>.lock`) for processes sharing the results folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _LOCKS_GUARD:
        thread_lock = _LOCKS.setdefault(str(path.resolve()), threading.Lock())
    with thread_lock, open(path.parent / f".{path.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ledgered_gateway(cfg: OptimizeConfig, *, cache_dir: Path | None, ledger_path: Path) -> LLMGateway:
    """raso's gateway for the cell's models with its own call ledger (and a response cache for replay on resume)."""
    from raso.api import make_gateway

    return make_gateway(cfg, cache_dir=cache_dir, ledger=PersistentLedger(ledger_path))


def _summable(totals: dict[str, Any]) -> dict[str, Any]:
    """A ledger's totals with `cost_usd` as the priced part (a number the tables can add up; raso's ledger says
    null once a call is unpriced); `unpriced_calls` travels with it and says what it leaves out."""
    return {**totals, "cost_usd": priced_usd(totals)}


def empty_usage() -> dict[str, Any]:
    return _summable(UsageLedger().totals())


def ledger_totals(path: Path) -> dict[str, Any]:
    """Tokens, cost (priced part) and calls of a ledger.calls.jsonl (zeros when absent)."""
    if not Path(path).exists():
        return empty_usage()
    return _summable(PersistentLedger(Path(path)).totals())


def check_fraction_index(index: str | Path | None) -> Path:
    """The corpus index a corpus-fraction sweep subsamples: a real one, since a fraction of the starter corpus (a
    few hundred skills shipped for demos) is not the paper's experiment. ValueError naming what to pass."""
    if index is None:
        raise ValueError("corpus_fraction < 1 needs a corpus index (--set retrieval.index=DIR, built with `raso "
                         "corpus build ... --blocklist <benchmark>`): a fraction of the starter corpus is not the "
                         "paper's experiment")
    return Path(index)


def nested_skill_order(skills: Iterable[str], seed: int) -> list[str]:
    """The skills ranked by a hash of (seed, skill id): every corpus fraction of a seed takes a prefix of this
    order, so smaller subsamples are nested in larger ones (and a skill's rank never depends on the others)."""
    return sorted(skills, key=lambda skill: hashlib.sha256(f"corpus:{seed}:{skill}".encode()).digest())


def options_key(options: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(options, sort_keys=True, default=str).encode()).hexdigest()[:10]


def producer_options(cfg: OptimizeConfig, harness: Harness) -> dict[str, Any]:
    """What makes a decomposition or an s0 (beyond the harness key and seed in its path): the models and how they
    are reached (prices excluded: they change the cost, not the text), every prompt template's text, the prompt
    limits, the init options and the harness's task and harness descriptions."""
    from raso.api import prompt_library

    library = prompt_library(harness)
    prompts = hashlib.sha1("\n".join(f"{name}\0{library.template(name)}" for name in sorted(library.names()))
                           .encode()).hexdigest()
    return {"models": cfg.models.model_dump(mode="json", exclude={"prices"}),
            "prompts": prompts,
            # None: limits from the optimizer model's profile (the models above)
            "limits": cfg.limits.model_dump(mode="json") if cfg.limits is not None else None,
            "init": cfg.init.model_dump(mode="json", exclude={"method"}),
            "descriptions": hashlib.sha1(f"{harness.task_description}\0{harness.harness_description}".encode())
            .hexdigest()}


class SharedArtifacts:
    """The shared artifacts of one experiment under `root` (= <results>/<experiment>/shared)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    # ------------------------------------------------------------------ corpus
    def index_path(self, cfg: OptimizeConfig, fraction: float | None, seed: int) -> Path | None:
        """The index directory a cell retrieves from: the configured (or starter) one, or its `fraction`
        subsample (by whole skills), built once. Subsamples of one seed are nested: the skills are ranked once by a
        seeded hash and each fraction takes a prefix of that ranking, so the 1 % is part of the 10 %, which is part
        of the 100 %. The subsample keeps the base index's blocklists (the leakage guard reads them) and carries a
        corpus card naming the corpus it was drawn from, the fraction and its size."""
        if fraction is None or fraction >= 1.0:
            return Path(cfg.retrieval.index) if cfg.retrieval.index is not None else None
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"corpus_fraction must be in (0, 1], got {fraction}")
        index = check_fraction_index(cfg.retrieval.index)
        target = self.root / "corpus" / f"fraction-{fraction:g}-seed{seed}-nested"
        with _lock(target):
            if (target / CARD_FILE).exists():  # written last, after save() renamed a complete index into place
                return target
            from corpus_tools.blocklist import index_blocklists
            from corpus_tools.index import SectionIndex
            from raso.api import load_index

            base = load_index(cfg)
            base_corpus = corpus_identity(cfg.retrieval.index)
            skills = nested_skill_order(base.skills, seed)
            keep = set(skills[:max(1, round(fraction * len(skills)))])
            sub = SectionIndex.build(s for s in base.iter_sections() if s.skill_id in keep)
            sub.meta.update({"blocklists": index_blocklists(index), "subsample_of": str(index), "fraction": fraction, "seed": seed,
                             "nested": True})
            sub.save(target)
            sizes = {"fraction": fraction, "seed": seed, "skills": len(keep), "of_skills": len(skills),
                     "sections": len(sub), "nested": True, "subsample_of": base_corpus.to_dict()}
            atomic_write_json(target.parent / f"{target.name}.json", sizes)
            digest = hashlib.sha256(f"{base_corpus.digest}:nested:{seed}:{fraction!r}".encode()).hexdigest()
            atomic_write_json(target / CARD_FILE, {
                "name": f"{base_corpus.name}, nested {fraction:g} subsample (seed {seed})", "skills": len(keep),
                "digest": digest, "demo": base_corpus.demo, **sizes})
        return target

    @staticmethod
    def _gateway(cfg: OptimizeConfig, folder: Path) -> LLMGateway:
        """The gateway an artifact is made with: its calls cached and ledgered in the artifact's folder."""
        folder.mkdir(parents=True, exist_ok=True)
        return ledgered_gateway(cfg, cache_dir=folder / "cache", ledger_path=folder / "ledger.calls.jsonl")

    # ------------------------------------------------------------------ decomposition
    def decomposition(self, harness: Harness, harness_key: str, cfg: OptimizeConfig, seed: int) -> Path:
        """requirements.json for (harness, seed): one query-init call, shared by RFSI and RASI."""
        from raso.api import prompt_library
        from raso.optimizer import roles
        from raso.optimizer.render import limits_for

        key = options_key(producer_options(cfg, harness))
        folder = self.root / harness_key / f"seed{seed}" / f"decomposition-m{cfg.init.num_requirements}-{key}"
        path = folder / "requirements.json"
        with _lock(path):
            if path.exists():
                return path
            gw = self._gateway(cfg, folder)
            unit = UnitGateway(gw, f"seed{seed}/decomposition")
            plan = roles.query_init(unit, roles.QueryInitInput(
                task_description=harness.task_description, harness_description=harness.harness_description,
                num_requirements=cfg.init.num_requirements), cfg.limits or limits_for(unit), prompts=prompt_library(harness))
            atomic_write_json(path, {"requirements": [r.to_dict() for r in plan.requirements],
                                     "usage": gw.ledger.totals()})
        return path

    # ------------------------------------------------------------------ s0
    def initial_skill(self, harness: Harness, harness_key: str, cfg: OptimizeConfig, *, init: str, seed: int) -> Path:
        """The s0 SKILL.md for `init` (rfsi, rasi or rasi-raw) from the shared decomposition; built once."""
        from raso.api import default_initializer, run_context, step_options

        decomposition = self.decomposition(harness, harness_key, cfg, seed)
        retrieval = {} if init == "rfsi" else {"k": cfg.retrieval.k, "retrieval": cfg.retrieval.retriever_options(),
                                               "index": str(cfg.retrieval.index)}
        # the corpus by its digest, not its path: an index rebuilt at the same path makes a new s0
        corpus = {} if init == "rfsi" else {"corpus": corpus_identity(cfg.retrieval.index).digest}
        key = options_key({**{k: v for k, v in retrieval.items() if k != "index"}, **corpus,
                           "m": cfg.init.num_requirements, **producer_options(cfg, harness)})
        folder = self.root / harness_key / f"seed{seed}" / f"{init}-{key}"
        path = folder / "SKILL.md"
        with _lock(path):
            if path.exists():
                return path
            requirements = [Requirement.from_dict(r)
                            for r in json.loads(decomposition.read_text(encoding="utf-8"))["requirements"]]
            gw = self._gateway(cfg, folder)
            options = step_options(cfg)[0].model_copy(update={"method": "rfsi" if init == "rfsi" else "rasi",
                                                              "adapt": init != "rasi-raw"})
            ctx = run_context(cfg, harness, gw, use_retrieval=init != "rfsi").with_gateway(
                UnitGateway(gw, f"seed{seed}/{init}"))
            result = default_initializer(options, requirements=requirements).init(ctx)
            recorded = dict(retrieval)
            if recorded:  # the index by name ('starter corpus', never 'None')
                recorded["index"] = str(cfg.retrieval.index) if cfg.retrieval.index is not None else STARTER_NAME
            atomic_write_json(folder / "init.json", {
                **result.to_dict(), "retrieval": recorded,
                "corpus": corpus_record(cfg.retrieval.index) if init != "rfsi" else None,
                "decomposition": str(decomposition)})
            result.skill.save(path)  # last: its presence marks the artifact complete
        return path

    def init_usage(self, s0_path: Path) -> dict[str, Any]:
        """Model usage of making s0: its decomposition's share plus its own calls."""
        folder = Path(s0_path).parent
        own = ledger_totals(folder / "ledger.calls.jsonl")
        decomposition = Path(json.loads((folder / "init.json").read_text(encoding="utf-8"))["decomposition"])
        shared = ledger_totals(decomposition.parent / "ledger.calls.jsonl")
        return {key: own.get(key, 0) + shared.get(key, 0) for key in own}


__all__ = ["SharedArtifacts", "check_fraction_index", "empty_usage", "ledger_totals", "ledgered_gateway",
           "nested_skill_order", "options_key", "producer_options"]
