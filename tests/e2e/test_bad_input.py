"""The bad-input matrix: every way a hostile or unlucky user can feed the CLI something wrong.

Each case builds its input in a fresh folder, runs one command, and checks what a user must
see: exit code 1, exactly one line on stderr, naming the problem (an entry of the error
catalogue), no traceback, and every file under the folder exactly as before (no run folder,
no empty model folder, no half-written manifest, no overwritten file). Most cases fail before
a model loads; the weight cases load a tiny Llama saved as a model directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from interp.cli import main
from interp.troubleshooting import find

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

FAST = ["--model", "minilm-l6", "--quick", "--skip", "classify", "--skip", "ablate", "--skip", "report", "-q"]
CONLLU_OK = "1\tdogs\tdog\tNOUN\t_\t_\t2\tnsubj\t_\t_\n2\tbark\tbark\tVERB\t_\t_\t0\troot\t_\t_\n"


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its kind and (for regular files) a content hash."""
    seen = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            seen[rel] = "link:" + os.readlink(path)
        elif path.is_dir():
            seen[rel] = "dir"
        elif path.is_file() and path.stat().st_size < 10**7:
            seen[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            seen[rel] = f"special:{path.stat().st_size}"
    return seen


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def corpus(name: str, content: str | bytes) -> Callable[[Path], list[str]]:
    """A case: `interp run --no-builtin --corpus FILE` on a file with this content."""
    def setup(tmp: Path) -> list[str]:
        return ["run", *FAST, "--no-builtin", "--out", str(tmp / "runs"), "--corpus", str(write(tmp / name, content))]
    return setup


def run_with(*args: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        return ["run", *FAST, "--out", str(tmp / "runs"), *args]
    return setup


def fifo(tmp: Path) -> list[str]:
    os.mkfifo(tmp / "pipe.txt")
    return corpus("unused.txt", "x")(tmp)[:-1] + [str(tmp / "pipe.txt")]


def device(tmp: Path) -> list[str]:
    (tmp / "zero.txt").symlink_to("/dev/zero")
    return corpus("unused.txt", "x")(tmp)[:-1] + [str(tmp / "zero.txt")]


def unreadable(tmp: Path) -> list[str]:
    if os.geteuid() == 0:  # root reads any file; /proc/self/mem refuses a read at offset 0 even to root
        (tmp / "locked.txt").symlink_to("/proc/self/mem")
    else:
        write(tmp / "locked.txt", "hello\n").chmod(0)
    return corpus("unused.txt", "x")(tmp)[:-1] + [str(tmp / "locked.txt")]


def huge_sparse_file(tmp: Path) -> list[str]:
    """64 GB on paper (a sparse file): a valid first line, then NUL bytes. A reader that read the
    file whole would take minutes and all memory; a streaming one stops at line 2."""
    path = write(tmp / "huge.txt", "a fine first line\n")
    with open(path, "r+b") as f:
        f.truncate(64 * 2**30)
    return corpus("unused.txt", "x")(tmp)[:-1] + [str(path)]


def escape_through_symlink(tmp: Path) -> list[str]:
    (tmp / "elsewhere").mkdir()
    (tmp / "runs").mkdir()
    (tmp / "runs" / "minilm-l6").symlink_to(tmp / "elsewhere")
    return run_with("--name", "r")(tmp)


def victim(tmp: Path) -> list[str]:
    write(tmp / "victim" / "features.csv", "my own file\n")
    return ["run", *FAST, "--out", str(tmp / "a" / "b" / "reports"), "--name", "../../../victim"]


def existing_run(tmp: Path) -> list[str]:
    write(tmp / "runs" / "minilm-l6" / "r" / "manifest.json", '{"stages": {}}')
    return run_with("--name", "r")(tmp)


def run_dir(tmp: Path, manifest: str | bytes | None = '{"stages": {}}', **tables: bytes) -> Path:
    path = tmp / "runs" / "m" / "r"
    path.mkdir(parents=True)
    if manifest is not None:
        write(path / "manifest.json", manifest)
    for name, data in tables.items():
        write(path / name, data)
    return path


def stage_on(command: str, **kwargs) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        return [command, str(run_dir(tmp, **kwargs))]
    return setup


def manifest_dir(tmp: Path) -> list[str]:
    path = run_dir(tmp, manifest=None)
    (path / "manifest.json").mkdir()
    return ["classify", str(path)]


def table(frame) -> bytes:
    import io

    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def effects_wrong_columns(tmp: Path) -> list[str]:
    import pandas as pd

    return ["report", str(run_dir(tmp, **{"effects.parquet": table(pd.DataFrame({"layer": [0], "oops": [1.0]}))}))]


def effects_all_inf(tmp: Path) -> list[str]:
    import numpy as np
    import pandas as pd

    from interp.pipeline.tables import EFFECTS

    frame = pd.DataFrame({c.name: [{"int": 0, "float": np.inf, "str": "x"}[c.dtype]] * 4 for c in EFFECTS.columns})
    return ["report", str(run_dir(tmp, **{"effects.parquet": table(frame)}))]


def compare_out(target: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        a, b = run_dir(tmp), tmp / "runs" / "m" / "s"
        write(b / "manifest.json", '{"stages": {}}')
        return ["compare", str(a), str(b), "--out", str(target(tmp))]
    return setup


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    from tiny_models import save_tiny_llama

    return save_tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny-llama")


def weights(edit: Callable[[Path], None]) -> Callable[[Path, Path], list[str]]:
    """A case on a copy of the tiny Llama directory, damaged by ``edit``."""
    def setup(tmp: Path, llama: Path) -> list[str]:
        import shutil

        model = tmp / "model"
        shutil.copytree(llama, model)
        edit(model)
        return ["run", "--model", str(model), "--skip", "classify", "--skip", "ablate", "--skip", "report", "-q",
                "--n-syntax", "10", "--out", str(tmp / "runs")]
    return setup


def _edit_tensors(change: Callable[[dict], dict]) -> Callable[[Path], None]:
    def edit(model: Path) -> None:
        save_file(change(load_file(model / "model.safetensors")), model / "model.safetensors")
    return edit


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


CASES: dict[str, Callable] = {
    # run names and output paths
    "name climbs out of --out": victim,
    "name is absolute": run_with("--name", "/tmp/interp-absolute-run"),
    "name nests": run_with("--name", "a/b"),
    "name is ..": run_with("--name", ".."),
    "name is .": run_with("--name", "."),
    "name holds a newline": run_with("--name", "bad\nname"),
    "name is empty": run_with("--name", ""),
    "name is hidden": run_with("--name", ".hidden"),
    "name too long": run_with("--name", "x" * 101),
    "model folder links outside --out": escape_through_symlink,
    "--out is a file": lambda tmp: ["run", *FAST, "--out", str(write(tmp / "afile", "keep me\n"))],
    "compare --out is not .html": compare_out(lambda tmp: tmp / "page.txt"),
    "compare --out would overwrite a non-HTML file": compare_out(lambda tmp: write(tmp / "notes.html", "my notes\n")),
    "compare --out in a missing folder": compare_out(lambda tmp: tmp / "missing" / "page.html"),
    "compare --out is a folder": compare_out(lambda tmp: (tmp / "dir.html").mkdir() or tmp / "dir.html"),
    # resume
    "--resume on a missing run": run_with("--name", "never-made", "--resume"),
    "--resume without --name": run_with("--resume"),
    "run exists without --resume": existing_run,
    # manifests
    "manifest is a JSON list": stage_on("classify", manifest="[1, 2]"),
    "manifest is a JSON string": stage_on("report", manifest='"run"'),
    "manifest is a directory": manifest_dir,
    "manifest is not UTF-8": stage_on("classify", manifest=b'{"stages": {}, "x": "\xff"}'),
    "manifest is truncated": stage_on("classify", manifest='{"stages": {'),
    "manifest from a future version": stage_on("classify", manifest='{"format": 99, "stages": {}}'),
    "manifest stages of the wrong type": stage_on("classify", manifest='{"stages": []}'),
    "no manifest at all": stage_on("ablate", manifest=None),
    # tables
    "effects table with the wrong columns": effects_wrong_columns,
    "effects all infinite": effects_all_inf,
    "features table is not parquet": stage_on("classify", **{"features.parquet": b"PAR1 but not really"}),
    "clusters.csv is empty": stage_on("report", **{"clusters.csv": b""}),
    # corpora: files
    "corpus missing": lambda tmp: run_with("--no-builtin", "--corpus", str(tmp / "nope.txt"))(tmp),
    "corpus is a directory": lambda tmp: run_with("--no-builtin", "--corpus", str(tmp))(tmp),
    "corpus is a FIFO": fifo,
    "corpus is a device": device,
    "corpus is unreadable": unreadable,
    "corpus of unknown format": corpus("notes.docx", "text"),
    "corpus is empty": corpus("empty.txt", "\n \n"),
    "corpus holds NUL bytes": corpus("nul.txt", b"fine\nbin\x00ary\n"),
    "corpus is not UTF-8": corpus("latin1.txt", "caf\xe9\n".encode("latin-1")),
    "corpus line of 200 kB": corpus("long.txt", "word " * 40_000 + "\n"),
    "corpus of 64 GB (sparse)": huge_sparse_file,
    # corpora: JSON lines
    "jsonl nested 20,000 deep": corpus("deep.jsonl", "[" * 20_000 + "]" * 20_000 + "\n"),
    "jsonl lone surrogate": corpus("sur.jsonl", '{"text": "bad \\ud800 escape"}\n'),
    "jsonl 5,000-digit number": corpus("num.jsonl", '{"text": ' + "9" * 5000 + "}\n"),
    "jsonl invalid line": corpus("bad.jsonl", '{"text": "fine"}\n{oops}\n'),
    "jsonl without the field": corpus("field.jsonl", '{"body": "x"}\n'),
    "jsonl NUL escape": corpus("nul.jsonl", '{"text": "a\\u0000b"}\n'),
    # corpora: CSV
    "csv empty file": corpus("empty.csv", ""),
    "csv with semicolons": corpus("semi.csv", "text;label\nhello;1\n"),
    "csv unclosed quote": corpus("quote.csv", 'text,label\n"hello,1\nworld,2\n'),
    "csv with BOM and no text column": corpus("bom.csv", "\ufeffbody,label\nhello,1\n"),
    # corpora: CoNLL-U
    "conllu head is a superscript digit": corpus("sup.conllu", CONLLU_OK.replace("\t2\tnsubj", "\t²\tnsubj")),
    "conllu cycle": corpus("cycle.conllu", "1\ta\ta\tX\t_\t_\t2\tdep\t_\t_\n2\tb\tb\tX\t_\t_\t1\tdep\t_\t_\n"
                                           "3\tc\tc\tX\t_\t_\t0\troot\t_\t_\n"),
    "conllu head out of range": corpus("range.conllu", CONLLU_OK.replace("\t2\tnsubj", "\t9\tnsubj")),
    "conllu bad multiword range": corpus("mwt.conllu", "1-3\tdogs'\t_\t_\t_\t_\t_\t_\t_\t_\n" + CONLLU_OK),
    "conllu bad empty node id": corpus("empty.conllu", CONLLU_OK + "1.x\tgone\t_\t_\t_\t_\t_\t_\t_\t_\n"),
    "conllu nine columns": corpus("cols.conllu", "1\ta\ta\tX\t_\t_\t0\troot\t_\n"),
    # options
    "--max-seq-len 1": run_with("--max-seq-len", "1"),
    "--n-syntax -1": run_with("--n-syntax", "-1"),
    "--from-manifest with other options": lambda tmp: ["run", "--from-manifest", str(run_dir(tmp)), "--n-syntax", "3"],
    "--from-manifest of a run without options": lambda tmp: ["run", "--from-manifest", str(run_dir(tmp)),
                                                              "--out", str(tmp / "runs")],
    "--device cuda without a GPU": run_with("--device", "cuda"),
    "--device tpu": run_with("--device", "tpu"),
    "unknown model": lambda tmp: ["run", "--model", "no-such-model-anywhere", "--out", str(tmp / "runs")],
}

WEIGHT_CASES: dict[str, Callable] = {
    "weights lack layers 1-2": weights(_edit_tensors(lambda t: {k: v for k, v in t.items() if ".layers.0." in k or "layers" not in k})),
    "weights with unexpected keys": weights(_edit_tensors(lambda t: {**t, "model.extra.weight": t["model.norm.weight"].clone()})),
    "weights of the wrong shape": weights(_edit_tensors(lambda t: {**t, "model.norm.weight": t["model.norm.weight"][:7].clone()})),
    "weights truncated": weights(_truncate),
    "weights pickled with code": weights(_pickle),
    "config.json is not JSON": weights(lambda m: write(m / "config.json", "{not json")),
    "gguf of random bytes": lambda tmp, llama: ["run", "--model", str(write(tmp / "m.gguf", os.urandom(4096))),
                                                "--out", str(tmp / "runs")],
}


def check(tmp: Path, args: list[str]) -> None:
    before = snapshot(tmp)
    start = time.perf_counter()
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    elapsed = time.perf_counter() - start
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1, (result.exit_code, result.output)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    assert find(lines[0]) is not None, f"not in the error catalogue: {lines[0]}"
    assert snapshot(tmp) == before, "the command changed files"
    assert elapsed < 60


@pytest.mark.timeout(60)  # a FIFO or a file read whole would hang here
@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_ends_in_one_line(case, tmp_path):
    check(tmp_path, CASES[case](tmp_path))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(WEIGHT_CASES))
def test_bad_weights_end_in_one_line(case, tmp_path, llama_dir):
    check(tmp_path, WEIGHT_CASES[case](tmp_path, llama_dir))


def test_the_matrix_is_large():
    assert len(CASES) + len(WEIGHT_CASES) >= 40


def test_the_victims_file_survives(tmp_path):
    args = victim(tmp_path)
    CliRunner().invoke(main, args)
    assert (tmp_path / "victim" / "features.csv").read_text() == "my own file\n"
    assert not Path("/tmp/interp-absolute-run").exists()


def test_a_pickle_is_never_unpickled(tmp_path, llama_dir, capfd):
    CliRunner().invoke(main, WEIGHT_CASES["weights pickled with code"](tmp_path, llama_dir))
    assert "this must never run" not in capfd.readouterr().out


def test_the_sparse_file_is_refused_fast(tmp_path):
    start = time.perf_counter()
    result = CliRunner().invoke(main, huge_sparse_file(tmp_path))
    assert result.exit_code == 1 and "huge.txt:2: NUL bytes" in result.stderr
    assert time.perf_counter() - start < 15


def test_json_cases_name_the_line(tmp_path):
    result = CliRunner().invoke(main, CASES["jsonl 5,000-digit number"](tmp_path))
    assert "num.jsonl:1: field 'text' is int, not text" in result.stderr
    assert "sys.set_int_max_str_digits" not in result.stderr
    result = CliRunner().invoke(main, corpus("json.jsonl", json.dumps({"text": 1}))(tmp_path / "b"))
    assert "is int, not text" in result.stderr
