"""``python -m torchgen_ah.get_mm_dataset``: fetch, verify and unpack the official A100/H100 mm datasets.

The zips are the public ones upstream AutoHeuristic trained its shipped MMRankingA100/H100 on. They are
downloaded from their public repository by default, or copied from a folder that holds them (``--from DIR``,
or the environment variable ``AH_OFFICIAL_DATA``: an offline machine, a shared copy), checked against the
SHA-256 sums pinned below, and unpacked to ``datasets/a100/...`` and ``datasets/h100/...``. Work already
done and verified (a zip with the right hash, members of the right size) is skipped.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import urllib.error
import urllib.request
import zipfile

from tqdm import tqdm

from ah_plugin.report import command_line

URL_BASE = "https://github.com/AlnisM/autoheuristic-datasets/raw/main/"

# name -> (zip file, SHA-256 of the zip)
DATASETS = {
    "a100": ("a100_mm.zip", "08752487152cf5517b97386015210c2285119b4b3c7f74eae66753e5b7831cfe"),
    "h100": ("h100_mm.zip", "47736c7cb760008497c4e205db839716177210b6cacc876945784f5f53d87eb7"),
}

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_OUT = "datasets"
#: a folder holding a100_mm.zip and h100_mm.zip, used instead of the download (``--from`` wins over it)
ENV_SOURCE = "AH_OFFICIAL_DATA"


def source_from_environment() -> str | None:
    """The folder ``AH_OFFICIAL_DATA`` names (None: unset or empty, so download)."""
    value = os.environ.get(ENV_SOURCE, "").strip()
    return value or None


class DatasetError(Exception):
    """A dataset that cannot be fetched or does not verify (exit code 1)."""


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verify(path: str, expected: str, origin: str) -> None:
    actual = sha256_of(path)
    if actual != expected:
        raise DatasetError(
            f"{origin}: SHA-256 mismatch: expected {expected}, got {actual}; refusing to use it"
        )


def _download(url: str, dest: str, timeout: float) -> None:
    """Stream ``url`` to ``dest`` with a progress bar; DatasetError (suggesting --from) when offline."""
    try:
        response = urllib.request.urlopen(url, timeout=timeout)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DatasetError(
            f"could not download {url} ({reason}). If this machine is offline, put "
            f"{os.path.basename(url)} in a directory DIR (from a machine that has it) and run "
            f"`python -m torchgen_ah.get_mm_dataset --from DIR` (or set {ENV_SOURCE}=DIR)."
        ) from None
    total = int(response.headers.get("Content-Length") or 0) or None
    try:
        with response, open(dest, "wb") as out, tqdm(
            total=total, unit="B", unit_scale=True, desc=os.path.basename(dest)
        ) as bar:
            while True:
                block = response.read(1 << 16)
                if not block:
                    break
                out.write(block)
                bar.update(len(block))
    except (urllib.error.URLError, OSError) as exc:
        raise DatasetError(f"download of {url} failed midway ({exc}); run the command again") from None


def _safe_members(archive: zipfile.ZipFile, zip_path: str) -> list[zipfile.ZipInfo]:
    members = []
    for info in archive.infolist():
        name = info.filename
        parts = name.replace("\\", "/").split("/")
        if name.startswith("/") or ".." in parts or ":" in parts[0]:
            raise DatasetError(f"{zip_path}: unsafe member path {name!r}")
        if not info.is_dir():
            members.append(info)
    return members


def _extracted(out_dir: str, members: list[zipfile.ZipInfo]) -> bool:
    for info in members:
        path = os.path.join(out_dir, info.filename)
        if not os.path.isfile(path) or os.path.getsize(path) != info.file_size:
            return False
    return True


def _extract(zip_path: str, out_dir: str, log) -> list[str]:
    """Unpack every member (each written to a temp name, then renamed); skip members already there."""
    written = []
    with zipfile.ZipFile(zip_path) as archive:
        members = _safe_members(archive, zip_path)
        if _extracted(out_dir, members):
            log(f"{zip_path}: already unpacked in {out_dir}")
            return [os.path.join(out_dir, m.filename) for m in members]
        for info in members:
            target = os.path.join(out_dir, info.filename)
            written.append(target)
            if os.path.isfile(target) and os.path.getsize(target) == info.file_size:
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            tmp = f"{target}.part"
            with archive.open(info) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.replace(tmp, target)
            log(f"unpacked {target} ({info.file_size:,} bytes)")
    return written


def fetch(name: str, out_dir: str, source_dir: str | None = None, timeout: float = DEFAULT_TIMEOUT_S,
          log=print) -> list[str]:
    """Get one dataset ("a100" or "h100") into ``out_dir``; returns the unpacked file paths."""
    zip_name, expected = DATASETS[name]
    os.makedirs(out_dir, exist_ok=True)
    zip_path = os.path.join(out_dir, zip_name)
    if os.path.isfile(zip_path):
        if sha256_of(zip_path) == expected:
            log(f"{zip_path}: present, SHA-256 verified")
            return _extract(zip_path, out_dir, log)
        log(f"{zip_path}: present but its SHA-256 does not match; fetching it again")
    part = f"{zip_path}.part"
    try:
        if source_dir is not None:
            source = os.path.join(source_dir, zip_name)
            if not os.path.isfile(source):
                raise DatasetError(f"{source}: not found (the folder given by --from or {ENV_SOURCE} must "
                                   f"hold {', '.join(z for z, _ in DATASETS.values())})")
            shutil.copyfile(source, part)
            origin = source
        else:
            url = URL_BASE + zip_name
            log(f"downloading {url}")
            _download(url, part, timeout)
            origin = url
        _verify(part, expected, origin)
        os.replace(part, zip_path)
    finally:
        if os.path.exists(part):
            os.remove(part)
    log(f"{zip_path}: SHA-256 verified ({expected[:12]}...)")
    return _extract(zip_path, out_dir, log)


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser(
        "python -m torchgen_ah.get_mm_dataset",
        "Download (or copy from a folder), verify and unpack the official A100/H100 mm datasets.",
        epilog=f"Where the zips come from: --from DIR, else the folder in ${ENV_SOURCE} when set, else the "
               f"public download ({URL_BASE}). The tests that need the data read the zips from "
               f"${ENV_SOURCE}, or from datasets/ once this command has run in the repository.",
    )
    parser.add_argument("--from", dest="source_dir", metavar="DIR",
                        help=f"take a100_mm.zip / h100_mm.zip from DIR instead of downloading "
                             f"(default: ${ENV_SOURCE} when set)")
    parser.add_argument("--out", default=DEFAULT_OUT, help="where zips and unpacked files go")
    parser.add_argument("--only", choices=sorted(DATASETS), help="fetch just one of the datasets")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="network timeout in seconds")
    args = parser.parse_args(argv)
    names = [args.only] if args.only else sorted(DATASETS)
    source_dir = args.source_dir or source_from_environment()
    if source_dir is not None and not os.path.isdir(source_dir):
        how = "--from" if args.source_dir else ENV_SOURCE
        return command_line.fail(parser.prog, NotADirectoryError(
            f"{source_dir}: not a folder ({how}); it must hold {', '.join(z for z, _ in DATASETS.values())}"), 1)
    if source_dir is not None and not args.source_dir:
        print(f"taking the zips from {source_dir} ({ENV_SOURCE})")
    try:
        for name in names:
            for path in fetch(name, args.out, source_dir, args.timeout):
                print(f"  {path}")
    except zipfile.BadZipFile as exc:
        return command_line.fail(parser.prog, ValueError(f"cannot unpack ({exc}); delete the zip and run again"), 1)
    except DatasetError as exc:
        return command_line.fail(parser.prog, exc, 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
