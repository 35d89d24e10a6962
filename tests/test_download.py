"""Tests of the download path (local HTTP server on 127.0.0.1 only) and of the .Z (LZW) decoder."""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import shutil
import socket
import subprocess
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

from lgcexp.cache import atomic_save_npz
from lgcexp.data import isolet, load_dataset, lzw, mnist
from lgcexp.errors import UserError

# --- a tiny LZW (.Z) encoder, for fixtures only ------------------------------------------------


class _Bits:
    """LSB-first bit writer."""

    def __init__(self):
        self.buf, self.acc, self.n = bytearray(), 0, 0

    def put(self, code: int, width: int):
        self.acc |= code << self.n
        self.n += width
        while self.n >= 8:
            self.buf.append(self.acc & 0xFF)
            self.acc >>= 8
            self.n -= 8

    def done(self) -> bytes:
        return bytes(self.buf + (bytes([self.acc]) if self.n else b""))


def lzw_compress(data: bytes, max_bits: int = 16, block: bool = True, clear_every: int | None = None) -> bytes:
    """Unix-compress-style .Z bytes. `clear_every`: emit CLEAR after that many codes (block mode)."""
    first, max_entries = (257 if block else 256), 1 << max_bits
    bits = _Bits()
    st = {"width": 9, "max_code": 511, "in_group": 0, "seg": 0}  # seg: codes since start/CLEAR

    def pad():
        while st["in_group"] % 8:
            bits.put(0, st["width"])
            st["in_group"] += 1
        st["in_group"] = 0

    def emit(code):
        dec_free = min(first + max(0, st["seg"] - 1), max_entries)  # decoder's table size before this code
        if dec_free > st["max_code"]:
            pad()
            st["width"] += 1
            st["max_code"] = max_entries if st["width"] >= max_bits else (1 << st["width"]) - 1
        bits.put(code, st["width"])
        st["in_group"] += 1
        st["seg"] += 1

    table, nxt, cur = {bytes([i]): i for i in range(256)}, first, b""
    for b in data:
        s = cur + bytes([b])
        if s in table:
            cur = s
            continue
        emit(table[cur])
        if nxt < max_entries:
            table[s], nxt = nxt, nxt + 1
        cur = bytes([b])
        if block and clear_every and st["seg"] >= clear_every:
            emit(256)
            pad()
            st["width"], st["max_code"], st["seg"] = 9, 511, 0
            table, nxt = {bytes([i]): i for i in range(256)}, first
    if cur:
        emit(table[cur])
    return bytes([0x1F, 0x9D, max_bits | (0x80 if block else 0)]) + bits.done()


def _pack(codes_and_widths) -> bytes:
    bits = _Bits()
    for code, width in codes_and_widths:
        bits.put(code, width)
    return bits.done()


# --- LZW decoder -------------------------------------------------------------------------------

def test_lzw_hand_made_clear():
    # block mode, max 16 bits: a b <257=ab> CLEAR, 4 zero codes to end the 8-code group, then c <257=cc (KwKwK)>
    codes = [(97, 9), (98, 9), (257, 9), (256, 9)] + [(0, 9)] * 4 + [(99, 9), (257, 9)]
    data = b"\x1f\x9d\x90" + _pack(codes)
    assert lzw.decompress(data) == b"ababccc"


def test_lzw_hand_made_width_change():
    # no block mode: entries start at 256; after 257 nine-bit codes the table has 512 entries,
    # so the width becomes 10 and the rest of the 8-code group (7 codes = 63 bits) is skipped.
    lits = [i % 256 for i in range(257)]
    codes = [(c, 9) for c in lits] + [(0, 9)] * 7 + [(256, 10), (511, 10), (65, 10)]
    data = b"\x1f\x9d\x10" + _pack(codes)
    # 256 = lits[0]+lits[1][0] = 00 01; 511 = lits[255] + lits[256][0] = ff 00
    expected = bytes(lits) + b"\x00\x01" + b"\xff\x00" + b"A"
    assert lzw.decompress(data) == expected


def test_lzw_block_mode_9_to_10_bits_then_clear():
    # 256 nine-bit literals (no padding needed in block mode), a 10-bit back reference, a CLEAR at 10 bits
    lits = [i % 256 for i in range(256)]
    codes = [(c, 9) for c in lits] + [(257, 10), (256, 10)] + [(0, 10)] * 6 + [(66, 9), (66, 9), (257, 9)]
    data = b"\x1f\x9d\x8c" + _pack(codes)
    assert lzw.decompress(data) == bytes(lits) + b"\x00\x01" + b"BBBB"


@pytest.mark.parametrize("max_bits, block, clear_every", [(16, True, None), (9, True, None), (12, True, 700),
                                                        (10, False, None), (16, True, 300)])
def test_lzw_roundtrip(max_bits, block, clear_every):
    rng = np.random.default_rng(max_bits)
    text = (",".join(f"{v:.4f}" for v in rng.uniform(-1, 1, 6000)).encode()
            + bytes(rng.integers(0, 256, 3000, dtype=np.uint8)))
    z = lzw_compress(text, max_bits=max_bits, block=block, clear_every=clear_every)
    assert lzw.decompress(z) == text
    if shutil.which("gzip"):  # gzip's unlzw is the reference reader; it checks the fixture encoder too
        assert subprocess.run(["gzip", "-dc"], input=z, capture_output=True, check=True).stdout == text


@pytest.mark.skipif(not shutil.which("compress"), reason="needs the compress program (ncompress)")
def test_lzw_real_compress_output():
    rng = np.random.default_rng(5)
    text = ",".join(f"{v:.4f}" for v in rng.uniform(-1, 1, 30000)).encode()
    data = text + bytes(rng.integers(0, 256, 40000, dtype=np.uint8)) + text  # random middle forces CLEARs
    for b in ("-b10", "-b16"):
        z = subprocess.run(["compress", "-c", b], input=data, capture_output=True, check=True).stdout
        assert lzw.decompress(z) == data


def test_lzw_errors():
    with pytest.raises(lzw.LZWError, match="magic"):
        lzw.decompress(b"\x1f\x8b\x08")
    with pytest.raises(lzw.LZWError, match="width 20"):
        lzw.decompress(b"\x1f\x9d\x94")
    with pytest.raises(lzw.LZWError, match="invalid code"):
        lzw.decompress(b"\x1f\x9d\x90" + _pack([(97, 9), (400, 9)]))
    assert lzw.decompress(b"\x1f\x9d\x90") == b""


# --- local HTTP server -------------------------------------------------------------------------

class _Handler(http.server.SimpleHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self):
        _Handler.requests.append(self.path)
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    """(base URL, served folder); stopped at the end of the test."""
    root = tmp_path / "www"
    root.mkdir()
    _Handler.requests = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(root)))
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/", root
    finally:
        httpd.shutdown()
        httpd.server_close()
        t.join(5)


def _dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/"


def _empty(d: Path) -> bool:
    return not d.exists() or not any(d.iterdir())


# --- MNIST ---------------------------------------------------------------------------------------

def _idx(a: np.ndarray) -> bytes:
    return bytes([0, 0, 8, a.ndim]) + np.array(a.shape, dtype=">u4").tobytes() + a.tobytes()


@pytest.fixture
def fake_mnist(server, monkeypatch):
    """Tiny idx gz files (30 train + 10 test images) served locally; checksums patched to match."""
    url, root = server
    rng = np.random.default_rng(0)
    arrays = {}
    for split, n in (("train", 30), ("t10k", 10)):
        y = np.concatenate([np.arange(10), rng.integers(0, 10, n - 10)]).astype(np.uint8)
        X = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        arrays[split] = (X, y)
        for kind, a in (("images-idx3", X), ("labels-idx1", y)):
            raw = _idx(a)
            fname = f"{split}-{kind}-ubyte.gz"
            (root / fname).write_bytes(gzip.compress(raw))
            monkeypatch.setitem(mnist.IDX_MD5, fname, hashlib.md5(raw).hexdigest())
    X = np.concatenate([arrays["train"][0], arrays["t10k"][0]]).reshape(40, 784)
    y = np.concatenate([arrays["train"][1], arrays["t10k"][1]])
    monkeypatch.setattr(mnist, "CLASS_COUNTS", tuple(np.bincount(y, minlength=10).tolist()))
    monkeypatch.setitem(mnist.ARRAY_SHA256, "X", hashlib.sha256(X.tobytes()).hexdigest())
    monkeypatch.setitem(mnist.ARRAY_SHA256, "y", hashlib.sha256(y.tobytes()).hexdigest())
    monkeypatch.setenv("LGCEXP_MNIST_URL", url)
    return X, y, root


def test_mnist_defaults_are_published():
    assert mnist.IDX_MD5 == {
        "train-images-idx3-ubyte.gz": "6bbc9ace898e44ae57da46a324031adb",
        "train-labels-idx1-ubyte.gz": "a25bea736e30d166cdddb491f175f624",
        "t10k-images-idx3-ubyte.gz": "2646ac647ad5339dbf082846283269ea",
        "t10k-labels-idx1-ubyte.gz": "27ae3e4e09519cfbb04c329615203637",
    }
    assert mnist.ARRAY_SHA256["X"].startswith("5b92582e") and mnist.ARRAY_SHA256["y"].startswith("671ff9d7")
    assert mnist.BASE_URLS[0] == "https://ossci-datasets.s3.amazonaws.com/mnist/"


def test_mnist_download_success_and_no_redownload(fake_mnist, tmp_path, monkeypatch):
    X, y, _ = fake_mnist
    data_dir = tmp_path / "new" / "dir"
    d = load_dataset("mnist", data_dir=str(data_dir))
    assert d.X.shape == (40, 784) and d.X.dtype == np.float32 and d.y.dtype == np.int64
    assert np.array_equal(d.X, X.astype(np.float32)) and np.array_equal(d.y, y)
    assert sorted(p.name for p in data_dir.iterdir()) == ["mnist.npz"]  # no temp file left
    with np.load(data_dir / "mnist.npz") as z:
        assert z["X"].dtype == np.uint8 and np.array_equal(z["X"], X) and np.array_equal(z["y"], y)
    assert len(_Handler.requests) == 4
    monkeypatch.setenv("LGCEXP_MNIST_URL", _dead_url())
    again = load_dataset("mnist", data_dir=str(data_dir))
    assert len(_Handler.requests) == 4 and again.fingerprint() == d.fingerprint()


@pytest.mark.parametrize("damage", ["md5", "truncated"])
def test_mnist_corrupted_download(fake_mnist, tmp_path, damage):
    _, _, root = fake_mnist
    f = root / "train-labels-idx1-ubyte.gz"
    if damage == "md5":
        raw = bytearray(gzip.decompress(f.read_bytes()))
        raw[-1] ^= 1
        f.write_bytes(gzip.compress(bytes(raw)))
    else:
        f.write_bytes(f.read_bytes()[:-12])
    data_dir = tmp_path / "data"
    with pytest.raises(UserError) as e:
        load_dataset("mnist", data_dir=str(data_dir))
    msg = str(e.value)
    assert "train-labels-idx1-ubyte.gz" in msg and "corrupted" in msg and "\n" not in msg
    if damage == "md5":
        assert mnist.IDX_MD5["train-labels-idx1-ubyte.gz"] in msg
    assert _empty(data_dir)


def test_mnist_array_sha_mismatch(fake_mnist, tmp_path, monkeypatch):
    monkeypatch.setitem(mnist.ARRAY_SHA256, "X", "0" * 64)
    with pytest.raises(UserError, match="sha256 of X"):
        load_dataset("mnist", data_dir=str(tmp_path / "data"))
    assert _empty(tmp_path / "data")


def test_mnist_unreachable(tmp_path, monkeypatch):
    dead = _dead_url()
    monkeypatch.setenv("LGCEXP_MNIST_URL", dead)
    data_dir = tmp_path / "data"
    with pytest.raises(UserError) as e:
        load_dataset("mnist", data_dir=str(data_dir))
    msg = str(e.value)
    assert "train-images-idx3-ubyte.gz" in msg and dead + "train-images-idx3-ubyte.gz" in msg
    assert f"put mnist.npz in {data_dir}" in msg and "\n" not in msg
    assert _empty(data_dir)


def test_mnist_raw_files_in_data_dir(fake_mnist, tmp_path, monkeypatch):
    X, _, root = fake_mnist
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for f in root.iterdir():
        shutil.copy(f, data_dir / f.name)
    monkeypatch.setenv("LGCEXP_MNIST_URL", _dead_url())
    d = load_dataset("mnist", data_dir=str(data_dir))
    assert np.array_equal(d.X, X) and len(_Handler.requests) == 0
    assert len(list(data_dir.iterdir())) == 5


def test_atomic_write_failure_leaves_nothing(tmp_path, monkeypatch):
    def boom(f, **arrays):
        f.write(b"half a file")
        raise RuntimeError("disk full")

    monkeypatch.setattr(np, "savez_compressed", boom)
    with pytest.raises(RuntimeError):
        atomic_save_npz(tmp_path / "x.npz", {"X": np.zeros(3)}, compressed=True)
    assert list(tmp_path.iterdir()) == []


# --- ISOLET ---------------------------------------------------------------------------------------

def _isolet_text(X: np.ndarray, y: np.ndarray) -> bytes:
    return "".join(", ".join(f"{v:.4f}" for v in row) + f", {lab + 1}.\n" for row, lab in zip(X, y)).encode()


@pytest.fixture
def fake_isolet(server, monkeypatch):
    """A tiny ISOLET (5 features; parts of 52 rows = 2 per letter) as a zip of .Z members, served locally."""
    url, root = server
    rng = np.random.default_rng(1)
    y_train = np.concatenate([np.repeat(np.arange(26), 2)] * 3 + [np.delete(np.repeat(np.arange(26), 2), [10, 24])])
    y_test = np.arange(26)
    X_train = np.round(rng.uniform(-1, 1, (y_train.size, 5)), 4)
    X_test = np.round(rng.uniform(-1, 1, (y_test.size, 5)), 4)
    texts = {"isolet1+2+3+4.data": _isolet_text(X_train, y_train), "isolet5.data": _isolet_text(X_test, y_test)}
    monkeypatch.setattr(isolet, "PARTS", (("isolet1+2+3+4.data", y_train.size), ("isolet5.data", y_test.size)))
    monkeypatch.setattr(isolet, "N_FEATURES", 5)
    monkeypatch.setattr(isolet, "PART_SIZE", 52)
    y = np.concatenate([y_train, y_test])
    monkeypatch.setattr(isolet, "CLASS_COUNTS", tuple(np.bincount(y, minlength=26).tolist()))
    monkeypatch.setenv("LGCEXP_ISOLET_URL", url)

    def write_zip(compressed: bool = True, texts=texts):
        with zipfile.ZipFile(root / "isolet.zip", "w") as zf:
            for name, text in texts.items():
                if compressed:
                    zf.writestr(name + ".Z", lzw_compress(text, clear_every=150))
                else:
                    zf.writestr("isolet/" + name, text)

    write_zip()
    X = np.concatenate([X_train, X_test]).astype(np.float32)
    return X, y, root, write_zip, texts


@pytest.mark.parametrize("compressed", [True, False])
def test_isolet_download_success(fake_isolet, tmp_path, monkeypatch, compressed):
    X, y, _, write_zip, _ = fake_isolet
    write_zip(compressed)
    data_dir = tmp_path / "data"
    d = load_dataset("isolet", data_dir=str(data_dir))
    assert np.array_equal(d.X, X) and np.array_equal(d.y, y) and d.n_classes == 26
    assert sorted(p.name for p in data_dir.iterdir()) == ["isolet.npz"]
    with np.load(data_dir / "isolet.npz") as z:
        assert z["X"].dtype == np.float32 and z["y"].dtype == np.uint8
        assert z["part"].tolist() == [1] * 52 + [2] * 52 + [3] * 52 + [4] * 50 + [5] * 26
    n_req = len(_Handler.requests)
    monkeypatch.setenv("LGCEXP_ISOLET_URL", _dead_url())
    assert load_dataset("isolet", data_dir=str(data_dir)).fingerprint() == d.fingerprint()
    assert len(_Handler.requests) == n_req == 1


def test_isolet_corrupted_zip(fake_isolet, tmp_path):
    root = fake_isolet[2]
    z = root / "isolet.zip"
    z.write_bytes(z.read_bytes()[: z.stat().st_size // 2])
    with pytest.raises(UserError, match=r"isolet\.zip from http://127\.0\.0\.1:\d+/isolet\.zip: corrupted"):
        load_dataset("isolet", data_dir=str(tmp_path / "data"))
    assert _empty(tmp_path / "data")


def test_isolet_corrupted_lzw_member(fake_isolet, tmp_path):
    _, _, root, _, texts = fake_isolet
    with zipfile.ZipFile(root / "isolet.zip", "w") as zf:
        zf.writestr("isolet1+2+3+4.data.Z", b"\x1f\x9d\x90" + _pack([(97, 9), (500, 9)]))
        zf.writestr("isolet5.data", texts["isolet5.data"])
    with pytest.raises(UserError, match=r"corrupted: isolet1\+2\+3\+4\.data\.Z: invalid code"):
        load_dataset("isolet", data_dir=str(tmp_path / "data"))
    assert _empty(tmp_path / "data")


def test_isolet_wrong_rows_and_class_counts(fake_isolet, tmp_path, monkeypatch):
    _, _, _, write_zip, texts = fake_isolet
    lines = texts["isolet5.data"].splitlines(keepends=True)
    write_zip(texts={**texts, "isolet5.data": b"".join(lines[:-1])})
    with pytest.raises(UserError, match=r"isolet5\.data has 25 rows, expected 26"):
        load_dataset("isolet", data_dir=str(tmp_path / "data"))
    swapped = lines[0].replace(b", 1.\n", b", 2.\n")  # an A becomes a B: same rows, wrong class counts
    write_zip(texts={**texts, "isolet5.data": b"".join([swapped] + lines[1:])})
    with pytest.raises(UserError, match=r"expected class counts \[9, 9, .*found \[8, 10, "):
        load_dataset("isolet", data_dir=str(tmp_path / "data"))
    assert _empty(tmp_path / "data")


def test_isolet_unreachable(tmp_path, monkeypatch):
    dead = _dead_url()
    monkeypatch.setenv("LGCEXP_ISOLET_URL", dead)
    with pytest.raises(UserError) as e:
        load_dataset("isolet", data_dir=str(tmp_path / "d"))
    msg = str(e.value)
    assert ("cannot download isolet.zip" in msg and dead + "isolet.zip" in msg
            and f"put isolet.npz in {tmp_path / 'd'}" in msg)


def test_isolet_defaults():
    assert isolet.BASE_URLS[0] + isolet.ZIP_NAME == "https://archive.ics.uci.edu/static/public/54/isolet.zip"
    assert sum(isolet.CLASS_COUNTS) == 7797 and isolet.CLASS_COUNTS[5] == 298 and isolet.CLASS_COUNTS[12] == 299


def test_parse_data_uci_format(monkeypatch):
    monkeypatch.setattr(isolet, "N_FEATURES", 3)
    X, y = isolet.parse_data(b"-0.4394,-0.0930,0.1718,1.\r\n0.5, 1.0000, -1.0000, 26.\r\n", "t")
    assert X.dtype == np.float32 and X.tolist()[1] == [0.5, 1.0, -1.0] and y.tolist() == [0, 25]
    with pytest.raises(UserError, match="labels 1..26"):
        isolet.parse_data(b"0,0,0,27.\n", "t")
    with pytest.raises(UserError, match="4 comma-separated values"):
        isolet.parse_data(b"0,0,1.\n", "t")


@pytest.mark.slow
def test_mnist_build_from_real_idx_with_published_checksums(tmp_path, monkeypatch):
    """Rebuild the four idx files from the shared mnist.npz, convert them with the default md5/sha256."""
    import os

    shared = Path(os.environ.get("LGCEXP_DATA_DIR", "/nonexistent")).expanduser() / "mnist.npz"
    if not shared.is_file():
        pytest.skip("set LGCEXP_DATA_DIR to a directory holding mnist.npz")
    with np.load(shared) as z:
        X, y = z["X"], z["y"]
    parts = {"train-images-idx3-ubyte.gz": X[:60000].reshape(-1, 28, 28), "train-labels-idx1-ubyte.gz": y[:60000],
             "t10k-images-idx3-ubyte.gz": X[60000:].reshape(-1, 28, 28), "t10k-labels-idx1-ubyte.gz": y[60000:]}
    for name, a in parts.items():
        (tmp_path / name).write_bytes(_idx(a))  # not gzipped: accepted as is, saves time
    monkeypatch.setenv("LGCEXP_MNIST_URL", _dead_url())
    d = load_dataset("mnist", data_dir=str(tmp_path))
    assert d.fingerprint() == load_dataset("mnist", data_dir=str(shared.parent)).fingerprint()
