"""The fast tier's guard (tests/conftest.py): during a test not marked ``slow`` every sampler, subprocess, process
pool and Dask entry point fails the test with a message naming the marker; a marked test gets the real ones."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import GUARDED, _SEEN, TierViolation


def _call(owner, name):
    """Reach the guarded attribute as the code under test would (methods with a dummy self)."""
    attr = getattr(owner, name)
    return attr(object()) if isinstance(owner, type) else attr()


@pytest.mark.parametrize("owner,name,what", GUARDED, ids=[w for _, _, w in GUARDED])
def test_each_entry_point_fails_an_unmarked_test(owner, name, what, request):
    with pytest.raises(TierViolation, match=r"is not marked slow but starts .*@pytest\.mark\.slow") as caught:
        _call(owner, name)
    assert what in str(caught.value) and request.node.nodeid in str(caught.value)
    request.node.stash[_SEEN].clear()  # the refusal was the point here: do not fail this test at teardown


def test_code_that_catches_exception_does_not_hide_it(request):
    with pytest.raises(TierViolation):
        try:
            subprocess.run(["true"], check=True)
        except Exception:  # noqa: BLE001 - as the CLI's catch-all does
            pass
    assert request.node.stash[_SEEN] == ["a subprocess (subprocess.Popen)"]
    request.node.stash[_SEEN].clear()


@pytest.mark.slow
def test_a_marked_test_gets_the_real_entry_points():
    assert subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True).stdout == "42\n"
    assert all("refuse" not in getattr(getattr(owner, name), "__name__", "") for owner, name, _ in GUARDED)


@pytest.mark.slow
def test_a_run_of_pytest_reports_unmarked_tests_that_spawn(tmp_path):
    """End to end: in a pytest run with this conftest, an unmarked test that starts a subprocess fails naming the
    marker, even when it swallows the error, and the same test marked slow passes."""
    (tmp_path / "conftest.py").write_text((__import__("pathlib").Path(__file__).parent / "conftest.py").read_text())
    (tmp_path / "test_spawn.py").write_text(textwrap.dedent("""
        import subprocess, pytest

        def test_unmarked():
            subprocess.run(["true"])

        def test_unmarked_swallowing():
            try:
                subprocess.run(["true"])
            except Exception:
                pass

        @pytest.mark.slow
        def test_marked():
            subprocess.run(["true"], check=True)
    """))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "markers=slow: s",
                           str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    out = done.stdout
    assert done.returncode == 1, out
    assert "test_unmarked is not marked slow but starts a subprocess (subprocess.Popen). Mark it `@pytest.mark.slow`" in out
    assert "test_unmarked_swallowing is not marked slow" in out
    assert "1 passed" in out and "FAILED" in out
