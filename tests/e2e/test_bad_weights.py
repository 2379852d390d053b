"""Bad model files: damaged weights, configs and GGUF files end in one line, and nothing is ever
unpickled. Each case damages a copy of a tiny Llama saved as a model directory."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_cases import check, write
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from interp.cli import main


def weights(edit: Callable[[Path], None]) -> Callable[[Path, Path], list[str]]:
    """A case on a copy of the tiny Llama directory, damaged by ``edit``."""

    def setup(tmp: Path, llama: Path) -> list[str]:
        import shutil

        model = tmp / "model"
        shutil.copytree(llama, model)
        edit(model)
        return [
            "run",
            "--model",
            str(model),
            "--skip",
            "weights",
            "--skip",
            "classify",
            "--skip",
            "ablate",
            "--skip",
            "report",
            "-q",
            "--n-syntax",
            "10",
            "--out",
            str(tmp / "runs"),
        ]

    return setup


def _edit_tensors(change: Callable[[dict], dict]) -> Callable[[Path], None]:
    def edit(model: Path) -> None:
        save_file(change(load_file(model / "model.safetensors")), model / "model.safetensors")

    return edit


def _edit_config(model: Path, **changes) -> None:
    config = json.loads((model / "config.json").read_text())
    write(model / "config.json", json.dumps({**config, **changes}))


def _poisoned(key: str, value: float) -> Callable[[dict], dict]:
    """One value of one tensor replaced (a NaN or an infinity)."""

    def change(tensors: dict) -> dict:
        tensor = tensors[key].clone()
        tensor.view(-1)[0] = value
        return {**tensors, key: tensor}

    return change


def _truncate(model: Path) -> None:
    data = (model / "model.safetensors").read_bytes()
    (model / "model.safetensors").write_bytes(data[: len(data) // 2])


def _pickle(model: Path) -> None:
    import torch

    class Payload:
        def __reduce__(self):
            return (print, ("this must never run",))

    tensors = load_file(model / "model.safetensors")
    (model / "model.safetensors").unlink()
    torch.save({**tensors, "payload": Payload()}, model / "pytorch_model.bin")


WEIGHT_CASES: dict[str, Callable] = {
    "weights lack layers 1-2": weights(
        _edit_tensors(
            lambda t: {k: v for k, v in t.items() if ".layers.0." in k or "layers" not in k}
        )
    ),
    "weights with unexpected keys": weights(
        _edit_tensors(lambda t: {**t, "model.extra.weight": t["model.norm.weight"].clone()})
    ),
    "weights of the wrong shape": weights(
        _edit_tensors(lambda t: {**t, "model.norm.weight": t["model.norm.weight"][:7].clone()})
    ),
    "weights truncated": weights(_truncate),
    "weights pickled with code": weights(_pickle),
    "config.json is not JSON": weights(lambda m: write(m / "config.json", "{not json")),
    "config.json with 0 heads": weights(lambda m: _edit_config(m, num_attention_heads=0)),
    "config.json with a negative size": weights(lambda m: _edit_config(m, intermediate_size=-5)),
    "config.json whose heads do not divide the width": weights(
        lambda m: _edit_config(m, num_attention_heads=5)
    ),
    "weights hold NaN": weights(
        _edit_tensors(_poisoned("model.layers.1.self_attn.q_proj.weight", float("nan")))
    ),
    "weights hold inf": weights(
        _edit_tensors(_poisoned("model.embed_tokens.weight", float("inf")))
    ),
    "gguf of random bytes": lambda tmp, llama: [
        "run",
        "--model",
        str(write(tmp / "m.gguf", os.urandom(4096))),
        "--out",
        str(tmp / "runs"),
    ],
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(WEIGHT_CASES))
def test_bad_weights_end_in_one_line(case, tmp_path, llama_dir):
    check(tmp_path, WEIGHT_CASES[case](tmp_path, llama_dir))


def test_a_pickle_is_never_unpickled(tmp_path, llama_dir, capfd):
    CliRunner().invoke(main, WEIGHT_CASES["weights pickled with code"](tmp_path, llama_dir))
    assert "this must never run" not in capfd.readouterr().out
