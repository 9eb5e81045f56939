"""OfficeQA answer scoring: our own implementation of the rules of the official scorer.

The rules follow `reward.py` in github.com/databricks/officeqa (read, not copied); `score_answer(gold, predicted,
tolerance)` gives 1.0 or 0.0 as the official `score_answer` does. In order:

1. **Final answer.** If the prediction holds `<FINAL_ANSWER>...</FINAL_ANSWER>` blocks, the last one is the answer.
2. **Normal form.** The Unicode minus sign becomes "-" and runs of whitespace become one space.
3. **Accounting negatives and currency.** A number in parentheses, optionally with a currency sign inside,
   is negative: "(1,234)" and "($12.5)" read as -1,234 and -12.5, except a bare year-like number ("(1977)").
   Currency signs ($ £ € ¥ ₹ ¢ ₩ ₽) are then dropped.
4. **Numbers with context.** Thousands separators are removed from well-formed groups ("1,234,567"); every
   `-?digits[.digits][%]` is a number, kept with the 20 characters on each side (lower-cased) as its context.
   A percent sign does not change the value: "12.5%" equals "12.5".
5. **Units.** The context names a unit when it holds trillion(s), billion(s) or a lone "b", million(s) or a
   lone "m", thousand(s) or a lone "k" (checked in that order). Two numbers are comparable only if one of
   them has no unit or both have the same; the numbers themselves are compared as written, never scaled:
   "543 million" matches "543" and "543 million" but not "543 billion" nor "543,000,000".
6. **Relative tolerance.** A number matches the expected one when |expected - got| / |expected| <= tolerance;
   an expected 0 needs exactly 0. The official default tolerance is 0 (exact).
7. **Incidental years.** Whole numbers from 1900 to 2100 in the prediction are ignored ("in FY 1999 it was
   42") unless the expected answer is itself such a number or has words besides numbers ("March 1977"); for
   an answer with several numbers, unless one of them is year-like.
8. **Direct answer only.** The prediction must be one non-empty line of at most 250 characters without
   markup tags (`<...>`); for a numeric answer it must hold exactly as many numbers (after rule 7) as the
   expected one (a bracketed list may instead be split at its commas, rule 10); for a text answer it must
   hold no number. A prediction saying "unable to determine" scores 0.
9. **Words next to numbers.** If the expected answer has words besides numbers and unit words (e.g. the month
   in "March 1977"), the prediction must have words too and one word string must contain the other.
10. **Bracketed lists.** An expected answer that is exactly one `[...]` with at least two numbers (and no
    digits outside the brackets) is an ordered list: the prediction matches if splitting it at commas gives
    the same numbers in the same order (so "[8,152,260]" can read as 8 and 152,260), or if the numbers found
    in it (rule 4, years dropped by rule 7) match in order.
11. **Several numbers.** Otherwise every expected number must match some number in the prediction.
12. **One number.** Otherwise some number of the prediction must match the expected one.
13. **Text answers.** When either side has no number, both are lower-cased, stripped of surrounding quotes
    and of parenthesised parts ("(OASI)"), and whitespace-collapsed; with rule 8 they must be equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

CURRENCY_SIGNS = "$£€¥₹¢₩₽"
CONTEXT_CHARS = 20
MAX_ANSWER_CHARS = 250

_NUMBER_BODY = r"\d{1,3}(?:,\d{3})*(?:\.\d+)?|\d+(?:\.\d+)?"
_PARENTHESISED = re.compile(rf"\(\s*([{re.escape(CURRENCY_SIGNS)}])?\s*({_NUMBER_BODY})\s*\)")
_CURRENCY = re.compile(f"[{re.escape(CURRENCY_SIGNS)}]")
_GROUPED = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)")
_NUMBER = re.compile(r"-?\d+\.?\d*%?")
_LIST_ITEM = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?")
_BRACKETS = re.compile(r"\[([^\[\]]+)\]")
_FINAL_ANSWER = re.compile(r"<FINAL_ANSWER>\s*(.*?)\s*</FINAL_ANSWER>", re.DOTALL | re.IGNORECASE)
_MARKUP = re.compile(r"<[^>]*>")
_PARENTHESES = re.compile(r"\([^)]*\)")
_UNITS = (  # (name, pattern), most specific first
    ("trillion", re.compile(r"\btrillions?\b")),
    ("billion", re.compile(r"\bbillions?\b|\bb\b")),
    ("million", re.compile(r"\bmillions?\b|\bm\b")),
    ("thousand", re.compile(r"\bthousands?\b|\bk\b")),
)
_UNIT_WORDS = re.compile(r"\b(?:trillions?|billions?|millions?|thousands?|hundreds?|percent|percentage)\b")


@dataclass(frozen=True)
class NumberMention:
    """A number found in an answer, with the text around it (for its unit)."""

    value: float
    context: str
    percent: bool

    @property
    def unit(self) -> str | None:
        return unit_in(self.context)


@dataclass(frozen=True)
class Verdict:
    """The score of one answer and a one-line reason (kept in the rollout's info; it never quotes the expected
    answer, so rollouts do not carry the gated answer keys)."""

    score: float
    reason: str


def normal_form(text: str) -> str:
    """Rule 2: ASCII minus, single spaces, stripped."""
    return re.sub(r"\s+", " ", text.replace("\u2212", "-")).strip()


def is_year_like(value: float) -> bool:
    """Rule 7: a whole number from 1900 to 2100."""
    return 1900 <= value <= 2100 and value == int(value)


def _negatives_and_currency(text: str) -> str:
    """Rule 3."""
    def rewrite(match: re.Match[str]) -> str:
        sign, number = match.group(1), match.group(2)
        if sign is None and is_year_like(float(number.replace(",", ""))):
            return match.group(0)
        return f"-{number}"

    return _CURRENCY.sub("", _PARENTHESISED.sub(rewrite, text))


def numbers_in(text: str) -> list[NumberMention]:
    """Rule 4: the numbers of `text` in order, each with its context."""
    text = _negatives_and_currency(normal_form(text))
    text = _GROUPED.sub(lambda m: m.group(0).replace(",", ""), text)
    found = []
    for match in _NUMBER.finditer(text):
        raw = match.group(0)
        context = text[max(0, match.start() - CONTEXT_CHARS):match.end() + CONTEXT_CHARS].lower()
        found.append(NumberMention(float(raw.rstrip("%")), context, raw.endswith("%")))
    return found


def unit_in(context: str) -> str | None:
    """Rule 5: the unit a number's context names, or None."""
    lowered = context.lower()
    for name, pattern in _UNITS:
        if pattern.search(lowered):
            return name
    return None


def _close(expected: NumberMention, got: NumberMention, tolerance: float) -> bool:
    """Rules 5 and 6 for one pair of numbers."""
    units = (expected.unit, got.unit)
    if None not in units and units[0] != units[1]:
        return False
    if expected.value == 0:
        return got.value == 0
    return abs(expected.value - got.value) / abs(expected.value) <= tolerance


def words_of(text: str) -> str:
    """Rule 9: the words of an answer besides its numbers and unit words ("" when there are none)."""
    words = _NUMBER.sub("", normal_form(text).lower()).replace(",", "")
    words = _UNIT_WORDS.sub("", words)
    words = re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", words)).strip()
    return words if len(words) >= 2 else ""


def words_agree(expected: str, predicted: str) -> bool:
    """Rule 9."""
    want = words_of(expected)
    if not want:
        return True
    have = words_of(predicted)
    return bool(have) and (want in have or have in want)


def _drop_incidental_years(expected: list[NumberMention], got: list[NumberMention],
                           expected_text: str) -> list[NumberMention]:
    """Rule 7."""
    if len(expected) == 1:
        keep_years = is_year_like(expected[0].value) or bool(words_of(expected_text))
    else:
        keep_years = any(is_year_like(n.value) for n in expected)
    return got if keep_years else [n for n in got if not is_year_like(n.value)]


def _text_form(text: str) -> str:
    """Rule 13."""
    cleaned = text.strip().lower().strip('"').strip("'")
    return re.sub(r"\s+", " ", _PARENTHESES.sub("", cleaned)).strip()


# ------------------------------------------------------------------------------------------- lists (rule 10)
def _list_body(text: str) -> str | None:
    """The inside of the one bracketed list in `text`, if the text outside it has no digits."""
    text = normal_form(text)
    lists = list(_BRACKETS.finditer(text))
    if len(lists) != 1:
        return None
    outside = text[:lists[0].start()] + text[lists[0].end():]
    return None if re.search(r"\d", outside) else lists[0].group(1)


def _list_item_value(item: str) -> float | None:
    item = item.strip()
    if not item or re.search(r"\s,|,\s", item):
        return None
    item = _negatives_and_currency(normal_form(item))
    if not _LIST_ITEM.fullmatch(item):
        return None
    return float(item.rstrip("%").replace(",", ""))


@lru_cache(maxsize=256)
def comma_readings(text: str, count: int) -> tuple[tuple[float, ...], ...]:
    """Every way to read `text` (its bracketed list, else the whole text) as `count` numbers by cutting it at
    some of its commas; each piece must be one well-formed number. Distinct readings, in search order."""
    if count < 2:
        return ()
    body = _list_body(text) or normal_form(text)
    pieces = body.split(",")
    if len(pieces) < count:
        return ()
    readings: list[tuple[float, ...]] = []

    def extend(start: int, left: int, prefix: tuple[float, ...]) -> None:
        if left == 0:
            if start == len(pieces) and prefix not in readings:
                readings.append(prefix)
            return
        for stop in range(start + 1, len(pieces) - left + 2):
            value = _list_item_value(",".join(pieces[start:stop]))
            if value is not None:
                extend(stop, left - 1, prefix + (value,))

    extend(0, count, ())
    return tuple(readings)


def expected_list(expected: str, numbers: list[NumberMention]) -> list[NumberMention] | None:
    """The expected numbers if `expected` is a bracketed list of two or more numbers (rule 10), else None."""
    if _list_body(expected) is None or len(numbers) < 2:
        return None
    values = tuple(n.value for n in numbers)
    return numbers if values in comma_readings(expected, len(numbers)) else None


def _in_order(expected: list[NumberMention], got: list[NumberMention], tolerance: float) -> bool:
    return len(expected) == len(got) and all(_close(e, g, tolerance) for e, g in zip(expected, got))


# ------------------------------------------------------------------------------------------- the checks
def direct_answer_problem(expected: str, predicted: str) -> str | None:
    """Rule 8: why `predicted` is not a direct answer of the expected shape, or None when it is."""
    predicted = predicted.strip()
    if not predicted:
        return "the answer is empty"
    if sum(1 for line in predicted.splitlines() if line.strip()) > 1:
        return "the answer spans several lines"
    if len(predicted) > MAX_ANSWER_CHARS:
        return f"the answer is longer than {MAX_ANSWER_CHARS} characters"
    want, got = numbers_in(expected), numbers_in(predicted)
    if want:
        got = _drop_incidental_years(want, got, expected)
        if len(got) != len(want):
            as_list = expected_list(expected, want)
            if as_list is None or not comma_readings(predicted, len(as_list)):
                return f"the answer must hold exactly {len(want)} number(s), it holds {len(got)}"
        if _MARKUP.search(predicted):
            return "the answer contains markup"
        return None
    if got:
        return "the expected answer is text, but the answer contains numbers"
    if _text_form(expected) != _text_form(predicted):
        return "the text differs from the expected text"
    return None


def _match(expected: str, predicted: str, tolerance: float) -> tuple[bool, str]:
    """Rules 9-13 (the prediction already passed rule 8)."""
    if "unable to determine" in predicted.lower():
        return False, "the answer says 'unable to determine'"
    want, got = numbers_in(expected), numbers_in(predicted)
    if want and got:
        as_list = expected_list(expected, want)
        if as_list is not None:
            for reading in comma_readings(predicted, len(as_list)):
                if _in_order(as_list, [NumberMention(v, "", False) for v in reading], tolerance):
                    return True, "list matches in order (read at commas)"
            if _in_order(as_list, _drop_incidental_years(as_list, got, expected), tolerance):
                return True, "list matches in order"
            return False, "the list's numbers differ from the expected ones"
        candidates = _drop_incidental_years(want, got, expected)
        if not words_agree(expected, predicted):
            return False, "the words next to the numbers differ from the expected ones"
        missing = sum(1 for e in want if not any(_close(e, g, tolerance) for g in candidates))
        if missing:
            return False, f"{missing} of {len(want)} expected number(s) not matched within tolerance {tolerance:g} " \
                          "(or with a different unit)"
        return True, "numbers match" if len(want) > 1 else "number matches"
    exp, pred = _text_form(expected), _text_form(predicted)
    if exp in pred or exp == pred:
        return True, "text matches"
    return False, "text differs"


def final_answer(text: str) -> str:
    """Rule 1."""
    blocks = _FINAL_ANSWER.findall(text or "")
    return blocks[-1].strip() if blocks else (text or "")


def judge(expected: str, predicted: str, tolerance: float = 0.0) -> Verdict:
    """Score `predicted` against the expected answer under rules 1-13, with the reason."""
    if not expected or not expected.strip():
        raise ValueError("the expected answer is empty")
    if not 0.0 <= tolerance <= 1.0:
        raise ValueError(f"tolerance must be between 0 and 1, got {tolerance}")
    answer = final_answer(predicted)
    problem = direct_answer_problem(expected, answer)
    if problem is not None:
        return Verdict(0.0, problem)
    ok, reason = _match(expected, answer, tolerance)
    return Verdict(1.0 if ok else 0.0, reason)


def score_answer(expected: str, predicted: str, tolerance: float = 0.0) -> float:
    """1.0 if `predicted` answers `expected` under the official rules (see the module docstring), else 0.0."""
    return judge(expected, predicted, tolerance).score
