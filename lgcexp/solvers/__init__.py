"""The solver layer: every linear system the methods solve, on one conjugate-gradient loop.

- :mod:`.cg`: the loop (:func:`~lgcexp.solvers.cg.iterate`), its array passes (numpy/scipy or cupy) and
  fused passes (numba), and :func:`~lgcexp.solvers.cg.cg`, the entry for a general symmetric positive
  (semi-)definite operator (the graph-Laplacian systems of GFHF, WNLL, the properly weighted Laplacian,
  Poisson, GTF); :func:`~lgcexp.solvers.cg.on_maxiter` and :class:`~lgcexp.solvers.cg.NotConverged`;
- :mod:`.shifted`: :func:`~lgcexp.solvers.shifted.shifted_solve`, the entry for ``(I - alpha S) X = B`` with
  its strategies (block, fused, multi-shift), the reverse Cuthill-McKee renumbering and the argmax
  certificate;
- :mod:`.fused`: the numba passes (CG's three passes, the certificate's test, multi-shift's updates, SIIS's
  edge pass);
- :mod:`.diagonal`: the diagonal of ``(I - alpha S)^-1`` at the labelled points (unit solves or probing) and
  LGC's leave-one-out scores from it;
- :mod:`.admm`: ADMM's stopping test and penalty adaptation (GTF, LSSC).
"""
