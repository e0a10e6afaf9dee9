"""``python -m torchgen_ah.merge_data OUT IN...``: concatenate AutoHeuristic logs into one.

Logs from different devices or operations must never be mixed silently, so inputs whose metadata differ
are refused (exit code 2) with the differing keys and the files that disagree, and so is one file's rows
twice: a file listed twice, a file holding every row of an earlier input (a run that resumed that log), or
one whose rows all are in earlier inputs (a copy). A row that two files share is kept twice: real
collections time the same input in two runs (8 rows of the official A100 TIMM log are in its HF log).
Rows are streamed line by line (no pandas; a 16-byte digest per row is kept to find repeats); malformed
rows are skipped with a warning naming file and line, and counted in the summary. Rows from a file whose header lists the same
columns in another order are rewritten into the first file's order. Inputs and output may be
gzip-compressed (``.gz``), so ``merge_data --force DATA.txt.gz DATA.txt.gz NEW.txt`` grows a committed
compressed dataset in place.

OUT is a new file: an existing one (an input among them, or a log collected earlier, as in
``merge_data mm_data.txt mm_data2.txt`` typed for "merge these two") is refused, naming it, unless
``--force`` says to replace it; the refusal offers a new file, or the merge that keeps OUT's rows
(``merge_data --force mm_data.txt mm_data.txt mm_data2.txt``: OUT also the first input), never a command that
would drop them. A link at OUT is written through (it stays a link).
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import warnings

from ah_plugin.report import command_line
from ah_plugin.collect.log_format import CHOICE_COLUMN, FEEDBACK_COLUMN, AHLogError, atomic_log_file, parse_metadata
from torchgen_ah.data.log_files import open_log_text, read_log_head, written_as_text

_WARN_FIRST = 5


class MergeError(Exception):
    """Inputs that cannot be merged (exit code 2)."""


def _read_head(path: str) -> tuple[dict, list[str]]:
    first, header = read_log_head(path)
    metadata = parse_metadata(first, path, 1)
    header = header.rstrip("\r\n")
    if not header:
        raise AHLogError(path, 2, "missing CSV header line")
    columns = header.split(",")
    expected = (
        list(metadata["numerical_features"])
        + list(metadata["categorical_features"])
        + [CHOICE_COLUMN, FEEDBACK_COLUMN]
    )
    if sorted(columns) != sorted(expected):
        raise AHLogError(path, 2, "header columns do not match the metadata's features")
    return metadata, columns


def metadata_differences(first: dict, other: dict, keys=None) -> list[str]:
    """Keys whose values differ (or that only one side has), in upstream key order.

    keys: compare only these (in this order); None: every key either side has.
    """
    a = dict(first)
    b = dict(other)
    if keys is None:
        keys = list(dict.fromkeys([*a.keys(), *b.keys()]))
    missing = object()
    return [k for k in keys if a.get(k, missing) != b.get(k, missing)]


def check_same_metadata(heads: list[tuple[str, dict]]) -> None:
    """Raise MergeError naming keys and files when any input's metadata differs from the first's."""
    base_path, base = heads[0]
    problems = []
    for path, metadata in heads[1:]:
        keys = metadata_differences(base, metadata)
        if keys:
            detail = "; ".join(
                f"{k}: {base.get(k, '<absent>')!r} vs {metadata.get(k, '<absent>')!r}" for k in keys
            )
            problems.append(f"{path}:1: metadata differs from {base_path}:1 in {', '.join(keys)} ({detail})")
    if problems:
        timed = any("timing" in metadata_differences(base, metadata) for _, metadata in heads[1:])
        note = ("; their choices were timed differently (CUDA-graph replay against Inductor's per-call events), "
                "so their times do not compare" if timed else "")
        raise MergeError("; ".join(problems) + "; refusing to merge logs with different metadata" + note)


def _row_problem(fields: list[str], columns: list[str], numerical_idx: list[int], choice_idx: int, fb_idx: int):
    """Why a row is malformed (the same rules as ``ah_log.read_log``), or None."""
    n = len(columns)
    if len(fields) != n:
        return f"expected {n} fields, found {len(fields)}"
    for i in numerical_idx:
        try:
            value = float(fields[i])
        except ValueError:
            value = math.nan
        if math.isnan(value):
            return f"numerical feature {columns[i]} is not a number"
    try:
        feedback = float(fields[fb_idx])
    except ValueError:
        return "feedback is not a number"
    if math.isnan(feedback):
        return "feedback is not a number"
    if feedback < 0:
        return "feedback is negative"
    if not fields[choice_idx]:
        return "empty choice"
    return None


PROG = "python -m torchgen_ah.merge_data"


def _refuse_existing(out: str, inputs: list[str], prog: str = PROG) -> None:
    """MergeError when ``out`` exists (``--force`` not given), naming it and what to type instead: a new
    file, or ``out`` replaced by the merge that keeps its own rows (``out`` listed as the first input), never a
    command that would drop them."""
    if not os.path.lexists(out):
        return
    is_input = os.path.exists(out) and any(os.path.exists(p) and os.path.samefile(out, p) for p in inputs)
    logs = " ".join(inputs if is_input else [out, *inputs])
    others = " ".join(p for p in inputs if not (os.path.exists(p) and os.path.exists(out) and os.path.samefile(out, p)))
    raise MergeError(
        f"{out}: {'is one of the inputs' if is_input else 'exists'}; {prog} writes a new file and never "
        f"replaces one unless told to (the first argument is the merged log). Into a new file: {prog} "
        f"MERGED.txt {logs}; to add {others or 'the others'} to {out}, keeping its rows: {prog} --force {out} {logs}")


def merge_logs(out: str, inputs: list[str], log=print, force: bool = False, prog: str = PROG) -> tuple[int, int]:
    """Merge ``inputs`` into ``out``. Returns (rows written, rows skipped).

    ``out`` must not exist unless ``force``; with it, ``out`` is replaced only once every input is read,
    so it may also be an input: listed first, the merge appends the others to it. A link at ``out`` is
    written through. Refused (MergeError, nothing written): an existing ``out`` without ``force``, a file
    listed twice, a file
    that holds every row of an earlier input (the same measurements merged twice, as when a run that
    resumed a committed log is merged into that log) or whose rows are all in earlier inputs, a compressed
    input cut short (merging it would make the loss permanent), and inputs that hold no usable row at all.
    Rows two files share otherwise are kept, and counted in the log.
    """
    if not inputs:
        raise MergeError("no input files given")
    if not force:
        _refuse_existing(out, inputs, prog)
    elif os.path.islink(out):
        out = os.path.realpath(out)
    heads = []
    for path in inputs:
        if not os.path.isfile(path):
            raise MergeError(f"{path}: no such file")
        for earlier, _, _ in heads:
            if os.path.samefile(earlier, path):
                raise MergeError(f"{path}: listed twice (also as {earlier}); its rows would be doubled")
        heads.append((path, *_read_head(path)))
    check_same_metadata([(path, metadata) for path, metadata, _ in heads])
    metadata, columns = heads[0][1], heads[0][2]
    with written_as_text(out) as text_out:
        total_rows, total_skipped = _write_rows(text_out, heads, metadata, columns, log)
    log(f"wrote {out}: {total_rows:,} rows from {len(inputs)} file(s), {total_skipped:,} skipped")
    return total_rows, total_skipped


def _write_rows(out, heads, metadata, columns, log) -> tuple[int, int]:
    """Stream every input's good rows into ``out`` (atomically), in ``columns`` order."""
    numerical = set(metadata["numerical_features"])
    numerical_idx = [i for i, c in enumerate(columns) if c in numerical]
    choice_idx, fb_idx = columns.index(CHOICE_COLUMN), columns.index(FEEDBACK_COLUMN)
    n = len(columns)
    total_rows = total_skipped = 0
    seen: dict[bytes, str] = {}  # digest of every row written so far -> the input it came from first
    owned: dict[str, int] = {}  # input -> how many distinct rows it brought first
    skipped_at: dict[str, list] = {}  # input -> (line, why) of its malformed rows
    with atomic_log_file(out, metadata, columns) as dst:
        for path, _, their_columns in heads:
            order = None
            if their_columns != columns:
                order = [their_columns.index(c) for c in columns]
            rows, skipped, mine = 0, [], set()
            shared: dict[str, set] = {}  # earlier input -> its distinct rows this one repeats
            repeats: dict[str, int] = {}  # earlier input -> lines here that repeat one of its rows
            first_shared: dict[str, int] = {}  # earlier input -> line of the first repeat here
            with open_log_text(path, cut_short="error") as src:
                src.readline()
                src.readline()
                for lineno, line in enumerate(src, start=3):
                    line = line.rstrip("\r\n")
                    if not line:
                        continue
                    fields = line.split(",")
                    if order is not None and len(fields) == n:
                        fields = [fields[i] for i in order]
                    problem = _row_problem(fields, columns, numerical_idx, choice_idx, fb_idx)
                    if problem:
                        skipped.append((lineno, problem))
                        continue
                    text = line if order is None else ",".join(fields)
                    digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
                    other = seen.get(digest)
                    if other is not None:
                        shared.setdefault(other, set()).add(digest)
                        repeats[other] = repeats.get(other, 0) + 1
                        first_shared.setdefault(other, lineno)
                    else:
                        mine.add(digest)
                    dst.write(text + "\n")
                    rows += 1
            _refuse_repeated_file(path, rows, mine, shared, repeats, first_shared, owned)
            for other, count in repeats.items():
                log(f"{path}: {count:,} row(s) also in {other} (first: line {first_shared[other]}); "
                    "both kept, as the same input timed in two runs")
            seen.update(dict.fromkeys(mine, path))
            owned[path] = len(mine)
            skipped_at[path] = skipped
            if skipped:
                named = ", ".join(f"line {ln} ({why})" for ln, why in skipped[:_WARN_FIRST])
                more = f" and {len(skipped) - _WARN_FIRST} more" if len(skipped) > _WARN_FIRST else ""
                warnings.warn(f"{path}: skipped {len(skipped)} malformed row(s): {named}{more}")
            log(f"{path}: {rows:,} rows, {len(skipped):,} skipped")
            total_rows += rows
            total_skipped += len(skipped)
        if total_rows == 0:  # raised inside the block: ``out`` is left as it was
            first = next(((p, s[0]) for p, s in skipped_at.items() if s), None)
            why = f"; first: {first[0]}:{first[1][0]}: {first[1][1]}" if first else ""
            raise MergeError(f"{', '.join(p for p, _, _ in heads)}: no usable row ({total_skipped:,} malformed "
                             f"row(s) skipped{why}); nothing written")
    return total_rows, total_skipped


def _refuse_repeated_file(path, rows, mine, shared, repeats, first_shared, owned) -> None:
    """MergeError when ``path`` repeats a whole earlier input, or is itself wholly repeated (a copy)."""
    for other, digests in shared.items():
        if owned.get(other) and len(digests) >= owned[other]:
            raise MergeError(
                f"{path}: {repeats[other]:,} row(s) are already in {other} (first: line {first_shared[other]}), "
                f"every row of it, so the same measurements would be merged twice. A run that resumed a "
                "committed log holds that log's rows: merge the run's file alone, or merge a run that started "
                "a fresh log")
    if rows and not mine:
        others = ", ".join(shared)
        raise MergeError(f"{path}: every one of its {rows:,} row(s) is already in {others}, so the same "
                         "measurements would be merged twice (a copy of an input?)")


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser(
        PROG,
        "Concatenate AutoHeuristic logs that share the same metadata. A row two files share is kept twice (the "
        "same input timed in two runs); a file listed twice, or holding all of an earlier input's rows, is "
        "refused.",
    )
    parser.add_argument("out", help="merged log to write, a new file (gzip-compressed when it ends in .gz)")
    parser.add_argument("inputs", nargs="+", help="logs to merge, in order (plain, or .gz)")
    parser.add_argument("--force", action="store_true",
                        help="replace OUT when it exists (it may then be the first input: the others are added to it)")
    args = parser.parse_args(argv)
    warnings.simplefilter("always")
    try:
        merge_logs(args.out, args.inputs, force=args.force, prog=parser.prog)
    except (MergeError, AHLogError, OSError, UnicodeDecodeError) as exc:
        return command_line.fail("merge_data", exc, 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
