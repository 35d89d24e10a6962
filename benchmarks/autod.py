"""Benchmarks for the eigendecomposition stage and LGC_LVO_AutoD (issue #4).

1. ``eig``: time every eigen solver for the p smallest pairs of L = I - S on the (cached) graph, each in its
   own subprocess with a wall-clock limit; report seconds, CPU seconds, residual and agreement.
2. ``sweep``: with the cached eigenpairs, time the full alpha sweep (both diagonal modes, all losses and the
   LOO accuracy) and compare against recomputing P_LL by the sparse conjugate-gradient solver for each alpha
   (l right-hand sides e_j, j labelled), which also measures the truncation error of the p-term spectral P_LL.

Examples (MNIST graph and eigenpairs come from / go to $LGCEXP_CACHE_DIR):

    OPENBLAS_NUM_THREADS=1 python -m benchmarks autod eig --dataset mnist --p 300 --limit 600 \\
        --solver chebyshev --solver lanczos --solver shift-invert --solver lobpcg
    OPENBLAS_NUM_THREADS=1 python -m benchmarks autod sweep --dataset mnist --p 300

On a shared machine set OPENBLAS_NUM_THREADS=1: OpenBLAS threads that busy-wait for a busy core make
LAPACK/ARPACK many times slower.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from benchmarks.common import GRAPH, LABELS, ROOT, cpu_seconds, load_graph

DEFAULT_SOLVERS = ["chebyshev", "lanczos", "shift-invert", "lobpcg"]


# ------------------------------------------------------------------------------------------------------------
def one_solver(args) -> None:
    """Child process: one solver, JSON on the last stdout line."""
    from lgcexp.spectral import solve_eigenpairs

    data, graph, _ = load_graph(args.dataset)
    opts = json.loads(args.options) if args.options else {}
    c0, t0 = cpu_seconds(), time.perf_counter()
    eig = solve_eigenpairs(graph, args.p, solver=args.solver, tol=args.tol, **opts)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    np.save(args.save, eig.values)
    out = {"solver": args.solver, "options": opts, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
           **{k: v for k, v in eig.summary().items() if k not in ("p",)}}
    print(json.dumps(out), flush=True)


def bench_eig(args) -> None:
    import tempfile

    rows = []
    tmp = tempfile.mkdtemp(prefix="bench_eig_")
    for solver in args.solver or DEFAULT_SOLVERS:
        name, _, opt = solver.partition(":")  # e.g. chebyshev:{"degree":30}
        save = os.path.join(tmp, f"{len(rows)}.npy")
        cmd = [sys.executable, "-m", "benchmarks", "autod", "_one", "--dataset", args.dataset, "--p", str(args.p),
               "--solver", name,
               "--tol", str(args.tol), "--save", save] + (["--options", opt] if opt else [])
        print(f"# {name} {opt} ...", flush=True)
        t0 = time.perf_counter()
        try:
            cp = subprocess.run(cmd, capture_output=True, text=True, timeout=args.limit, cwd=ROOT)
            if cp.returncode != 0:
                row = {"solver": name, "options": opt, "error": (cp.stderr.strip().splitlines() or ["?"])[-1]}
            else:
                row = json.loads(cp.stdout.strip().splitlines()[-1])
                row["values"] = np.load(save)
        except subprocess.TimeoutExpired:
            row = {"solver": name, "options": opt, "error": f"not finished within {args.limit}s",
                   "wall_s": round(time.perf_counter() - t0, 1)}
        rows.append(row)
        print("  ", {k: v for k, v in row.items() if k != "values"}, flush=True)
    ok = [r for r in rows if "values" in r]
    if ok:
        ref = ok[0]["values"]
        for r in ok:
            r["max_dlambda_vs_first"] = float(np.abs(r["values"] - ref).max())
    print("\n| solver | options | wall s | CPU s | max residual | max |dλ| vs first | notes |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['solver']} | {r.get('options') or ''} | {r.get('wall_s', '')} | | | | {r['error']} |")
            continue
        notes = {k: r[k] for k in ("matvecs", "solves", "ncv", "degree", "cut", "cut_seconds", "factor_seconds",
                                   "lu_fill", "block_products", "block") if k in r}
        print(f"| {r['solver']} | {r.get('options') or ''} | {r['wall_s']} | {r['cpu_s']} | {r['residual']:.1e} | "
              f"{r['max_dlambda_vs_first']:.1e} | {notes} |")


# ------------------------------------------------------------------------------------------------------------
def bench_sweep(args) -> None:
    from lgcexp.algorithms.autod import SpectralLOO, alpha_of_x, loo_curves, normalize_rows, select_index, x_grid
    from lgcexp.algorithms.base import one_hot
    from lgcexp.labels import sample_and_corrupt
    from lgcexp.solvers.cg import cg
    from lgcexp.spectral import laplacian_eigenpairs

    data, graph, cache = load_graph(args.dataset)
    t0 = time.perf_counter()
    eig, hit = laplacian_eigenpairs(graph, args.p, cache=cache, solver=args.solver, tol=args.tol)
    print(f"eigenpairs p={args.p}: {'cache hit' if hit else 'solved'} in {time.perf_counter() - t0:.2f}s "
          f"({eig.solver}, residual {eig.residual:.1e})")
    split = sample_and_corrupt(data.y, args.labels or LABELS[args.dataset], args.noise, args.seed)
    labeled, y = split.labeled, split.y_observed
    c = data.n_classes
    Y_L = one_hot(y, c)
    xs = x_grid(args.x_min, args.x_max, args.x_step)

    # -- spectral sweep: best of `repeat` runs of the full computation (precompute + both diagonal modes)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        sl = SpectralLOO(eig.values, eig.vectors[labeled], Y_L)
        curves = {rd: loo_curves(sl, xs, rd) for rd in (True, False)}
        times.append(time.perf_counter() - t0)
    t_spec = min(times)
    # per alpha, one at a time (the O(plc) path the paper describes)
    t0 = time.perf_counter()
    for x in xs:
        a = float(alpha_of_x(x))
        H = sl.propagated(a) - sl.self_influence([a])[0][:, None] * Y_L
        normalize_rows(H, 1e-7)
    t_loop = time.perf_counter() - t0
    i = select_index(curves[True], "acc", "ce")
    print(f"spectral sweep: {xs.size} x values in [{xs[0]:g}, {xs[-1]:g}], l={labeled.size}, c={c}, p={eig.p}: "
          f"{t_spec * 1e3:.1f} ms for both diagonal modes (vectorised), {t_loop * 1e3:.1f} ms one alpha at a "
          f"time ({t_loop / xs.size * 1e6:.0f} us per alpha); chosen x={xs[i]:g}")

    # -- unlabelled accuracy: the spectral prediction (Figure 2's purple curve) vs exact LGC at a few x
    if args.lgc_xs:
        from lgcexp.algorithms.autod import spectral_scores
        from lgcexp.algorithms.lgc import lgc_propagate

        unl = split.unlabeled_mask(graph.n)
        Y = np.zeros((graph.n, c))
        Y[labeled, y] = 1.0
        print("unlabelled accuracy, spectral (p terms) vs exact LGC (CG):")
        for x in [float(v) for v in args.lgc_xs.split(",")]:
            a = float(alpha_of_x(x))
            F_spec = spectral_scores(eig.vectors, sl, [a], np.flatnonzero(unl))[0]
            t0 = time.perf_counter()
            F, it = lgc_propagate(graph.S, Y, a, tol=1e-10)
            print(f"  x={x:6.2f} alpha={a:.5f}: spectral {np.mean(F_spec.argmax(1) == data.y[unl]):.4f}  exact LGC "
                  f"{np.mean(F[unl].argmax(1) == data.y[unl]):.4f}  ({it} CG iterations, "
                  f"{time.perf_counter() - t0:.1f}s)", flush=True)

    # -- the sparse-solver alternative: P_{:,L} = (I - alpha S)^-1 E_L for each alpha (exact, no truncation)
    if args.cg_every <= 0:
        return
    E = np.zeros((graph.n, labeled.size))
    E[labeled, np.arange(labeled.size)] = 1.0
    sel = np.arange(0, xs.size, args.cg_every)
    cg_t, rows = [], []
    for j in sel:
        a = float(alpha_of_x(xs[j]))
        t0 = time.perf_counter()
        X, it, _ = cg(lambda V: V - a * (graph.S @ V), E, tol=args.cg_tol, maxiter=100_000)
        P_LL = X[labeled]
        dt = time.perf_counter() - t0
        cg_t.append(dt)
        G_exact = P_LL @ Y_L
        G_spec = sl.propagated(a)
        d_exact, d_spec = np.diag(P_LL), sl.self_influence([a])[0]
        R_exact, R_spec = G_exact - d_exact[:, None] * Y_L, G_spec - d_spec[:, None] * Y_L  # diagonal removed
        H_exact, H_spec = normalize_rows(R_exact, 1e-7), normalize_rows(R_spec, 1e-7)
        rows.append((xs[j], a, it, dt, np.linalg.norm(G_spec - G_exact) / np.linalg.norm(G_exact),
                     np.abs(d_spec - d_exact).max() / d_exact.max(),
                     np.linalg.norm(R_spec - R_exact) / np.linalg.norm(R_exact),
                     np.mean(H_exact.argmax(1) == H_spec.argmax(1)),
                     np.mean(H_exact.argmax(1) == y), np.mean(H_spec.argmax(1) == y)))
        print(f"  CG x={xs[j]:6.2f} alpha={a:.5f}: {it:4d} iterations, {dt:6.2f}s; spectral vs exact: P_LL Y_L rel. "
              f"error {rows[-1][4]:.2e}, P_ii max rel. error {rows[-1][5]:.2e}, off-diagonal part rel. error "
              f"{rows[-1][6]:.2e}, same LOO prediction {rows[-1][7]:.2f}; LOO acc exact {rows[-1][8]:.3f} "
              f"spectral {rows[-1][9]:.3f}", flush=True)
    est = float(np.mean(cg_t)) * xs.size
    print(f"sparse CG: {len(sel)} of {xs.size} alphas in {sum(cg_t):.1f}s ({np.mean(cg_t):.2f}s per alpha) -> full "
          f"grid ~{est:.0f}s, vs spectral {t_spec:.3f}s (x{est / t_spec:.0f})")
    if args.out:
        np.savetxt(args.out, np.array(rows), delimiter=",", fmt="%.8g",
                   header="x,alpha,cg_iterations,cg_seconds,rel_err_PLLY,rel_err_Pii,rel_err_offdiag,same_loo_pred,"
                          "loo_acc_exact,loo_acc_spectral",
                   comments="")


# ------------------------------------------------------------------------------------------------------------
def run(quick: bool = False) -> dict:
    """Section for ``benchmarks/report.py``: eigen solvers against each other, and the spectral alpha sweep
    against recomputing P_LL by the sparse solver, each pair measured in this same run."""
    from lgcexp.algorithms.autod import SpectralLOO, loo_curves, x_grid
    from lgcexp.algorithms.base import one_hot
    from lgcexp.labels import sample_and_corrupt
    from lgcexp.solvers.cg import cg
    from lgcexp.spectral import laplacian_eigenpairs, solve_eigenpairs

    out: dict = {}
    ds, p = ("digits", 50) if quick else ("isolet", 300)
    _, graph, _ = load_graph(ds)
    for solver in ("chebyshev", "lanczos"):
        t0 = time.perf_counter()
        eig = solve_eigenpairs(graph, p, solver=solver, tol=1e-8)
        out[f"{ds}_eig_p{p}_{solver}_s"] = time.perf_counter() - t0
        out[f"{ds}_eig_p{p}_{solver}_residual"] = float(eig.residual)
    out["speedup_chebyshev_vs_lanczos"] = out[f"{ds}_eig_p{p}_lanczos_s"] / out[f"{ds}_eig_p{p}_chebyshev_s"]

    ds, p = ("digits", 50) if quick else ("mnist", 300)
    data, graph, cache = load_graph(ds)
    t0 = time.perf_counter()
    eig, hit = laplacian_eigenpairs(graph, p, cache=cache)
    out[f"{ds}_eig_p{p}_s"] = time.perf_counter() - t0
    out[f"{ds}_eig_p{p}_cache_hit"] = hit
    split = sample_and_corrupt(data.y, LABELS[ds], 0.0, 0)
    Y_L = one_hot(split.y_observed, data.n_classes)
    xs = x_grid(1, 100, 1)
    t0 = time.perf_counter()
    sl = SpectralLOO(eig.values, eig.vectors[split.labeled], Y_L)
    for rd in (True, False):
        loo_curves(sl, xs, rd)
    t_sweep = time.perf_counter() - t0
    E = np.zeros((graph.n, split.labeled.size))
    E[split.labeled, np.arange(split.labeled.size)] = 1.0
    a = 2.0 ** (-1.0 / 28)
    t0 = time.perf_counter()
    cg(lambda V: V - a * (graph.S @ V), E, tol=1e-6, maxiter=100_000)
    t_cg = time.perf_counter() - t0
    out.update({f"{ds}_sweep_100x_both_modes_s": t_sweep, f"{ds}_pll_cg_one_alpha_s": t_cg,
                f"{ds}_pll_cg_100x_estimate_s": 100 * t_cg, "speedup_spectral_sweep_vs_cg": 100 * t_cg / t_sweep})
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dataset", default="mnist", choices=sorted(GRAPH))
    common.add_argument("--p", type=int, default=300)
    common.add_argument("--tol", type=float, default=1e-8)
    e = sub.add_parser("eig", parents=[common])
    e.add_argument("--solver", action="append", default=[],
                   help='repeatable; options as JSON after a colon, e.g. --solver \'chebyshev:{"degree":30}\' '
                        f'(default: {" ".join(DEFAULT_SOLVERS)})')
    e.add_argument("--limit", type=float, default=900, help="wall-clock seconds per solver")
    s = sub.add_parser("sweep", parents=[common])
    s.add_argument("--solver", default="auto", help="used only when the eigenpairs are not cached")
    s.add_argument("--labels", type=int, default=0)
    s.add_argument("--noise", type=float, default=0.0)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--x-min", type=float, default=1.0)
    s.add_argument("--x-max", type=float, default=100.0)
    s.add_argument("--x-step", type=float, default=1.0)
    s.add_argument("--repeat", type=int, default=3)
    s.add_argument("--cg-every", type=int, default=10, help="CG comparison on every k-th x (0: skip)")
    s.add_argument("--cg-tol", type=float, default=1e-8)
    s.add_argument("--lgc-xs", default="", help="comma list of x: unlabelled accuracy of exact LGC vs spectral")
    s.add_argument("--out", default="", help="CSV of the CG comparison")
    o = sub.add_parser("_one", parents=[common])
    o.add_argument("--solver", required=True)
    o.add_argument("--options", default="")
    o.add_argument("--save", required=True)
    args = ap.parse_args(argv)
    {"eig": bench_eig, "sweep": bench_sweep, "_one": one_solver}[args.cmd](args)
