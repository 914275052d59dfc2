"""seisgpu.pylops.Kirchhoff: the dot test, PyLops' solvers, least-squares migration."""

import numpy as np
import pytest

pylops = pytest.importorskip("pylops", reason="pylops is not installed: the operator tests are skipped")

from seisgpu import ktm  # noqa: E402
from seisgpu.pylops import Kirchhoff  # noqa: E402

from conftest import survey  # noqa: E402


# The dot test in float32: pylops draws random vectors, nearly orthogonal to the operator's
# outputs, so <y, Ax> is about ||y|| ||Ax|| / sqrt(n) and float32 rounding of the operator's sums
# and of the inner products shows at ~1e-4 relative; 1e-3 passes every draw, a wrong adjoint
# (a sign, a missing weight) fails by far more.
RTOL = 1e-3


def small_op(device="cpu", **options):
    _, geom = survey(n=48, ns=80, seed=11)
    return Kirchhoff(geom["sx"], geom["gx"], 80, 0.004, sy=geom["sy"], gy=geom["gy"], x0=0, dx=25, nx=9, y0=0, dy=25, ny=5,
                     tau0=0, dtau=0.004, ntau=80, velocity=2000, device=device, **options), geom


@pytest.mark.parametrize("options", [{}, dict(no_rho=True, no_weights=True, no_antialias=True), dict(offset_classes=(0, 300, 2))])
def test_dot_test_on_cpu(options):
    op, _ = small_op(**options)
    assert op.shape == (48 * 80, int(np.prod(op.dims)))
    np.random.seed(15)
    assert pylops.utils.dottest(op, *op.shape, rtol=RTOL)


def test_dot_test_on_gpu(gpu):
    op, _ = small_op(device="gpu")
    np.random.seed(15)
    assert pylops.utils.dottest(op, *op.shape, rtol=RTOL)


def test_operator_is_ktm():
    op, geom = small_op()
    d = np.random.default_rng(12).standard_normal(op.dimsd).astype(np.float32)
    img = ktm.migrate(d, 0.004, **geom, x0=0, dx=25, nx=9, y0=0, dy=25, ny=5, tau0=0, dtau=0.004, ntau=80, device="cpu")
    np.testing.assert_array_equal((op.H @ d.ravel()).reshape(op.dims), img.data[0])


def test_grid_from_the_geometry():
    _, geom = survey(n=30, ns=60, seed=13)
    op = Kirchhoff(geom["sx"], geom["gx"], 60, 0.004, sy=geom["sy"], gy=geom["gy"], device="cpu")
    assert op.grid_note is not None
    assert op.dims == (op.grid["nx"], op.grid["ny"], 60)


def test_lsm_reduces_the_residual():
    """A few CGLS iterations fit the data much better than the scaled migration does."""
    _, geom = survey(n=48, ns=80, seed=14, line=True)
    op = Kirchhoff(geom["sx"], geom["gx"], 80, 0.004, x0=0, dx=25, nx=12, y0=0, dy=25, ny=1, tau0=0, dtau=0.004, ntau=80,
                   velocity=2000, device="cpu")
    m_true = np.zeros(op.dims, np.float32)
    m_true[6, 0, 40] = 1.0
    d = op @ m_true.ravel()
    mig = op.H @ d
    # The best scaling of the plain migration, for a fair comparison.
    dm = op @ mig
    alpha = np.vdot(dm, d) / np.vdot(dm, dm)
    r_mig = np.linalg.norm(d - alpha * dm) / np.linalg.norm(d)
    m_ls = pylops.optimization.basic.cgls(op, d, x0=np.zeros(op.shape[1], np.float32), niter=15, show=False)[0]
    r_ls = np.linalg.norm(d - op @ m_ls) / np.linalg.norm(d)
    assert r_ls < 0.5 * r_mig, (r_ls, r_mig)
    m_lsqr = pylops.optimization.basic.lsqr(op, d, x0=np.zeros(op.shape[1], np.float32), niter=15, show=False)[0]
    assert np.linalg.norm(d - op @ m_lsqr) / np.linalg.norm(d) < 0.5 * r_mig
