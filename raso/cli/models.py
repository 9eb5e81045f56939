"""`raso models`: the embedded model and configured roles; `raso models check MODEL` tries one call."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "models",
        help="list the embedded model and the configured roles; check that a model answers",
        description="Without a subcommand: list the embedded offline model(s), whether the `local` extra is "
        "installed, and the roles (agent, optimizer) the given --model/--optimizer-model resolve to. "
        "`raso models check MODEL` sends one tiny prompt through the gateway and prints reply, tokens and cost.",
    )
    _add_model_args(parser)
    parser.set_defaults(func=list_models)
    sub = parser.add_subparsers(dest="models_command", metavar="ACTION")
    check = sub.add_parser("check", help="send one tiny prompt to MODEL through the gateway")
    check.add_argument("model", metavar="MODEL", help="litellm model string, e.g. local/qwen2.5-coder-0.5b, openai/gpt-4o-mini")
    check.add_argument("--api-base", default=None, help="OpenAI-compatible server URL (vLLM, llama.cpp server, ...)")
    check.add_argument("--prompt", default="Reply with the single word: ready", help="the prompt to send")
    check.add_argument("--max-tokens", type=int, default=8)
    check.set_defaults(func=check_model)


def _add_model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=os.environ.get("RASO_MODEL"),
                        help="target model M for the `agent` role (default: $RASO_MODEL or the embedded model)")
    parser.add_argument("--optimizer-model", default=os.environ.get("RASO_OPTIMIZER_MODEL"),
                        help="model for every RASO role (default: $RASO_OPTIMIZER_MODEL or --model)")
    parser.add_argument("--api-base", default=None, help="server URL for --model")
    parser.add_argument("--optimizer-api-base", default=None, help="server URL for --optimizer-model")


def list_models(args: argparse.Namespace) -> int:
    from raso.api import gateway_config
    from raso.engine.config import ModelsConfig, OptimizeConfig
    from raso.llm import DEFAULT_LOCAL_MODEL, local

    llama_ok = importlib.util.find_spec("llama_cpp") is not None
    print("Embedded models (offline, in-process via llama-cpp-python):")
    for spec in local.EMBEDDED_MODELS.values():
        path = local.model_path(spec)
        if path.is_file() and path.stat().st_size == spec.size:
            state = f"assembled at {path}"
        else:
            try:
                local._part_files(spec)
                state = "parts installed; assembled on first use"
            except Exception as exc:  # noqa: BLE001 - report, don't crash
                state = str(exc)
        print(f"  {local.PROVIDER}/{spec.name}  {spec.description}; {spec.size / 1e6:.0f} MB; {state}")
    if not llama_ok:
        print(f"  llama-cpp-python is not installed: {local.INSTALL_HINT}")
    cfg = gateway_config(OptimizeConfig(models=ModelsConfig(
        target=args.model or DEFAULT_LOCAL_MODEL, optimizer=args.optimizer_model, api_base=args.api_base,
        optimizer_api_base=args.optimizer_api_base)))
    print("Roles (a role that is not configured falls back to `optimizer`, then `agent`):")
    for name, role in cfg.roles.items():
        where = f" at {role.api_base}" if role.api_base else ""
        print(f"  {name:<10} {role.model}{where}")
    print("Any litellm model string works: openai/..., anthropic/..., ollama/..., or a server via --api-base.")
    return 0


def check_model(args: argparse.Namespace) -> int:
    from raso.api import make_gateway
    from raso.engine.config import ModelsConfig, OptimizeConfig
    from raso.llm import LLMError, RetryConfig
    from raso.llm.ledger import cost_text

    gateway = make_gateway(OptimizeConfig(models=ModelsConfig(target=args.model, api_base=args.api_base)),
                           retry=RetryConfig(max_attempts=3, initial_wait_s=1.0, max_wait_s=10.0))
    try:
        reply = gateway.complete("agent", [{"role": "user", "content": args.prompt}], stage="models.check",
                                 max_tokens=args.max_tokens, temperature=0.0)
    except LLMError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"model:   {reply.model}")
    print(f"reply:   {reply.text.strip()!r}")
    print(f"tokens:  {reply.prompt_tokens} prompt + {reply.completion_tokens} completion")
    unpriced = int(gateway.ledger.totals().get("unpriced_calls", 0))
    print(f"cost:    {cost_text(reply.cost_usd, unpriced, digits=6, hint=True)}")
    print(f"latency: {reply.latency_s:.2f} s (retries: {reply.retries})")
    print("ledger:  " + json.dumps(gateway.ledger.totals()))
    return 0
