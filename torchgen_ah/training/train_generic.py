"""Train a ranking heuristic for any autotuned operation from its log, with generic features.

    python -m torchgen_ah.train_generic LOG [LOG ...] --heuristic-name NAME [--out DIR]

For operations without a specialised trainer (``packed_linear`` on the CPU, or any op named in
``TORCHINDUCTOR_AUTOHEURISTIC_COLLECT``): the features are the log's own columns (input sizes, strides,
dtypes), nothing derived. The log's metadata (op name, device capability, shared memory) becomes the
artifact's precondition; ``--device-name`` makes it device specific. Writes ``_NAME.py`` in the current
folder or ``--out DIR`` (the installed package's artifact folder only with ``--into-package``).

Built on the generic trainer (``torchgen_ah.training.train_decision``) and code generator
(``torchgen_ah.training.codegen``).
"""

from __future__ import annotations

import os
import sys

from ah_plugin.report import command_line
from torchgen_ah.training import codegen
from torchgen_ah.training import train_decision as td
from torchgen_ah.training.estimator import RankingTrainer
from torchgen_ah.data.ah_log import feature_columns, read_log
from torchgen_ah.training.output_folder import FLAG as INTO_PACKAGE, output_folder

#: small logs (a demo, a CI test) have a handful of inputs: a small grid is enough and fast
SMALL_GRID = {"max_depth": [3, 5], "min_samples_leaf": [1], "criterion": ["entropy"]}
#: below this many inputs the trainer's validation folds would be empty or meaningless
CROSS_VALIDATION_MIN_INPUTS = 20


def load_tables(paths: list[str]) -> tuple[td.MedianTimeMatrix, list[td.MedianTimeMatrix], dict]:
    """Timing tables of the logs (the first is the main one); every log must share the metadata."""
    tables, metadata = [], None
    for path in paths:
        log = read_log(path)
        meta = {k: log.metadata[k] for k in ("name", "device_capa", "shared_memory",
                                             "numerical_features", "categorical_features", "timing")
                if k in log.metadata}
        if metadata is None:
            metadata = meta
        elif _comparable(meta) != _comparable(metadata):
            raise ValueError(f"{path}:1: metadata {meta} differs from {paths[0]}'s {metadata}")
        table = td.median_time_matrix(log.frame, feature_columns(log.metadata), os.path.basename(path))
        tables.append(td.require_usable(table, path, len(log.frame) + len(log.skipped)))
    return tables[0], tables[1:], metadata


def _comparable(meta: dict) -> tuple:
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(meta.items()))


def aten_choice(choices: list[str]) -> str | None:
    """The aten (extern) choice: the ranking's default and the one the USE policy always keeps."""
    return next((c for c in sorted(choices) if c.startswith("extern_")), None)


def train_from_log(paths, *, heuristic_name: str, out_dir: str, device_names=(),
                   default_choice: str | None = None, k: int = 10, grid: dict | None = None,
                   log=lambda *_: None) -> str:
    """Train on ``paths`` (one log path or several) and write the artifact; return its path."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [os.fspath(paths)]
    main, extras, metadata = load_tables(list(paths))
    choices = sorted(set(main.choices).union(*[t.choices for t in extras]))
    spec = td.FeatureSpec(list(metadata["numerical_features"]), list(metadata["categorical_features"]))
    inputs = len(main.keys) + sum(len(t.keys) for t in extras)
    # too few inputs to hold any out (a demo, a CI test): one fit on all of them
    trainer = RankingTrainer(k=k, default=default_choice or aten_choice(choices),
                             grid=grid or (SMALL_GRID if inputs < 200 else None),
                             cross_validate=inputs >= CROSS_VALIDATION_MIN_INPUTS, log=log)
    if not trainer.cross_validate:
        trainer.set_params(grid=grid or SMALL_GRID)
    trainer.fit(main, extras, spec)
    names = " ".join(os.path.basename(p) for p in paths)
    source = trainer.to_artifact(
        heuristic_name,
        metadata,
        device_names=tuple(device_names),
        command=f"python -m torchgen_ah.train_generic {names} --heuristic-name {heuristic_name} --out DIR",
        sources=[os.path.basename(p) for p in paths],
    )
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"_{heuristic_name}.py")
    with open(path, "w") as handle:
        handle.write(source)
    return path


def main(argv=None) -> int:
    parser = command_line.parser("python -m torchgen_ah.train_generic", __doc__.split("\n")[0])
    parser.add_argument("logs", nargs="+", help="AutoHeuristic logs of one op on one device")
    parser.add_argument("--heuristic-name", required=True, type=codegen.heuristic_name,
                        help="class and file name of the artifact (a Python class name)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="folder to write _NAME.py into (default: the current folder; the installed "
                             f"package's artifact folder is refused unless {INTO_PACKAGE} is given)")
    parser.add_argument(INTO_PACKAGE, action="store_true",
                        help="write into the installed package's artifact folder, where every program using "
                             "this install loads it")
    parser.add_argument("--device-name", action="append", default=[],
                        help="make the artifact specific to this device name (repeatable)")
    parser.add_argument("--default-choice", help="choice the ranking falls back to (default: the aten one)")
    parser.add_argument("-k", type=int, default=10, help="top-k used to score grid points")
    args = parser.parse_args(argv)
    try:
        out_dir = output_folder(args.out, args.into_package)
        path = train_from_log(args.logs, heuristic_name=args.heuristic_name, out_dir=out_dir,
                              device_names=args.device_name, default_choice=args.default_choice, k=args.k,
                              log=print)
    except (ValueError, OSError, KeyError) as exc:
        return command_line.fail("train_generic", exc, 2)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
