"""Benchmark of the graph builders (issue #10): exact kNN (graph=knn) against the approximate faiss indexes
(graph=knn_approx, index=hnsw and ivf, their defaults unless given) on the paper's graph settings, in one
process, without the cache. Reports build seconds, recall@k (measured by the builder against exact search
on 1000 seeded queries), and the share of the exact graph's edges the approximate graph has.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks knn_approx --dataset isolet --dataset mnist

Timings on a shared machine vary with its load: compare only the rows of one run.
"""
from __future__ import annotations

import argparse
import json
import os
import time

from benchmarks.common import GRAPH, data_dir


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", action="append", choices=sorted(GRAPH))
    ap.add_argument("--index", action="append", choices=["hnsw", "ivf"])
    ap.add_argument("--params", default="{}", help="JSON of extra knn_approx parameters, e.g. '{\"ef_search\": 64}'")
    args = ap.parse_args(argv)

    import faiss

    from lgcexp.data import load_dataset
    from lgcexp.graph.knn import KnnGraph
    from lgcexp.graph.knn_approx import KnnApproxGraph

    extra = json.loads(args.params)
    print(f"# faiss {faiss.__version__}, {faiss.omp_get_max_threads()} threads, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for name in args.dataset or ["isolet", "mnist"]:
        data = load_dataset(name, data_dir=data_dir(), download=False)
        k, sigma = GRAPH[name]
        t0 = time.perf_counter()
        exact, _ = KnnGraph(k=k, sigma=sigma).build(data.X)
        t_exact = time.perf_counter() - t0
        print(json.dumps({"dataset": name, "n": data.n, "d": data.X.shape[1], "k": k, "builder": "knn",
                          "seconds": round(t_exact, 1), "edges": exact.n_edges}), flush=True)
        E = exact.W != 0
        for index in args.index or ["hnsw", "ivf"]:
            b = KnnApproxGraph(k=k, sigma=sigma, index=index, **extra)
            t0 = time.perf_counter()
            g, _ = b.build(data.X)
            t = time.perf_counter() - t0
            shared = E.multiply(g.W != 0).nnz / E.nnz
            params = {kk: v for kk, v in b.get_params().items()
                      if kk in (("M", "ef_construction", "ef_search") if index == "hnsw" else ("nlist", "nprobe"))}
            print(json.dumps({"dataset": name, "builder": "knn_approx", "index": index, **params,
                              "seconds": round(t, 1), "speedup": round(t_exact / t, 2),
                              "recall_at_k": g.info["recall_at_k"], "recall_queries": g.info["recall_queries"],
                              "search_seconds": g.info["search_seconds"], "recall_seconds": g.info["recall_seconds"],
                              "nlist_used": g.info.get("nlist"), "exact_edges_kept": round(shared, 4),
                              "sigma": g.sigma, "sigma_exact": exact.sigma}), flush=True)
