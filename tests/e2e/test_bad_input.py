"""The bad-input matrix: every way a hostile or unlucky user can feed the CLI something wrong.

Each case builds its input in a fresh folder, runs one command, and checks what a user must
see: exit code 1, exactly one line on stderr, naming the problem (an entry of the error
catalogue), no traceback, and every file under the folder exactly as before (no run folder,
no empty model folder, no half-written manifest, no overwritten file). Most cases fail before
a model loads. Themes of their own beside it: test_bad_weights (model files), test_bad_manifest,
test_bad_study, test_output_streams (streams and signals), test_run_collisions.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_cases import check, write
from click.testing import CliRunner

from interp.cli import main
from interp.pipeline.stages import stage_names

FAST = [
    "--model",
    "minilm-l6",
    "--quick",
    "--skip",
    "weights",
    "--skip",
    "classify",
    "--skip",
    "ablate",
    "--skip",
    "report",
    "-q",
]
CONLLU_OK = "1\tdogs\tdog\tNOUN\t_\t_\t2\tnsubj\t_\t_\n2\tbark\tbark\tVERB\t_\t_\t0\troot\t_\t_\n"


def corpus(name: str, content: str | bytes) -> Callable[[Path], list[str]]:
    """A case: `interp run --no-builtin --corpus FILE` on a file with this content."""

    def setup(tmp: Path) -> list[str]:
        return [
            "run",
            *FAST,
            "--no-builtin",
            "--out",
            str(tmp / "runs"),
            "--corpus",
            str(write(tmp / name, content)),
        ]

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
    if (
        os.geteuid() == 0
    ):  # root reads any file; /proc/self/mem refuses a read at offset 0 even to root
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

    return [
        "report",
        str(
            run_dir(tmp, **{"effects.parquet": table(pd.DataFrame({"layer": [0], "oops": [1.0]}))})
        ),
    ]


def effects_all_inf(tmp: Path) -> list[str]:
    import numpy as np
    import pandas as pd

    from interp.pipeline.tables import EFFECTS

    frame = pd.DataFrame(
        {c.name: [{"int": 0, "float": np.inf, "str": "x"}[c.dtype]] * 4 for c in EFFECTS.columns}
    )
    return ["report", str(run_dir(tmp, **{"effects.parquet": table(frame)}))]


def compare_out(target: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        a, b = run_dir(tmp), tmp / "runs" / "m" / "s"
        write(b / "manifest.json", '{"stages": {}}')
        return ["compare", str(a), str(b), "--out", str(target(tmp))]

    return setup


def symlink_loop(tmp: Path) -> Path:
    """tmp/loop/a -> b -> a: a path that resolves nowhere."""
    (tmp / "loop").mkdir()
    (tmp / "loop" / "a").symlink_to("b")
    (tmp / "loop" / "b").symlink_to("a")
    return tmp / "loop" / "a"


def features_frame():
    import pandas as pd

    return pd.DataFrame(
        {
            "layer": [0],
            "head": [0],
            "feature": ["first_token"],
            "value": [0.5],
            "baseline": [0.5],
            "sink_mass": [0.5],
            "ci_low": [0.4],
            "ci_high": [0.6],
            "n": [10],
        }
    )


def replicates_of_random_bytes(tmp: Path) -> list[str]:
    return [
        "classify",
        str(
            run_dir(
                tmp,
                **{
                    "features.parquet": table(features_frame()),
                    "feature_replicates.npz": os.urandom(4096),
                },
            )
        ),
    ]


def reference_fifo(tmp: Path) -> list[str]:
    path = run_dir(tmp, **{"features.parquet": table(features_frame())})
    os.mkfifo(tmp / "model.json")
    return ["classify", str(path), "--reference", str(tmp / "model.json")]


def manifest_naming(corpus: Callable[[Path], str]) -> Callable[[Path], list[str]]:
    """`interp run --from-manifest` of a run whose recorded corpus hashes name ``corpus(tmp)``: a
    device or a FIFO must be refused, not read (it would never end, or block forever)."""

    def setup(tmp: Path) -> list[str]:
        from interp.pipeline.options import RunOptions
        from interp.pipeline.rundir import jsonable

        manifest = {
            "model": {"name": "minilm-l6", "source": "packaged", "spec": {"name": "minilm-l6"}},
            "options": jsonable(RunOptions()),
            "stages": {},
            "provenance": {"corpus_hashes": {corpus(tmp): "0" * 64}},
        }
        return [
            "run",
            "--from-manifest",
            str(run_dir(tmp, manifest=json.dumps(manifest))),
            "--out",
            str(tmp / "again"),
        ]

    return setup


def fifo_path(tmp: Path) -> str:
    os.mkfifo(tmp / "corpus.txt")
    return str(tmp / "corpus.txt")


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
    "compare --out would overwrite a non-HTML file": compare_out(
        lambda tmp: write(tmp / "notes.html", "my notes\n")
    ),
    "compare --out in a missing folder": compare_out(lambda tmp: tmp / "missing" / "page.html"),
    "compare --out is a folder": compare_out(
        lambda tmp: (tmp / "dir.html").mkdir() or tmp / "dir.html"
    ),
    # options
    "--precision 0": run_with("--precision", "0"),
    "--precision negative": run_with("--precision", "-0.1"),
    "--precision NaN": run_with("--precision", "nan"),
    "--precision above 1": run_with("--precision", "1.5"),
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
    "features table is not parquet": stage_on(
        "classify", **{"features.parquet": b"PAR1 but not really"}
    ),
    "clusters table is empty": stage_on("report", **{"clusters.parquet": b""}),
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
    "conllu head is a superscript digit": corpus(
        "sup.conllu", CONLLU_OK.replace("\t2\tnsubj", "\t²\tnsubj")
    ),
    "conllu cycle": corpus(
        "cycle.conllu",
        "1\ta\ta\tX\t_\t_\t2\tdep\t_\t_\n2\tb\tb\tX\t_\t_\t1\tdep\t_\t_\n"
        "3\tc\tc\tX\t_\t_\t0\troot\t_\t_\n",
    ),
    "conllu head out of range": corpus(
        "range.conllu", CONLLU_OK.replace("\t2\tnsubj", "\t9\tnsubj")
    ),
    "conllu bad multiword range": corpus(
        "mwt.conllu", "1-3\tdogs'\t_\t_\t_\t_\t_\t_\t_\t_\n" + CONLLU_OK
    ),
    "conllu bad empty node id": corpus(
        "empty.conllu", CONLLU_OK + "1.x\tgone\t_\t_\t_\t_\t_\t_\t_\t_\n"
    ),
    "conllu nine columns": corpus("cols.conllu", "1\ta\ta\tX\t_\t_\t0\troot\t_\n"),
    # options
    "--max-seq-len 1": run_with("--max-seq-len", "1"),
    "--n-syntax -1": run_with("--n-syntax", "-1"),
    "--from-manifest with other options": lambda tmp: [
        "run",
        "--from-manifest",
        str(run_dir(tmp)),
        "--n-syntax",
        "3",
    ],
    "--from-manifest of a run without options": lambda tmp: [
        "run",
        "--from-manifest",
        str(run_dir(tmp)),
        "--out",
        str(tmp / "runs"),
    ],
    "--device cuda without a GPU": run_with("--device", "cuda"),
    "--device tpu": run_with("--device", "tpu"),
    "unknown model": lambda tmp: [
        "run",
        "--model",
        "no-such-model-anywhere",
        "--out",
        str(tmp / "runs"),
    ],
    # issue 24: huge integers, refused before anything is built
    "--n-syntax 100000000": run_with("--n-syntax", "100000000"),
    "--ablate-n-syntax 100000000": run_with("--ablate-n-syntax", "100000000"),
    "--seed 2**65": run_with("--seed", str(2**65)),
    "--max-sentences 10**30": run_with("--max-sentences", str(10**30)),
    "--max-rounds 10**30": run_with("--max-rounds", str(10**30)),
    "--repeated-length 10**9": run_with("--repeated-length", str(10**9)),
    "--max-seq-len 2": run_with("--max-seq-len", "2"),
    "every stage skipped": lambda tmp: [
        "run",
        "--model",
        "minilm-l6",
        "--out",
        str(tmp / "runs"),
        *(x for st in stage_names() for x in ("--skip", st)),
    ],
    # issue 24: symbolic link loops, devices and FIFOs wherever a path is read
    "--out through a symlink loop": lambda tmp: ["run", *FAST, "--out", str(symlink_loop(tmp))],
    "--out below a symlink loop": lambda tmp: [
        "run",
        *FAST,
        "--out",
        str(symlink_loop(tmp) / "runs"),
    ],
    "compare --out through a symlink loop": compare_out(
        lambda tmp: symlink_loop(tmp) / "page.html"
    ),
    "manifest names /dev/zero as a corpus": manifest_naming(lambda tmp: "/dev/zero"),
    "manifest names a FIFO as a corpus": manifest_naming(fifo_path),
    "eval corpus is a FIFO": lambda tmp: [
        "run",
        "--model",
        "minilm-l6",
        "--quick",
        "--skip",
        "weights",
        "--skip",
        "classify",
        "--skip",
        "report",
        "--out",
        str(tmp / "runs"),
        "--eval-corpus",
        fifo_path(tmp),
    ],
    "reference model is a FIFO": reference_fifo,
    "feature_replicates.npz of random bytes": replicates_of_random_bytes,
    # issue 24: CoNLL-U and text
    "conllu HEAD of 5,000 digits": corpus(
        "digits.conllu", CONLLU_OK.replace("\t2\tnsubj", "\t" + "9" * 5000 + "\tnsubj")
    ),
    "conllu word id of 5,000 digits": corpus(
        "id.conllu", CONLLU_OK.replace("1\tdogs", "9" * 5000 + "\tdogs")
    ),
    "conllu range of 5,000 digits": corpus(
        "rng.conllu", "1-" + "9" * 5000 + "\tx\t_\t_\t_\t_\t_\t_\t_\t_\n" + CONLLU_OK
    ),
    "conllu overlapping multiword ranges": corpus(
        "overlap.conllu",
        "1-2\tab\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "1\ta\ta\tX\t_\t_\t3\tdep\t_\t_\n2-3\tbc\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "2\tb\tb\tX\t_\t_\t3\tdep\t_\t_\n3\tc\tc\tX\t_\t_\t0\troot\t_\t_\n",
    ),
    "conllu empty FORM": corpus("form.conllu", CONLLU_OK.replace("dogs\tdog", "\tdog")),
    "UTF-16 without a byte-order mark": corpus(
        "u16.txt", "hello there\nsecond line\n".encode("utf-16-le")
    ),
}


@pytest.mark.timeout(60)  # a FIFO or a file read whole would hang here
@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_ends_in_one_line(case, tmp_path):
    check(tmp_path, CASES[case](tmp_path))


def test_the_matrix_is_large():
    assert len(CASES) >= 80


def test_the_victims_file_survives(tmp_path):
    args = victim(tmp_path)
    CliRunner().invoke(main, args)
    assert (tmp_path / "victim" / "features.csv").read_text() == "my own file\n"
    assert not Path("/tmp/interp-absolute-run").exists()


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
