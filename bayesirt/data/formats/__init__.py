"""Declarations of the data formats that :func:`bayesirt.data.load` reads: one module per reader module of
:mod:`bayesirt.data`, of the same name, defining ``READERS`` (see :mod:`bayesirt.data.registry`), and one module
per evaluation harness in :mod:`.harnesses`, defining ``HARNESS``. They import no reader (no pandas, no
xarray): the command line builds its "reading DATA" flags from them."""
