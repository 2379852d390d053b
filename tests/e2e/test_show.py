"""`interp show RUN_DIR --prompt TEXT`: a head's attention on the user's own prompts, printed, stored
for the report and written as a page; bad input ends in one line. A tiny Llama saved as a model
directory stands in for the run's model (the roles and effects are the fake run's)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from fakes import make_fake_run  # noqa: E402

from interp.cli import main
from interp.errors import PromptError
from interp.model.spec import ModelSpec
from interp.model.tiny import build_tiny
from interp.pipeline import rundir
from interp.pipeline.results import load_run
from interp.pipeline.show import MAX_PROMPTS, read_prompt_file, show
from interp.report import explorer as X
from interp.report import prompt_store as P
from interp.troubleshooting import find

PROMPT = "the cat sat on the mat ."


def invoke(*args):
    return CliRunner().invoke(main, ["show", *map(str, args)], catch_exceptions=False)


def with_model(run_dir: Path, model_name: str, source: str = "hf-dir") -> Path:
    """Point the fake run's manifest at a model the command line can load."""
    manifest = rundir.read_manifest(run_dir)
    manifest["model"].update(
        name=model_name, source=source, spec=dataclasses.asdict(ModelSpec(name=model_name))
    )
    rundir.write_manifest(run_dir, manifest)
    return run_dir


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_tiny("llama", tmp_path_factory.mktemp("models") / "tiny-llama")


@pytest.fixture
def tiny_run(model_dir, tmp_path) -> Path:
    """A fake run of the tiny Llama's shape (2 layers x 4 heads) whose manifest loads that model."""
    return with_model(
        make_fake_run(tmp_path, n_layers=2, n_heads=4, model_name="tiny-llama"), str(model_dir)
    )


def query_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "->" in line]


def test_show_prints_the_heads_patterns_stores_them_and_writes_a_page(
    tiny_run, model_dir, tmp_path
):
    page = tmp_path / "page.html"
    result = invoke(tiny_run, "--prompt", PROMPT, "--heads", "0.1,L1H2", "--out", page)
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()  # the progress bar is on stderr
    assert out[0].startswith("L0H1  first_token; confidence ") and "effect " in out[0]
    assert any(line.startswith("L1H2  current_token") for line in out)
    assert f' prompt 1: "{PROMPT}"' in out
    stored = P.read_prompts(tiny_run)
    prompt = stored.prompts[0]
    assert prompt.tokens[0] == "[BOS]" and prompt.tokens[1:3] == ("the", "cat")
    assert len(stored.heads) == 8  # short prompts: every head is stored, for the report
    assert len(query_lines(result.stdout)) == 2 * len(prompt.tokens)

    # The stored and printed weights are the model's own pattern (TransformerLens' hook_pattern).
    from interp.model.load import load_model
    from interp.pipeline.prompts import encode_prompts

    model = load_model(str(model_dir))
    ids = torch.tensor(encode_prompts(model, [PROMPT]))
    _, cache = model.bridge.run_with_cache(ids)
    for layer, head in ((0, 1), (1, 2)):
        expected = cache[f"blocks.{layer}.attn.hook_pattern"][0, head].float().numpy()
        assert abs(prompt.pattern(layer, head) - expected).max() < 1e-3
    last = query_lines(result.stdout)[len(prompt.tokens) - 1]  # L0H1's last query
    top_key = int(cache["blocks.0.attn.hook_pattern"][0, 1, -1].argmax())
    first_key = re.split(r"\s{2,}", last.split("->")[1].strip())[0]
    assert first_key.startswith(f'"{prompt.tokens[top_key]}"@') and prompt.tokens[top_key] in last

    # The page: the explorer on the prompt, self-contained.
    assert f"page: {page}" in result.output and f"patterns: {tiny_run / P.FILE}" in result.output
    html = page.read_text(encoding="utf-8")
    assert 'id="explorer-root"' in html and html.count("<script") == 1 and "your prompt 1" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)

    # The report's explorer reads the stored prompt without the model.
    from interp.report.html import explorer_of

    assert "your prompt 1: the cat sat on the mat ." in explorer_of(tiny_run)["sources"]


def test_without_heads_the_run_chooses_them_and_a_file_gives_the_prompts(tiny_run, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(f"{PROMPT}\n\nthe dog ran .\n", encoding="utf-8")
    result = invoke(tiny_run, "--prompts", prompts, "--top", "1")
    assert result.exit_code == 0, result.output
    heads = [
        line.split()[0] for line in result.stdout.splitlines() if re.match(r"L\d+H\d+  ", line)
    ]
    assert heads == [X.head_name(*h) for h in X.default_heads(load_run(tiny_run))]
    assert ' prompt 2: "the dog ran ."' in result.output
    assert all(
        len(re.findall(r"@\d+ ", line)) == 1 for line in query_lines(result.stdout)
    )  # --top 1
    assert len(P.read_prompts(tiny_run).prompts) == 2


@pytest.mark.parametrize(
    "case, args, text",
    [
        ("no run", lambda run, tmp: [tmp / "nowhere", "--prompt", PROMPT], "no run directory at"),
        ("no prompt", lambda run, tmp: [run], "give a prompt: --prompt TEXT or --prompts FILE"),
        (
            "empty prompt",
            lambda run, tmp: [run, "--prompt", PROMPT, "--prompt", "  "],
            "prompt 2 is empty",
        ),
        (
            "no prompts file",
            lambda run, tmp: [run, "--prompts", tmp / "missing.txt"],
            "no such prompts file",
        ),
        (
            "unknown head",
            lambda run, tmp: [run, "--prompt", PROMPT, "--heads", "0.1,7.0"],
            "the model has no head L7H0",
        ),
        (
            "not a head",
            lambda run, tmp: [run, "--prompt", PROMPT, "--heads", "first"],
            "'first' is not a head",
        ),
        (
            "too long",
            lambda run, tmp: [run, "--prompt", "the " * 200, "--heads", "0.1"],
            "longer than the model's context of 128",
        ),
        (
            "page over a file",
            lambda run, tmp: [run, "--prompt", PROMPT, "--out", run / "roles.csv"],
            "must name a .html file",
        ),
    ],
)
def test_bad_input_is_one_line(tiny_run, tmp_path, case, args, text):
    result = invoke(*args(tiny_run, tmp_path))
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert lines[0].startswith("error: ") and text in lines[0] and find(lines[0]), lines[0]
    assert not (tiny_run / P.FILE).exists()


def test_a_run_without_a_loadable_model_says_so(tmp_path):
    bridge_run = make_fake_run(tmp_path)  # its manifest: a model built in Python
    result = invoke(bridge_run, "--prompt", PROMPT, "--heads", "0.1")
    assert result.exit_code == 1 and "made with a model built in Python" in result.output
    assert "model=..." in result.output and find(result.output.strip())
    no_model = make_fake_run(tmp_path, name="bare")
    manifest = rundir.read_manifest(no_model)
    del manifest["model"]
    rundir.write_manifest(no_model, manifest)
    result = invoke(no_model, "--prompt", PROMPT, "--heads", "0.1")
    assert result.exit_code == 1 and "names no model" in result.output


@pytest.mark.slow
def test_an_induction_head_of_the_packaged_model_attends_after_the_earlier_copy(tmp_path):
    """SmolLM2's L18H6 (an induction head, docs/results) on a repeated sequence: once the repeat is
    under way, each query of the second copy attends most (off the first-token sink) to the
    token after its earlier copy."""
    run_dir = with_model(
        make_fake_run(tmp_path, n_layers=30, n_heads=9, model_name="smollm2-135m"), "smollm2-135m"
    )
    words = " apple river stone cloud music paper green table"
    result = invoke(run_dir, "--prompt", words + words, "--heads", "18.6", "--top", "1")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("L18H6  ")
    prompt = P.read_prompts(run_dir).prompts[0]
    tokens, pattern = prompt.tokens, prompt.pattern(18, 6)
    half = (len(tokens) - 1) // 2  # [BOS] + two copies of `half` tokens
    assert tokens[1 : half + 1] == tokens[half + 1 :]
    for q in range(half + 3, len(tokens)):
        assert int(pattern[q, 1:].argmax()) + 1 == q - half + 1, (q, tokens[q], pattern[q].round(2))


def test_a_huge_prompts_file_is_read_a_line_at_a_time_and_cut_in_one_line(tmp_path):
    prompts = tmp_path / "prompts.txt"
    with prompts.open("w", encoding="utf-8") as file:
        file.writelines(f"prompt number {i} .\n" for i in range(100_000))
    read = read_prompt_file(prompts)
    assert (len(read.texts), read.total) == (MAX_PROMPTS, 100_000)
    assert read.texts[-1] == f"prompt number {MAX_PROMPTS - 1} ."
    note = read.cut_note(prompts)
    assert note is not None and f"holds 100000 prompts; showing the first {MAX_PROMPTS}" in note
    assert read_prompt_file(prompts, limit=MAX_PROMPTS + 1).cut_note(prompts) is not None
    small = tmp_path / "small.txt"
    small.write_text("a .\n\x00\x00\nb .\nc .\n", encoding="utf-8")
    assert read_prompt_file(small, limit=3).cut_note(small) is None


def test_show_stores_at_most_the_bound_and_says_what_it_cut(tiny_run, tmp_path, monkeypatch):
    import interp.pipeline.show as show_module

    monkeypatch.setattr(show_module, "MAX_PROMPTS", 3)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("".join(f"the cat {i} sat .\n" for i in range(5)), encoding="utf-8")
    result = invoke(tiny_run, "--prompts", prompts, "--heads", "0.1")
    assert result.exit_code == 0, result.output
    assert "holds 5 prompts; showing the first 3" in result.output
    assert "the prompts after the first 3" in result.output
    assert [p.text for p in P.read_prompts(tiny_run).prompts] == [
        f"the cat {i} sat ." for i in range(3)
    ]


def test_more_prompts_than_the_bound_from_python_are_refused(tiny_run):
    with pytest.raises(PromptError, match=f"stores at most {MAX_PROMPTS} at a time") as caught:
        show(tiny_run, [PROMPT] * (MAX_PROMPTS + 1), heads="0.1")
    assert find(str(caught.value))
    assert not (tiny_run / P.FILE).exists()


@pytest.mark.parametrize("blank", ["\x00", "\x00\x00\x00", " \x07\t\x1b "])
def test_a_prompt_of_control_characters_only_is_refused_like_an_empty_one(tiny_run, blank):
    result = invoke(tiny_run, "--prompt", PROMPT, "--prompt", blank, "--heads", "0.1")
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and lines == ["error: prompt 2 is empty: give some text"], lines
    assert not (tiny_run / P.FILE).exists()


def test_ctrl_c_during_show_says_nothing_was_stored_and_nothing_of_stages(tiny_run, monkeypatch):
    import interp.pipeline.prompts as prompts_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(prompts_module, "prompt_patterns", interrupted)
    result = invoke(tiny_run, "--prompt", PROMPT, "--heads", "0.1")
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 130 and len(lines) == 1, result.output
    assert "interrupted" in lines[0] and "prompts.npz is as it was" in lines[0]
    assert "stage" not in lines[0] and "--resume" not in lines[0]
    assert not (tiny_run / P.FILE).exists()
