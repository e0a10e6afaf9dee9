"""The map's flex attention candidates as AutoHeuristic logs, one per kernel, for the trainer.

    python -m torchgen_ah.evaluation.studies.autotune_map_logs MAP.jsonl [MAP.jsonl ...] --out DIR

Every flex attention autotuning the map ran (``autotune_map``: forward, decoding, and the forward and
backward of its training workloads) timed each candidate config by CUDA-graph replay inside the autotuning.
Those times become rows of ``DIR/<op>_map.txt`` (``flex_attention``, ``flex_decoding``,
``flex_attention_backward``) in the collector's format: the call's features (``flex_ranking.flex_features``'
columns), the config's id (``flex_ranking.config_id``) and its replay time in ms, with the log metadata of
the device the map ran on (``--device-capa``, ``--shared-memory``) and ``timing: cudagraph_replay``. A
workload measured in two runs gives one input with two repetitions. Failed candidates (no time) are left out.
"""

from __future__ import annotations

import argparse
import os
import sys

from ah_plugin.collect import log_format
from ah_plugin.use import flex_ranking
from ah_plugin.replay_timing import METHOD_REPLAY

from .autotune_map import read_rows

H200_CAPA = (9, 0)
H200_SHARED_MEMORY = 232448  # bytes of shared memory per block (opt-in) on an H100/H200


def label_params(label: str) -> dict:
    """``KEY=VALUE`` pairs of a candidate label (``triton BLOCK_M=64 BLOCK_N=64 num_stages=3 ...``)."""
    params = {}
    for part in label.split(" #")[0].split():
        key, sep, value = part.partition("=")
        if sep and value.lstrip("-").isdigit():
            params[key] = int(value)
    return params


def call_features(features: dict) -> dict:
    """The collector's flex columns from a map workload's features."""
    return {"batch": features["batch"], "q_heads": features["heads"], "kv_heads": features["kv_heads"],
            "q_seq": features["q_seq"], "kv_seq": features["kv_seq"], "qk_head_dim": features["head_dim"],
            "v_head_dim": features["head_dim"], "dtype": f"torch.{features['dtype']}"}


def rows_by_op(rows: list[dict]) -> dict[str, list[tuple[dict, str, float]]]:
    """op -> [(features, choice id, replay ms)] over every measured flex autotuning of ``rows``."""
    out: dict[str, list] = {}
    for row in rows:
        if "autotunings" not in row or not row.get("features", {}).get("head_dim"):
            continue
        features = call_features(row["features"])
        for tuning in row["autotunings"]:
            op = tuning["name"]
            if not flex_ranking.is_flex_op(op):
                continue
            for label, (_, replay_us) in tuning["times"].items():
                params = label_params(label)
                if replay_us is None or not all(k in params for k in flex_ranking.CONFIG_KEYS[op]):
                    continue
                out.setdefault(op, []).append((features, flex_ranking.config_id(op, params), replay_us / 1000.0))
    return out


def write_logs(rows: list[dict], out_dir: str, capa=H200_CAPA, shared_memory: int = H200_SHARED_MEMORY) -> list[str]:
    """One log per flex op under ``out_dir``; the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for op, items in sorted(rows_by_op(rows).items()):
        metadata = {"shared_memory": shared_memory, "device_capa": tuple(capa), "name": op,
                    "numerical_features": list(flex_ranking.NUMERICAL),
                    "categorical_features": list(flex_ranking.CATEGORICAL), "timing": METHOD_REPLAY}
        path = os.path.join(out_dir, f"{op}_map.txt")
        columns = log_format.header_columns(metadata)
        with open(path, "w", encoding="utf-8") as out:
            out.write(log_format.format_metadata(metadata) + "\n")
            out.write(",".join(columns) + "\n")
            for features, choice, ms in items:
                out.write(log_format.format_row(metadata, features, choice, ms) + "\n")
        paths.append(path)
    return paths


def main(argv=None) -> int:
    from ah_plugin.report import command_line

    parser = command_line.parser("python -m torchgen_ah.evaluation.studies.autotune_map_logs", __doc__.splitlines()[0])
    parser.add_argument("maps", nargs="+", help="the map's JSON-lines files")
    parser.add_argument("--out", required=True, help="folder for the logs")
    parser.add_argument("--device-capa", default="9,0", help="the device's compute capability, as MAJOR,MINOR")
    parser.add_argument("--shared-memory", type=int, default=H200_SHARED_MEMORY, help="bytes of shared memory per block")
    args = parser.parse_args(argv)
    try:
        capa = tuple(int(v) for v in args.device_capa.split(","))
        for path in write_logs(read_rows(args.maps), args.out, capa, args.shared_memory):
            print(f"wrote {path}")
    except (ValueError, OSError) as exc:
        return command_line.fail("autotune_map_logs", exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
