"""common.stemming: NLTK's Porter stems without importing all of NLTK, and the same stems as before."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

from common.datadir import data_file
from tests.reliability_support import ROOT
from tests.support import needs_locomo

_WORD_RE = re.compile(r"[a-z0-9]+")
# Words whose stems NLTK's extensions of Porter's algorithm set apart from the original (and plain ones).
TRICKY = [
    "skies", "dying", "lying", "generously", "running", "ponies", "caresses", "agreed", "feed", "happily",
    "conformabli", "radicalli", "hopeful", "electriciti", "formaliti", "sensibility", "news", "bias", "ties",
    "cats", "meetings", "1990s", "yesterday's", "ai", "a",
]  # fmt: skip


def _python(source: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_importing_the_metrics_and_bm25_leaves_nltk_and_scipy_unimported():
    out = _python("""
        import sys
        import benchmarks.metrics, memory.lexical
        print(sorted(m for m in sys.modules if m == "nltk" or m.startswith(("nltk.", "scipy.stats"))))
        print(benchmarks.metrics.token_f1("The skies running", "sky run"))
    """)
    assert out.split("\n")[:2] == ["[]", "1.0"]


def test_a_later_import_nltk_is_whole_and_stems_alike():
    # Nothing of the stand-in loading lingers: NLTK imported afterwards is the full package, and its stemmer
    # and this module's give the same stems.
    out = _python(f"""
        from common.stemming import porter_stem
        import nltk
        from nltk.stem import PorterStemmer
        assert hasattr(nltk, "word_tokenize") and hasattr(nltk.stem, "SnowballStemmer")
        words = {TRICKY!r}
        nltk_stems = [PorterStemmer().stem(w) for w in words]
        print(nltk_stems == [porter_stem(w) for w in words])
    """)
    assert out.strip() == "True"


def test_nltk_already_imported_or_laid_out_otherwise_falls_back_to_the_plain_import():
    out = _python("""
        import importlib, nltk.stem.porter
        import common.stemming as stemming
        print(stemming._porter_stemmer_class() is nltk.stem.porter.PorterStemmer)
    """)
    assert out.strip() == "True"
    out = _python("""
        import importlib, sys
        real = importlib.import_module
        def refuse(name, *args):
            if name == "nltk.stem.porter":
                raise ImportError("another layout")
            return real(name, *args)
        importlib.import_module = refuse
        import common.stemming as stemming
        whole = "nltk.collocations" in sys.modules  # the plain import: all of NLTK
        print(type(stemming._PORTER).__module__, whole, stemming.porter_stem("skies"))
    """)
    assert out.split() == ["nltk.stem.porter", "True", "sky"]


@needs_locomo
def test_every_word_of_locomo_stems_as_nltks_stemmer_stems_it():
    # The stems key every cached call, pack and table (F1, BM25 evidence): one changed stem would change them.
    from nltk.stem import PorterStemmer

    from common.stemming import porter_stem

    text = data_file("locomo10.json").read_text(encoding="utf-8").lower()
    words = sorted(set(_WORD_RE.findall(text)) | set(TRICKY))
    assert len(words) > 5000
    nltk_stemmer = PorterStemmer()
    differ = [(w, porter_stem(w), stem) for w in words if porter_stem(w) != (stem := nltk_stemmer.stem(w))]
    assert differ == []
