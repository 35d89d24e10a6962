"""``label_issue_pages.pdf``: every flagged label of image data, one row per flag, beside its neighbours.

A diagnosis run on image data (a shape the data set records, e.g. MNIST's 28 x 28, an npz whose X is
(n, h, w[, c]), or a square number of columns; :func:`lgcexp.issues.diagnosis.image_shape`) writes one page
after another of :data:`ROWS_PER_PAGE` rows, the flags in the order of ``label_issues.csv`` (the clearly
``wrong`` first, each kind most suspicious first). Each row shows the flagged image (red frame), then its
nearest labelled neighbours of the given class (blue frames) and of the suggested class (orange frames):
the heaviest edges of the point's row of the graph ``W`` to other labelled points of that class — the
neighbours whose labels voted on it (``label_issue_evidence.csv`` lists the heaviest of every class) —, and,
where the graph holds fewer than :data:`NEIGHBOURS_SHOWN` of a class (a clearly wrong label often has no graph
neighbour of its given class), the nearest labelled points of that class by Euclidean distance between the
rows of X (the pixels, whatever the graph was built on). The row's title reads its rank, index,
``given -> suggested`` in the file's label values, ``label_quality`` to three significant digits (the value
that ranks it) and ``issue_type``; under each neighbour its index and ``w=`` its edge weight (a graph
neighbour) or ``d=`` its distance (one found in X).

Bounded: at most :data:`MAX_PAGES` pages (the first ``MAX_PAGES * ROWS_PER_PAGE`` flags; the cap is logged
and recorded in ``result.json``'s ``label_issue_pages``); each row is one raster (the tiles side by side),
so a page costs a few axes whatever its number of tiles.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .explain import labelled_neighbours, table_order

log = logging.getLogger("lgcexp")

__all__ = ["PAGES_FILE", "ROWS_PER_PAGE", "NEIGHBOURS_SHOWN", "MAX_PAGES", "FlagRow", "format_quality",
           "flag_rows", "class_neighbours", "feature_neighbours", "image_tile", "write_pages", "report_issue_pages"]

PAGES_FILE = "label_issue_pages.pdf"
#: flags per page
ROWS_PER_PAGE = 5
#: labelled neighbours shown per class (given, suggested)
NEIGHBOURS_SHOWN = 4
#: pages at most: 1,500 flags (measured: 300 pages of MNIST images with a 70,000-point graph in 41 s, 8.3 MB)
MAX_PAGES = 300
#: labelled rows read at a time by the search in the features
SEARCH_BLOCK = 2048
#: font size of every text on a page (points)
FONT = 9

_RED, _BLUE, _ORANGE = (0.75, 0.22, 0.17), (0.16, 0.37, 0.66), (0.87, 0.52, 0.32)


@dataclass(frozen=True)
class FlagRow:
    """One flag of the pages: ``rank`` (1 = most suspicious), the data row ``index``, the ``given`` and
    ``suggested`` labels in the file's values, ``quality`` (``label_quality``), ``issue_type``, and the
    labelled neighbours of the given and of the suggested class as (data row, value, kind), nearest first:
    kind ``"w"``, a graph neighbour with its edge weight, heaviest first; then ``"d"``, the nearest in the
    features with its distance."""

    rank: int
    index: int
    given: Any
    suggested: Any
    quality: float
    issue_type: str
    given_neighbours: tuple[tuple[int, float, str], ...] = ()
    suggested_neighbours: tuple[tuple[int, float, str], ...] = ()

    @property
    def title(self) -> str:
        kind = f"   {self.issue_type}" if self.issue_type else ""
        return (f"{self.rank}. #{self.index}   given {self.given} \u2192 suggested {self.suggested}   "
                f"quality {format_quality(self.quality)}{kind}")


def format_quality(q: float) -> str:
    """A label quality to three significant digits (``1.23e-05``, ``0.0421``, ``0.5``): the flags' qualities
    are often far below 0.01, so a fixed two decimals would print ``0.00`` for all of them."""
    q = float(q)
    return "nan" if not np.isfinite(q) else f"{q:.3g}"


def class_neighbours(W: Any, labeled: np.ndarray, y: np.ndarray, rows: np.ndarray, cls: np.ndarray,
                     m: int = NEIGHBOURS_SHOWN) -> list[tuple[tuple[int, float, str], ...]]:
    """For each labelled row ``rows[t]`` (a position in ``labeled``): its ``m`` heaviest edges in ``W`` to
    other labelled points whose given class is ``cls[t]``, as (data row, weight, "w"), ties by data row
    (:func:`lgcexp.issues.explain.labelled_neighbours`)."""
    return [tuple((int(j), float(w), "w") for j, w in zip(js, ws))
            for js, ws in labelled_neighbours(W, labeled, y, rows, m, cls=np.asarray(cls))]


def feature_neighbours(X: Any, labeled: np.ndarray, y: np.ndarray, points: np.ndarray, cls: np.ndarray,
                       m: int = NEIGHBOURS_SHOWN) -> list[tuple[tuple[int, float, str], ...]]:
    """For each data row ``points[t]``: the ``m`` labelled points of given class ``cls[t]`` nearest to it in
    ``X`` (Euclidean; itself left out), as (data row, distance, "d"), nearest first, ties by data row. Reads the
    labelled rows of a class :data:`SEARCH_BLOCK` at a time (a memory-mapped X is never read whole at once)."""
    labeled = np.asarray(labeled)
    y = np.asarray(y)
    points = np.asarray(points, dtype=np.int64)
    cls = np.asarray(cls)
    out: list[tuple[tuple[int, float, str], ...]] = [()] * points.size
    for c in np.unique(cls):
        which = np.flatnonzero(cls == c)
        members = labeled[y == c]
        Q = np.asarray(X[points[which]], dtype=np.float64)
        qq = np.einsum("ij,ij->i", Q, Q)
        best_d = np.empty((which.size, 0))
        best_i = np.empty((which.size, 0), dtype=np.int64)
        for start in range(0, members.size, SEARCH_BLOCK):
            idx = members[start:start + SEARCH_BLOCK]
            B = np.asarray(X[idx], dtype=np.float64)
            D = np.maximum(qq[:, None] - 2.0 * (Q @ B.T) + np.einsum("ij,ij->i", B, B)[None, :], 0.0)
            D[points[which][:, None] == idx[None, :]] = np.inf
            best_d = np.concatenate([best_d, D], axis=1)
            best_i = np.concatenate([best_i, np.broadcast_to(idx, D.shape)], axis=1)
            keep = np.lexsort((best_i, best_d), axis=1)[:, :m]
            best_d = np.take_along_axis(best_d, keep, axis=1)
            best_i = np.take_along_axis(best_i, keep, axis=1)
        for t, w in enumerate(which):
            out[w] = tuple((int(i), float(np.sqrt(d)), "d") for i, d in zip(best_i[t], best_d[t]) if np.isfinite(d))
    return out


def _fill(graph_nb: list[tuple], X: Any, labeled: np.ndarray, y: np.ndarray, points: np.ndarray,
          cls: np.ndarray, m: int) -> list[tuple]:
    """The graph's neighbours, completed to ``m`` by the nearest in the features where they are fewer."""
    short = np.flatnonzero([len(nb) < m for nb in graph_nb])
    if X is None or short.size == 0:
        return graph_nb
    near = feature_neighbours(X, labeled, y, points[short], cls[short], m)
    out = list(graph_nb)
    for t, extra in zip(short, near):
        have = {j for j, _, _ in out[t]}
        out[t] = tuple(out[t]) + tuple(e for e in extra if e[0] not in have)[: m - len(out[t])]
    return out


def flag_rows(judged: Any, labeled: np.ndarray, y: np.ndarray, classes: np.ndarray, W: Any = None,
              X: Any = None, m: int = NEIGHBOURS_SHOWN, limit: int | None = None) -> list[FlagRow]:
    """The flags of ``judged`` (:class:`lgcexp.issues.judge.JudgedLabels` over ``labeled``, given classes
    ``y``) in the order of ``label_issues.csv``'s flagged rows, the first ``limit`` (None: all), each with its
    ``m`` nearest labelled neighbours of the given and of the suggested class in the graph ``W``, completed by
    the nearest in the features ``X`` where the graph has fewer (None: not used)."""
    labeled = np.asarray(labeled)
    y = np.asarray(y, dtype=np.int64)
    classes = np.asarray(classes)
    flag = np.asarray(judged.is_issue, dtype=bool)
    types = np.asarray(judged.issue_type, dtype=object)
    quality = np.asarray(judged.quality, dtype=np.float64)
    suggested = np.asarray(judged.suggested, dtype=np.int64)
    order = table_order(labeled, quality, flag, types)[: int(flag.sum())]
    if limit is not None:
        order = order[:limit]
    empty: list[tuple] = [()] * order.size
    given_nb = empty if W is None else class_neighbours(W, labeled, y, order, y[order], m)
    sugg_nb = empty if W is None else class_neighbours(W, labeled, y, order, suggested[order], m)
    given_nb = _fill(given_nb, X, labeled, y, labeled[order], y[order], m)
    sugg_nb = _fill(sugg_nb, X, labeled, y, labeled[order], suggested[order], m)
    sugg_nb = [() if s == g else nb for s, g, nb in zip(suggested[order], y[order], sugg_nb)]
    return [FlagRow(rank=t + 1, index=int(labeled[r]), given=classes[y[r]], suggested=classes[suggested[r]],
                    quality=float(quality[r]), issue_type=str(types[r]), given_neighbours=given_nb[t],
                    suggested_neighbours=sugg_nb[t]) for t, r in enumerate(order)]


def image_tile(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """One image as RGB in [0, 1] (h, w, 3): grey images dark on white (as ``gray_r``), colour images as
    they are; each scaled by its own range."""
    img = np.asarray(x, dtype=np.float64).reshape(tuple(shape))
    if img.ndim == 3 and img.shape[2] == 1:
        img = img[:, :, 0]
    lo, hi = float(np.min(img)), float(np.max(img))
    img = (img - lo) / (hi - lo) if hi > lo else np.zeros_like(img)
    if img.ndim == 2:
        return np.repeat((1.0 - img)[:, :, None], 3, axis=2)
    if img.shape[2] >= 3:
        return img[:, :, :3]
    return np.repeat(img.mean(axis=2)[:, :, None], 3, axis=2)


def _short(v: float) -> str:
    """A weight or distance in a few characters: three significant digits, or a whole number from 100."""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _mosaic(X: Any, shape: Sequence[int], row: FlagRow, m: int) -> tuple[np.ndarray, list[tuple[float, str]]]:
    """The row's tiles side by side (framed; a gap between the groups) and each tile's (centre x, caption)."""
    h, w = int(shape[0]), int(shape[1])
    f = max(1, round(min(h, w) / 14))  # frame width in pixels
    th, tw = h + 2 * f, w + 2 * f
    gap = tw // 2
    width = tw * (1 + 2 * m) + 2 * gap
    canvas = np.ones((th, width, 3))
    captions: list[tuple[float, str]] = []

    def put(slot_x: int, i: int, colour: tuple[float, float, float], caption: str) -> None:
        canvas[:, slot_x:slot_x + tw] = colour
        canvas[f:f + h, slot_x + f:slot_x + f + w] = image_tile(X[i], shape)
        captions.append((slot_x + tw / 2 - 0.5, caption))

    put(0, row.index, _RED, f"#{row.index}")
    for g, (nbs, colour) in enumerate(((row.given_neighbours, _BLUE), (row.suggested_neighbours, _ORANGE))):
        start = tw + gap + g * (m * tw + gap)
        for t, (j, v, kind) in enumerate(nbs[:m]):
            put(start + t * tw, j, colour, f"#{j}\n{kind}={_short(v)}")
    return canvas, captions


def write_pages(rows: Sequence[FlagRow], X: Any, shape: Sequence[int], path: Path, n_flagged: int | None = None,
                rows_per_page: int = ROWS_PER_PAGE, m: int = NEIGHBOURS_SHOWN) -> int:
    """Write ``rows`` to the multi-page PDF ``path`` (``rows_per_page`` a page); ``n_flagged``: the number of
    flags in all (for the page headers; default ``len(rows)``). Returns the number of pages."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    from ..cache import atomic_open

    n_flagged = len(rows) if n_flagged is None else n_flagged
    n_pages = math.ceil(len(rows) / rows_per_page)
    with atomic_open(path) as fh, PdfPages(fh) as pdf:
        for p in range(n_pages):
            chunk = rows[p * rows_per_page:(p + 1) * rows_per_page]
            fig = plt.figure(figsize=(11.69, 8.27))  # A4 landscape
            fig.text(0.5, 0.985, f"flagged labels {chunk[0].rank}\u2013{chunk[-1].rank} of {n_flagged}, most "
                     f"suspicious first (page {p + 1} of {n_pages})", ha="center", va="top", fontsize=FONT + 2)
            fig.text(0.5, 0.962, "red: the flagged image;  blue: its nearest labelled points of the given class;  "
                     "orange: of the suggested class\nw: weight of a graph edge (a neighbour that voted);  "
                     "d: distance in the pixels (the nearest of that class where the graph has too few)",
                     ha="center", va="top", fontsize=FONT)
            height = 0.92 / rows_per_page
            for t, row in enumerate(chunk):
                ax = fig.add_axes((0.02, 0.92 - (t + 1) * height + 0.05, 0.96, height - 0.08))
                canvas, captions = _mosaic(X, shape, row, m)
                ax.imshow(canvas, interpolation="nearest", aspect="equal")
                ax.set_axis_off()
                ax.set_title(row.title, loc="left", fontsize=FONT + 1, color="black")
                note = "" if row.given_neighbours or row.suggested_neighbours else "no labelled neighbour found"
                if row.given == row.suggested:
                    note = "suggested = given (its evidence is split)"
                if note:
                    ax.set_title(note, loc="right", fontsize=FONT)
                for x, text in captions:
                    ax.text(x, canvas.shape[0] - 0.5, text, ha="center", va="top", fontsize=FONT,
                            transform=ax.transData, clip_on=False)
            pdf.savefig(fig)
            plt.close(fig)
    return n_pages


def report_issue_pages(judged: Any, labeled: np.ndarray, y: np.ndarray, classes: np.ndarray, X: Any,
                       shape: Sequence[int], W: Any, path: Path, rows_per_page: int = ROWS_PER_PAGE,
                       max_pages: int = MAX_PAGES) -> dict[str, Any] | None:
    """``label_issue_pages.pdf`` for the flags of ``judged`` (None where nothing is flagged): the first
    ``max_pages * rows_per_page`` flags (logged where the cap drops some). Returns what ``result.json``
    records as ``label_issue_pages``."""
    n_flagged = int(np.asarray(judged.is_issue, dtype=bool).sum())
    if n_flagged == 0:
        return None
    limit = max_pages * rows_per_page
    if n_flagged > limit:
        log.warning("%s: the first %d of the %d flags (the cap: %d pages of %d rows); every flag is in "
                    "label_issues.csv", PAGES_FILE, limit, n_flagged, max_pages, rows_per_page)
    rows = flag_rows(judged, labeled, y, classes, W, X, limit=limit)
    pages = write_pages(rows, X, shape, Path(path), n_flagged=n_flagged, rows_per_page=rows_per_page)
    log.info("%s: %d flags on %d pages", PAGES_FILE, len(rows), pages)
    return {"file": PAGES_FILE, "n_flagged": n_flagged, "n_shown": len(rows), "pages": pages,
            "rows_per_page": rows_per_page, "max_pages": max_pages}
