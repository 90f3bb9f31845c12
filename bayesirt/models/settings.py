"""The choices and defaults of the options of the loading rotations
(:mod:`bayesirt.models.rotation`), which the jobs' declarations name: kept apart from the
computations (NumPy, SciPy) so that building the command-line parser does not import them."""

__all__ = ["ROTATIONS"]

#: Rotations of :func:`~bayesirt.models.rotation.rotate`.
ROTATIONS = ("oblimin", "varimax", "none")
