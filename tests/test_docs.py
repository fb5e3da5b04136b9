"""The examples users read: every public docstring's example (run as a doctest) and every Python block of the
README, each on its own in a fresh namespace, on the CPU (a CUDA device where the README's code asks for one)."""
import doctest
import inspect
import os
import re

import pytest
import torch

import hsma_trsm
import hsma_trsm.switch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUBLIC = sorted(set(hsma_trsm.__all__) - {"Plan"}) + ["switch.routed_calls"]


def _public(name):
    obj = hsma_trsm
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("name", PUBLIC)
def test_docstring_example_runs(name):
    obj = _public(name)
    tests = doctest.DocTestFinder(recurse=False).find(obj, f"hsma_trsm.{name}", globs={})
    examples = [t for t in tests if t.examples]
    assert examples, f"hsma_trsm.{name}'s docstring has no >>> example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    hsma_trsm.disable()
    try:
        for t in examples:
            t.globs = {"torch": torch, "hsma_trsm": hsma_trsm}
            runner.run(t)
    finally:
        hsma_trsm.disable()
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted > 0, f"hsma_trsm.{name}: {result}"


def _readme_blocks():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_has_python_blocks():
    assert len(_readme_blocks()) >= 3


@pytest.mark.parametrize("index", range(len(_readme_blocks())))
def test_readme_block_runs_alone(index):
    code = _readme_blocks()[index]
    try:
        exec(compile(code, f"README.md block {index}", "exec"), {"__name__": "__readme__"})
    finally:
        hsma_trsm.disable()


@pytest.mark.parametrize("name", PUBLIC)
def test_help_shows_no_test_only_parameters(name):
    obj = _public(name)
    if isinstance(obj, type):
        return
    params = inspect.signature(obj).parameters
    assert not [p for p in params if p.startswith("_")], f"hsma_trsm.{name}{inspect.signature(obj)}"
