"""The one table of compute costs of the non-LLM tiers (GFLOPs per input token)."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from modules.nlp import approx_tokens


@dataclass(frozen=True)
class ComputeRate:
    """Cost rate of one non-LLM method.

    Attributes:
        gflops_per_token: GFLOPs per input token.
        basis: Where the number comes from (shown in docs and reports).
    """

    gflops_per_token: float
    basis: str


#: Method name -> rate. Method names are the ones modules pass to :func:`gflops`.
RATES: MappingProxyType[str, ComputeRate] = MappingProxyType(
    {
        "template": ComputeRate(1e-7, "string formatting: ~100 ops/token"),
        "regex": ComputeRate(1e-6, "a dozen compiled regexes / set look-ups: ~1k ops/token"),
        "keyword": ComputeRate(1e-6, "stopword filter + set overlap: ~1k ops/token"),
        "tagger": ComputeRate(
            1e-5, "parsedatetime/dateparser: ~100 regex patterns tried per token window: ~10k ops/token"
        ),
        "textrank": ComputeRate(
            1e-5, "summa TextRank: co-occurrence graph + ~50 PageRank iterations: ~10k ops/token"
        ),
        "spacy_sm": ComputeRate(
            1e-3,
            "en_core_web_sm 3.8: 2 x ~0.5M dense weights/token (4 maxout CNN layers of width 96, "
            "tagger, parser and NER heads)",
        ),
        "minilm": ComputeRate(2 * 22.7e6 / 1e9, "all-MiniLM-L6-v2: 2 x 22.7M parameters per token"),
    }
)


def gflops(method: str, text: str | int) -> float:
    """GFLOPs of running ``method`` over ``text`` (or over a token count).

    Args:
        method: A key of :data:`RATES`.
        text: The input text, or its token count.

    Raises:
        KeyError: For an unknown method, naming the known ones.
    """
    try:
        rate = RATES[method]
    except KeyError:
        raise KeyError(f"no compute rate for method {method!r}; known: {sorted(RATES)}") from None
    n = text if isinstance(text, int) else approx_tokens(text)
    return rate.gflops_per_token * n
