"""Fetching raw files (stdlib urllib, tqdm bar); atomic writes come from lgcexp.cache."""

from __future__ import annotations

import http.client
import os
import urllib.error
import urllib.request
from pathlib import Path

from lgcexp.errors import UserError

TIMEOUT_S = 60.0
CHUNK = 1 << 20


def one_line(e: BaseException) -> str:
    """An exception as one short line."""
    return " ".join(str(e).split()) or type(e).__name__


def base_urls(env_var: str, defaults: tuple[str, ...]) -> list[str]:
    """Base URLs to try in order: `$env_var` (comma-separated) if set, else `defaults`."""
    raw = os.environ.get(env_var, "").strip()
    urls = [u.strip() for u in raw.split(",") if u.strip()] if raw else list(defaults)
    return [u if u.endswith("/") else u + "/" for u in urls]


def http_get(url: str, desc: str) -> bytes:
    """GET `url` into memory, with a tqdm bar when the size is known. Raises OSError on failure."""
    req = urllib.request.Request(url, headers={"User-Agent": "lgcexp"})
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
        size = resp.headers.get("Content-Length")
        total = int(size) if size and size.isdigit() else None
        buf = bytearray()
        bar = None
        if total:
            from tqdm.auto import tqdm

            bar = tqdm(total=total, unit="B", unit_scale=True, desc=desc, leave=False)
        try:
            while chunk := resp.read(CHUNK):
                buf += chunk
                if bar is not None:
                    bar.update(len(chunk))
        finally:
            if bar is not None:
                bar.close()
    if total is not None and len(buf) != total:
        raise OSError(f"got {len(buf)} of {total} bytes")
    return bytes(buf)


def fetch(fname: str, urls: list[str], data_dir: Path, target: str) -> tuple[bytes, str]:
    """Bytes of raw file `fname`: from `data_dir/fname` if the user put it there, else downloaded.

    Tries each base URL in turn. Returns (content, where it came from). On failure raises a
    UserError naming the file, the URLs tried and where to put the file by hand.
    """
    local = data_dir / fname
    if local.is_file():
        return local.read_bytes(), str(local)
    errors = []
    for base in urls:
        url = base + fname
        try:
            return http_get(url, fname), url
        except (OSError, http.client.HTTPException, ValueError) as e:  # HTTPError, timeouts, bad URLs
            errors.append(f"{url}: {one_line(e)}")
    raise UserError(f"cannot download {fname} (tried {'; '.join(errors) or 'no URL'}); "
                    f"put {target} in {data_dir}/ or put {fname} there to have it converted")


