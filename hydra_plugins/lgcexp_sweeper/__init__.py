"""lgcexp's Hydra sweeper (``hydra/sweeper=lgcexp``, the default): Hydra's basic sweeper with a cheaper
pre-launch check and without duplicate jobs; see :mod:`hydra_plugins.lgcexp_sweeper.sweeper`."""
