"""The text environment of one OfficeQA question.

`reset()` shows the question and what the corpus holds. Each `step(action)` takes one action (actions.py):

* `search[keywords year=... month=...]`: BM25 over the corpus pages, top `search_k` with a snippet each;
* `open[document page N-M]`: the text of up to `max_open_pages` pages of one document;
* `python[code]`: runs the code in the sandbox (an expression's value is printed) and shows its output;
* `answer[text]`: scores the answer with reward.py's rules; terminal.

Every observation is cut to `max_observation_chars`; an unknown or malformed action costs a step and gets an
observation explaining the format. The step budget ends the episode with reward 0 (truncated).
"""

from __future__ import annotations

import ast
import difflib
from typing import Any

from harnesses.officeqa.actions import OpenRequest, SearchRequest, parse_open, parse_search, split_action
from harnesses.officeqa.corpus import Corpus, snippet
from harnesses.officeqa.loader import OfficeQAQuestion
from harnesses.officeqa.reward import judge
from raso.harness import TextEnv
from raso.harness.sandbox import Sandbox

FORMAT_HINT = ("Write one action per reply on a line `Action: <verb>[<argument>]`, with <verb> one of search, "
               "open, python, answer, e.g. `Action: search[gross federal debt year=1945]`, "
               "`Action: open[treasury_bulletin_1945_06 page 2]`, `Action: python[(2413.5 - 2250.1) / 2250.1 * 100]`, "
               "`Action: answer[7.26]`.")

REPEAT_NOTE = ("(This is the same action as your previous one, so nothing new: take the next step instead, e.g. open "
               "a page listed by the search, compute with python, or answer.)")


def cut(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n[... {what} cut at {limit} of {len(text)} characters]"


class OfficeQAEnv(TextEnv):
    def __init__(self, question: OfficeQAQuestion, corpus: Corpus, sandbox: Sandbox, *, tolerance: float = 0.0,
                 max_steps: int = 12, search_k: int = 5, max_open_pages: int = 2,
                 max_observation_chars: int = 5000) -> None:
        super().__init__()
        self.question = question
        self.corpus = corpus
        self.sandbox = sandbox
        self.tolerance = tolerance
        self.max_steps = max_steps
        self.search_k = search_k
        self.max_open_pages = max_open_pages
        self.max_observation_chars = max_observation_chars
        self.steps = 0
        self.done = False
        self._previous_action: str | None = None

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.steps = 0
        self.done = False
        self._previous_action = None
        return self._first_observation(), {"task_id": self.question.uid}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            raise RuntimeError("the episode is over (answered or out of steps); call reset()")
        self.steps += 1
        parsed = split_action(action)
        reward, terminated = 0.0, False
        info: dict[str, Any] = {}
        if parsed is None:
            observation = f"Invalid action {cut(action.strip(), 200, 'action')!r}. {FORMAT_HINT}"
            info["error"] = "invalid action"
        elif parsed.verb == "answer":
            observation, reward, info = self._answer(parsed.argument)
            terminated = True
        elif parsed.verb == "search":
            observation = self._search(parsed.argument)
        elif parsed.verb == "open":
            observation = self._open(parsed.argument)
        else:
            observation = self._python(parsed.argument)
        if parsed is not None and not terminated and action.strip() == self._previous_action:
            observation = f"{REPEAT_NOTE}\n{observation}"
            info["repeated"] = True
        self._previous_action = action.strip()
        truncated = not terminated and self.steps >= self.max_steps
        if truncated:
            observation += "\nThe action budget is spent without an answer; the question scores 0."
        self.done = terminated or truncated
        info.update({"verb": parsed.verb if parsed else None, "steps": self.steps})
        return cut(observation, self.max_observation_chars, "observation"), reward, terminated, truncated, info

    # ------------------------------------------------------------------ actions
    def _first_observation(self) -> str:
        years = sorted(d.year for d in self.corpus.documents.values() if d.year is not None)
        span = f", issues from {years[0]} to {years[-1]}" if years else ""
        return (f"Question: {self.question.question}\n\n"
                f"Corpus: {len(self.corpus.documents)} U.S. Treasury Bulletin documents named "
                f"treasury_bulletin_YYYY_MM{span}. Search it, open pages, compute with python, then answer "
                f"once; {self.max_steps} actions in all.")

    def _search(self, argument: str) -> str:
        request = parse_search(argument)
        if not isinstance(request, SearchRequest):
            return f"Search not run: {request}."
        hits = self.corpus.search(request.query, k=self.search_k, years=request.years, month=request.month)
        scope = "".join([f" in {request.years[0]}" + (f"-{request.years[1]}" if request.years[1] != request.years[0]
                                                       else "") if request.years else "",
                         f" month {request.month}" if request.month else ""])
        if not hits:
            return f"No page matches {request.query!r}{scope}. Try other words or wider filters."
        lines = [f"Top {len(hits)} pages for {request.query!r}{scope}:"]
        for rank, (doc, page, score, text) in enumerate(hits, start=1):
            lines.append(f"{rank}. {doc.name} ({doc.label}) page {page} of {len(self.corpus.pages(doc.name))} "
                         f"[score {score:.1f}]: {snippet(text, request.query)}")
        top, top_page = hits[0][0], hits[0][1]
        lines.append(f"To read a page: open[<document> page <N>], e.g. open[{top.name} page {top_page}].")
        return "\n".join(lines)

    def _open(self, argument: str) -> str:
        request = parse_open(argument)
        if not isinstance(request, OpenRequest):
            return f"Open not run: {request}."
        doc = self.corpus.find(request.document)
        if doc is None:
            close = difflib.get_close_matches(request.document, list(self.corpus.documents), n=3, cutoff=0.6)
            hint = f" Closest names: {', '.join(close)}." if close else ""
            return (f"No document named {request.document!r}. Names look like treasury_bulletin_1945_06 "
                    f"(year, month); search results list them.{hint}")
        pages = self.corpus.pages(doc.name)
        numbers = [n for n, _ in pages]
        last = min(request.last, request.first + self.max_open_pages - 1)
        chosen = [(n, text) for n, text in pages if request.first <= n <= last]
        if not chosen:
            return f"{doc.name} has pages {numbers[0]}-{numbers[-1]}; page {request.first} does not exist."
        budget = max(500, (self.max_observation_chars - 200) // len(chosen))
        parts = [f"=== {doc.name} ({doc.label}), page {n} of {numbers[-1]} ===\n{cut(text, budget, 'page')}"
                 for n, text in chosen]
        if request.last > last:
            parts.append(f"(at most {self.max_open_pages} pages per open; ask for page {last + 1} next)")
        return "\n".join(parts)

    def _python(self, code: str) -> str:
        if not code.strip():
            return "Nothing to run: put the code inside python[...] or in a ```python block."
        program = code
        try:
            ast.parse(code, mode="eval")
            program = f"import math\n_value = (\n{code}\n)\nprint(_value)\n"
        except SyntaxError:
            pass  # statements: run as written, they print what they need
        result = self.sandbox.run(program)
        return "Python output:\n" + ("\n".join(result.report_lines()) or "(no output; print the values you need)")

    def _answer(self, text: str) -> tuple[str, float, dict[str, Any]]:
        verdict = judge(self.question.answer, text, self.tolerance)
        outcome = "correct" if verdict.score == 1.0 else f"not correct ({verdict.reason})"
        info = {"final_output": text, "verdict": verdict.reason, "tolerance": self.tolerance}
        return f"Answer {text!r} recorded: {outcome}.", verdict.score, info
