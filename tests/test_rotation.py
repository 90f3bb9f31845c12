"""Rotations and loading alignment (bayesirt.models.rotation): GPA oblimin/varimax, Tucker congruence,
alignment of loadings and factor correlations. Oracle: factor_analyzer 0.5.1."""

from __future__ import annotations

import numpy as np
import pytest
# shared data fixtures and the factor_analyzer oracle (test_factor.py; tests/ is on sys.path)
from test_factor import oracle, three_factor, two_factor  # noqa: F401

from bayesirt.errors import BayesIRTError
from bayesirt.structure.factor import correlation_matrix, factor_analysis, minres
from bayesirt.models.rotation import align_loadings, align_phi, rotate, tucker_congruence


@pytest.mark.parametrize(("data", "k"), [("two_factor", 2), ("three_factor", 3)])
@pytest.mark.parametrize("method", ["oblimin", "varimax"])
def test_rotation_matches_factor_analyzer(oracle, request, data, k, method):
    """Same unrotated input; the oracle's factors come unordered and unreflected, so they are aligned
    (permutation + sign) before comparing. Its varimax (SVD algorithm) needs tol=0 to run until the
    criterion stops rising; at its default it stops 1e-6 short of the optimum."""
    unrotated, _ = minres(correlation_matrix(request.getfixturevalue(data))[0], k)
    ref = oracle.Rotator(method=method, tol=1e-8 if method == "oblimin" else 0.0, max_iter=100_000)
    ref_loadings = ref.fit_transform(unrotated)
    ours = rotate(unrotated, method)
    aligned, perm, signs, congruence = align_loadings(ref_loadings, ours.loadings)
    np.testing.assert_allclose(aligned, ours.loadings, atol=1e-6)
    np.testing.assert_allclose(congruence, 1.0, atol=1e-9)
    ref_phi = np.eye(k) if ref.phi_ is None else ref.phi_
    np.testing.assert_allclose(align_phi(ref_phi, perm, signs), ours.phi, atol=1e-6)
    assert bool(ours.converged)


def test_rotation_invariants(two_factor, three_factor):
    for data, k in ((two_factor, 2), (three_factor, 3)):
        a, _ = minres(correlation_matrix(data)[0], k)
        for method, gamma in (("oblimin", 0.0), ("oblimin", 0.5), ("varimax", 0.0)):
            rot = rotate(a, method, gamma=gamma)
            np.testing.assert_allclose(rot.loadings @ rot.phi @ rot.loadings.T, a @ a.T, atol=1e-12)
            np.testing.assert_allclose(a @ rot.rotation_matrix, rot.loadings, atol=1e-12)
            np.testing.assert_allclose(np.diag(rot.phi), 1.0, atol=1e-12)
            assert np.all(rot.loadings.sum(axis=0) > 0)
            assert np.all(np.diff(np.sum(rot.loadings ** 2, axis=0)) <= 0)  # ordered by SS loadings
        vm = rotate(a, "varimax")
        np.testing.assert_allclose(vm.rotation_matrix.T @ vm.rotation_matrix, np.eye(k), atol=1e-12)
        np.testing.assert_allclose(vm.phi, np.eye(k), atol=1e-12)
    # gamma changes the criterion (biquartimin vs quartimin) and a stack is rotated matrix by matrix
    a, _ = minres(correlation_matrix(two_factor)[0], 2)
    assert abs(rotate(a, gamma=0.5).phi[0, 1] - rotate(a).phi[0, 1]) > 1e-3
    stacked = rotate(np.stack([a, -a[:, ::-1]]), "oblimin")
    assert stacked.loadings.shape == (2, 8, 2) and stacked.converged.shape == (2,)
    np.testing.assert_allclose(stacked.loadings[0], rotate(a).loadings, atol=1e-12)
    np.testing.assert_allclose(stacked.loadings[1], stacked.loadings[0], atol=1e-6)


def test_alignment_recovers_permuted_flipped_copy(three_factor):
    target = factor_analysis(three_factor, 3)
    perm, signs = np.array([2, 0, 1]), np.array([-1.0, 1.0, -1.0])
    moved = target.loadings[:, perm] * signs
    moved_phi = target.phi[np.ix_(perm, perm)] * np.outer(signs, signs)
    aligned, found, found_signs, congruence = align_loadings(moved, target.loadings)
    np.testing.assert_array_equal(aligned, target.loadings)
    np.testing.assert_allclose(congruence, 1.0, atol=1e-12)
    np.testing.assert_array_equal(moved[:, found] * found_signs, target.loadings)
    np.testing.assert_allclose(align_phi(moved_phi, found, found_signs), target.phi, atol=1e-15)
    stack = align_loadings(np.stack([moved, target.loadings]), target.loadings)
    assert stack[0].shape == (2, 9, 3) and stack[1].shape == (2, 3)
    np.testing.assert_array_equal(stack[0][0], stack[0][1])
    assert float(tucker_congruence([1.0, 2.0, 2.0], [2.0, 4.0, 4.0])) == pytest.approx(1.0)
    assert float(tucker_congruence([1.0, 0.0], [1.0, 1.0])) == pytest.approx(1 / np.sqrt(2))
    assert tucker_congruence(target.loadings, target.loadings).shape == (3,)


def _err(match):
    return pytest.raises(BayesIRTError, match=match)


def test_error_messages():
    with _err("'method' parameter of rotate must be one of"):
        rotate(np.ones((4, 2)), "quartimax")
    with _err(r"shape \(\.\.\., n_items >= 2, n_factors >= 1\)"):
        rotate(np.ones(4))
    with _err(r"cannot be aligned to a target of shape \(8, 2\)"):
        align_loadings(np.ones((8, 3)), np.ones((8, 2)))
