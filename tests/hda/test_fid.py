"""weakspot.hda.fid: the Fréchet distance on known answers, paired FID with its interval, and the ruler it is
computed on (:mod:`weakspot.hda.reference`) ranking visible noise below near-invisible AEs."""

import numpy as np
import pytest
import torch

from weakspot.hda.fid import FidEstimate, fid, frechet_distance, paired_fid


def test_frechet_distance_known_answers():
    g = np.random.default_rng(1)
    A = g.normal(size=(4000, 3))
    assert frechet_distance(A, A) == pytest.approx(0.0, abs=1e-6)
    # same covariance, means 2 apart along one axis: FID = 4 (up to sampling error)
    assert frechet_distance(A, A + np.array([2.0, 0, 0])) == pytest.approx(4.0, abs=1e-6)
    B = g.normal(size=(4000, 3)) * 2.0  # sigma 1 vs 2 per axis: 3 * (1 + 4 - 2 * 2) = 3
    assert frechet_distance(A, B) == pytest.approx(3.0, rel=0.15)
    assert np.isnan(frechet_distance(A[:1], B))  # one sample has no covariance


def _first_two(X):
    """Features: the first two pixels, doubled."""
    return 2.0 * np.asarray(X, np.float64).reshape(len(X), -1)[:, :2]


def test_fid_of_inputs_on_the_features():
    g = np.random.default_rng(2)
    A = g.random((500, 1, 2, 2))
    shifted = A.copy()
    shifted[:, 0, 0, 0] += 0.5  # feature 0 doubled: means 1 apart, same covariance
    assert fid(_first_two, A, shifted) == pytest.approx(1.0, abs=1e-6)
    assert np.isnan(fid(_first_two, A[:1], shifted))


def test_paired_fid_known_answer_interval_and_minimum():
    g = np.random.default_rng(3)
    S = g.random((400, 1, 2, 2)).astype(np.float32)
    C = S.copy()
    C[:, 0, 0, 0] += 0.5  # every pair moved by the same shift: FID exactly 1
    est = paired_fid(_first_two, S, C, bootstrap=50, seed=0)
    assert est.value == pytest.approx(1.0, abs=1e-5) and est.n == 400
    assert est.lo <= est.value <= est.hi and est.hi - est.lo < 0.5
    same = paired_fid(_first_two, S, S, bootstrap=20)
    assert same.value == pytest.approx(0.0, abs=1e-6) and same.lo == 0.0
    assert est.enough(400) and not est.enough(401)
    assert not FidEstimate(float("nan"), 0, 0, 500).enough(2)
    one = paired_fid(_first_two, S[:1], C[:1])
    assert np.isnan(one.value) and one.n == 1
    no_ci = paired_fid(_first_two, S, C, bootstrap=0)
    assert np.isnan(no_ci.lo) and no_ci.value == pytest.approx(est.value)


def test_sign_noise_scores_worse_than_near_invisible_aes():
    """Issue 24: visible +-0.1 sign noise (SSIM about 0.90) must score a worse FID than AEs at SSIM above 0.95 on the
    reference CNN's features (on the audited model's own features the AEs scored 97.6 against the noise's 5.0)."""
    from sklearn.datasets import load_digits

    from weakspot.adversarial.attacks import pgd
    from weakspot.hda.generate import perceptual
    from weakspot.hda.reference import train_reference

    d = load_digits()
    X, y = (d.images / 16.0).astype(np.float32)[:, None], d.target.astype(np.int64)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    Xt, yt = torch.as_tensor(X[:1200]), torch.as_tensor(y[:1200])
    for _ in range(150):
        loss = torch.nn.functional.cross_entropy(net(Xt), yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.eval()
    ref = train_reference(
        X[:1200], y[:1200], 10, width=16, train=1200, epochs=5, seed=0, X_test=X[1200:], y_test=y[1200:]
    )
    assert ref.test_accuracy > 0.8
    Xs, ys = X[1200:], y[1200:]
    xa = pgd(net, torch.as_tensor(Xs), torch.as_tensor(ys), eps=0.03, steps=30).detach()
    i = np.where(net(xa).argmax(1).numpy() != ys)[0]
    noise = np.clip(Xs + 0.1 * np.random.default_rng(0).choice([-1, 1], size=Xs.shape), 0, 1).astype(np.float32)
    ssim = lambda A: float(perceptual(torch.as_tensor(A[i]), torch.as_tensor(Xs[i]), "ssim", 1.0, 1.0).mean())  # noqa
    assert len(i) >= 30 and ssim(xa.numpy()) > 0.95 and ssim(noise) < 0.91
    aes = paired_fid(ref.features, Xs[i], xa.numpy()[i], bootstrap=50)
    noisy = paired_fid(ref.features, Xs[i], noise[i], bootstrap=50)
    assert noisy.lo > aes.hi, (noisy, aes)
