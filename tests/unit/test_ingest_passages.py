"""Which sentences can state a claim (ingest/passages.py, is_statement): learned-11 reads an imperative that opens
with a capital as a statement, and still not a title."""

from __future__ import annotations

import pytest

from kskill.ingest.passages import is_statement


@pytest.mark.parametrize("text", [
    "Run a few warmup iterations before timing the kernel",  # the only verb is the capitalised imperative
    "1. Run the timed loop several times on a quiet machine",
    "Step two: Run every candidate configuration with the same inputs",  # an imperative after a label's colon
])
def test_an_imperative_opening_with_a_capital_is_a_statement(text):
    assert is_statement(text)


@pytest.mark.parametrize("text", [
    "Run Every Candidate Configuration With Care",  # a title: its words are capitalised
    "Run the timed loop",  # too few words to state anything
    "Kernel fusion for global memory bandwidth on GPUs",  # no verb at all
])
def test_titles_and_fragments_stay_no_statements(text):
    assert not is_statement(text)


@pytest.mark.parametrize("text", [
    "Writing GEMV in Python with the cute kernel decorators",  # a gerund opening a slide title
    "Chunked vocab iteration : The kernel over vocabulary in chunks",  # a label whose first word only looks like a verb
])
def test_only_a_verbs_bare_form_opens_an_imperative(text):
    assert not is_statement(text)
