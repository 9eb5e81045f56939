"""`raso init`: write an initial SKILL.md for a harness with zero rollouts (RASI, or RFSI with --no-retrieval)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from raso.cli.runs import _harness_kwargs, add_model_options
from raso.engine.config import ConfigError, OptimizeConfig


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "init",
        help="write an initial SKILL.md for a harness with zero rollouts (RASI; RFSI with --no-retrieval)",
        description="Decompose the harness's task into requirements, retrieve corpus sections for each, adapt them "
        "into lessons for this harness and write a SKILL.md. No rollouts are run. The lessons and the corpus "
        "sections they came from are written next to the skill (<out>.lessons.json).",
    )
    add_model_options(parser)
    parser.add_argument("--no-retrieval", action="store_true", help="RFSI: the same prompts without corpus lessons")
    parser.add_argument("--no-adapt", action="store_true", help="paste raw corpus sections instead of adapted lessons")
    parser.add_argument("--retrieval", choices=("bm25", "dreamer", "field"), default="bm25")
    parser.add_argument("--index", type=Path, default=None, help="a saved section index (default: the starter corpus)")
    parser.add_argument("-k", "--k", dest="k", type=int, default=5, help="sections retrieved per query (default 5)")
    parser.add_argument("--num-requirements", type=int, default=None,
                        help="M requirement-query pairs (default 5; 2 with the embedded local model)")
    parser.add_argument("--out", type=Path, default=Path("SKILL.md"), help="where to write the skill (default ./SKILL.md)")
    parser.set_defaults(func=run_init)


def run_init(args: argparse.Namespace) -> int:
    from raso.engine.engine import build_retriever_for
    from raso.harness import get_harness
    from raso.llm import GatewayConfig, LLMError, LLMGateway
    from raso.optimizer.rasi import initialize_skill

    try:
        values = {k: v for k, v in {
            "harness": args.harness, "model": args.model, "optimizer_model": args.optimizer_model,
            "api_base": args.api_base, "optimizer_api_base": args.optimizer_api_base, "retrieval": args.retrieval,
            "index": args.index, "k": args.k, "num_requirements": args.num_requirements,
            "harness_options": _harness_kwargs(args.harness_arg),
        }.items() if v is not None}
        config = OptimizeConfig.model_validate(values)
        if args.num_requirements is None and config.model.startswith("local/"):
            config.num_requirements = 2  # the embedded model writes ~20 tokens/s: keep the cold start short
        harness = get_harness(config.harness, **config.harness_options)
    except (ConfigError, ValueError, TypeError, ImportError) as exc:
        print(f"raso: error: {exc}", file=sys.stderr)
        return 2
    gateway = LLMGateway(GatewayConfig.for_models(
        target=config.model, optimizer=config.optimizer_model, api_base=config.api_base,
        optimizer_api_base=config.optimizer_api_base or (config.api_base if config.optimizer_model is None else None),
    ))
    started = time.perf_counter()
    try:
        retriever = None if args.no_retrieval else build_retriever_for(config, gateway)
        result = initialize_skill(
            gateway, task_description=harness.task_description, harness_description=harness.harness_description,
            retriever=retriever, k=config.k, num_requirements=config.num_requirements, adapt=not args.no_adapt,
        )
    except LLMError as exc:
        print(f"raso: error: {exc}", file=sys.stderr)
        return 1
    out: Path = args.out
    result.skill.save(out)
    lessons_path = out.with_name(out.stem + ".lessons.json")
    lessons_path.write_text(json.dumps({
        "mode": result.mode,
        "requirements": [r.to_dict() for r in result.requirements],
        "lessons": [lesson.to_dict() for lesson in result.lessons],
        "errors": list(result.errors),
        "usage": gateway.ledger.totals(),
    }, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    totals = gateway.ledger.totals()
    print(f"wrote {out} ({result.mode}: {len(result.requirements)} requirements, {len(result.lessons)} lessons; "
          f"{totals['prompt_tokens']}+{totals['completion_tokens']} tokens, ${totals['cost_usd']:.4f}, "
          f"{time.perf_counter() - started:.1f}s); lessons with provenance: {lessons_path}")
    for err in result.errors:
        print(f"note: {err}", file=sys.stderr)
    return 0
