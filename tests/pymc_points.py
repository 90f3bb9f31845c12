"""Points of a PyMC model's value variables from constrained values (shared by the tests that compare
log densities of two parameterizations)."""

import numpy as np
import pytensor.tensor as pt


def value_point(model, constrained: dict) -> dict:
    """Map constrained values {rv name: array} to the model's value variables."""
    point = {}
    for rv in model.free_RVs:
        value = np.asarray(constrained[rv.name], dtype="float64")
        transform = model.rvs_to_transforms.get(rv)
        if transform is not None:
            value = transform.forward(pt.as_tensor_variable(value), *rv.owner.inputs).eval()
        point[model.rvs_to_values[rv].name] = value
    return point
