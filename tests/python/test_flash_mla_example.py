"""Runs examples/decode_step/decode_step.py (indexer logits -> top-k 2048 -> block-table mapping -> sparse MLA
decode, each stage and the whole chain checked against float64) and requires it to pass."""
import importlib.util
import pathlib

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "decode_step" / "decode_step.py"


def test_decode_step_example_passes(capsys):
    spec = importlib.util.spec_from_file_location("decode_step_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main() == 0
    printed = capsys.readouterr().out
    assert "decode step: PASSED" in printed and "FAILED" not in printed
