"""scripts/diagnose_high_notes.py: the notes' proposed answer is found in the HIGH memory text."""

from tests.support import load_script


def test_notes_answer_is_the_last_answer_line_before_the_template():
    diag = load_script("diagnose_high_notes")
    memory = "Notes: Alice moved in 2021.\nAnswer: Berlin\n\nQuestion: Where?\nEvidence:\n1. Answer: not this"
    assert diag.notes_answer(memory) == "Berlin"
    assert diag.notes_answer("Notes: no proposal here\n\nQuestion: Where?") == ""
    # notes with blank lines inside still end at the template's question
    assert diag.notes_answer("Notes: a\n\nb\nAnswer: cat 2\n\nQuestion: q") == "cat 2"
