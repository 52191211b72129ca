"""The `ctc-text` comparator (greedy CTC decoding per row) and the `text-generation` one (a greedy
decoding loop that re-runs both models through a CompareContext): exact-match rate and BLEU of
the token sequences."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ditox_ci.compare import CompareFunc, Comparison, Outputs
from ditox_ci.compare.tasks.common import (
    CompareContext,
    Feed,
    Judge,
    Options,
    Paired,
    RunFunc,
    comparator,
    output_position,
    paired_comparator,
    threshold_verdict,
)
from ditox_ci.errors import ConfigError


def bleu(reference: Sequence[int], candidate: Sequence[int], max_n: int = 4) -> float:
    """Sentence BLEU with add-one smoothing of the n-gram precisions (Lin & Och 2004), so short
    sequences with one changed token score below 1 instead of collapsing to 0."""
    if list(reference) == list(candidate):
        return 1.0
    if not candidate or not reference:
        return 0.0
    log_precision = 0.0
    orders = min(max_n, len(reference), len(candidate))
    for n in range(1, orders + 1):
        ref_grams = Counter(tuple(reference[i : i + n]) for i in range(len(reference) - n + 1))
        cand_grams = Counter(tuple(candidate[i : i + n]) for i in range(len(candidate) - n + 1))
        overlap = sum(min(count, ref_grams[g]) for g, count in cand_grams.items())
        total = sum(cand_grams.values())
        smoothing = 0 if n == 1 else 1
        log_precision += math.log(max(overlap + smoothing, 1e-9) / (total + smoothing)) / orders
    brevity = min(0.0, 1 - len(reference) / len(candidate))
    return float(math.exp(log_precision + brevity))


def ctc_greedy(logits: np.ndarray, blank: int) -> list[list[int]]:
    """Best path per row of (batch, time, classes): repeats collapsed, blanks dropped."""
    paths = np.argmax(np.asarray(logits).reshape(-1, *np.shape(logits)[-2:]), axis=-1)
    decoded = []
    for path in paths:
        collapsed = [int(t) for i, t in enumerate(path) if i == 0 or t != path[i - 1]]
        decoded.append([t for t in collapsed if t != blank])
    return decoded


def _text_verdict(
    name: str, label: str, pairs: Sequence[tuple[list[int], list[int]]], opts: Mapping[str, Any]
) -> Comparison:
    scores = [bleu(a, b) for a, b in pairs]
    exact = [a == b for a, b in pairs]
    changed = [i for i, same in enumerate(exact) if not same]
    metrics: dict[str, Any] = {
        "sequences": len(pairs),
        "exact_match_rate": float(np.mean(exact)) if exact else 1.0,
        "bleu_min": min(scores) if scores else 1.0,
        "bleu_mean": float(np.mean(scores)) if scores else 1.0,
        "changed_sequences": changed[:20],
    }
    if changed:
        first = pairs[changed[0]]
        metrics["example"] = {"expected": first[0][:64], "actual": first[1][:64]}
    return threshold_verdict(
        name,
        label,
        metrics,
        [
            ("exact_match_rate", metrics["exact_match_rate"], opts["min_exact_match"], "min"),
            ("bleu_min", metrics["bleu_min"], opts["min_bleu"], "min"),
        ],
    )


@paired_comparator("ctc-text", {"output": 0, "blank": 0, "min_exact_match": 1.0, "min_bleu": 1.0})
def ctc_text(opts: Options) -> Judge:
    def judge(paired: Paired) -> Comparison:
        pairs = [
            pair
            for _, _, a, b in paired.samples
            for pair in zip(ctc_greedy(a, opts["blank"]), ctc_greedy(b, opts["blank"]), strict=True)
        ]
        return _text_verdict("ctc-text", paired.label, pairs, opts)

    return judge


def greedy_generate(
    run: RunFunc, feed: Feed, input_name: str, logits_output: int, steps: int, eos: int
) -> list[int]:
    """Append the argmax of the last position's logits `steps` times (or until `eos`); returns
    only the generated tokens. Other inputs of the feed (masks, type ids) grow alongside."""
    current = {name: np.asarray(value) for name, value in feed.items()}
    prompt = current[input_name]
    generated: list[int] = []
    for _ in range(steps):
        logits = np.asarray(run(current)[logits_output])
        token = int(np.argmax(logits.reshape(-1, logits.shape[-1])[-1]))
        generated.append(token)
        if token == eos:
            break
        for name, value in current.items():
            if value.shape == current[input_name].shape and name != input_name:
                current[name] = np.concatenate([value, value[..., -1:]], axis=-1)
        current[input_name] = np.concatenate(
            [current[input_name], np.full((*prompt.shape[:-1], 1), token, prompt.dtype)], axis=-1
        )
    return generated


@comparator(
    "text-generation",
    {
        "input": "input_ids",
        "output": 0,
        "max_new_tokens": 16,
        "eos": -1,
        "min_exact_match": 1.0,
        "min_bleu": 1.0,
    },
)
def text_generation(opts: Options) -> CompareFunc:
    def compare(
        expected: Sequence[Outputs],
        actual: Sequence[Outputs],
        names: Sequence[str],
        context: CompareContext | None = None,
    ) -> Comparison:
        if context is None:
            raise TypeError("text-generation re-runs the models: call it with a CompareContext")
        position, label = output_position(names, opts["output"])
        pairs = []
        for feed in context.feeds:
            if opts["input"] not in feed:
                raise ConfigError(
                    f"text-generation input '{opts['input']}' is not fed to the model "
                    f"(inputs: {', '.join(feed)}); fix the comparator's 'input' option"
                )
            steps, eos = int(opts["max_new_tokens"]), int(opts["eos"])
            pairs.append(
                (
                    greedy_generate(
                        context.run_original, feed, opts["input"], position, steps, eos
                    ),
                    greedy_generate(
                        context.run_optimized, feed, opts["input"], position, steps, eos
                    ),
                )
            )
        return _text_verdict("text-generation", label, pairs, opts)

    compare.needs_context = True  # type: ignore[attr-defined]
    return compare
