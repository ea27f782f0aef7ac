"""The global distribution of HDA (seeds/004 Sec. 3.2): a VAE's encoder compresses the data, and an adaptive KDE
over the encoded training data -- one Gaussian per training input, centred at its code with the encoder's sigma as
its bandwidth (Eq. 5) -- gives the density of any input's code.

Caveats first:

* The VAE is for compression only (the paper: "not for generating new data"); its decoder serves the RQ1 checks
  (reconstruction error, decoded KDE samples) and the FODA baseline. Its architecture and training are ours: a
  small convolutional VAE for images of at least 16 px whose sides divide by 8, an MLP VAE otherwise.
* The density is of the *code*, so two inputs with the same code have the same density whatever their pixels; the
  paper's global probability is "proportional to" it. Log densities are reported relative to the median training
  input's (0 = as dense as the median training input), because the absolute value depends on the latent dimension.
* The KDE is exact (a sum over every training input, no subsampling), evaluated batched in torch with logsumexp.
* The encoder's last hidden layer (:meth:`Density.features`) is one of the two feature sets FID is computed on
  (:mod:`weakspot.hda.fid`), because no Inception weights can be downloaded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from weakspot.errors import ConfigError, DataError

LOG_2PI = math.log(2.0 * math.pi)


class VAE(nn.Module):
    """A Gaussian-encoder VAE with a Bernoulli (logit) decoder on inputs in [0, 1]."""

    def __init__(self, in_shape: Sequence[int], latent_dim: int = 8, hidden: int = 64):
        super().__init__()
        self.in_shape = tuple(int(s) for s in in_shape)
        self.latent_dim, self.hidden = int(latent_dim), int(hidden)
        c, h, w = (self.in_shape + (1, 1))[:3] if len(self.in_shape) == 3 else (1, 1, int(np.prod(self.in_shape)))
        self.conv = len(self.in_shape) == 3 and h >= 16 and w >= 16 and h % 8 == 0 and w % 8 == 0
        if self.conv:
            self.enc = nn.Sequential(
                nn.Conv2d(c, 32, 4, 2, 1),
                nn.ReLU(),
                nn.Conv2d(32, 64, 4, 2, 1),
                nn.ReLU(),
                nn.Conv2d(64, 64, 4, 2, 1),
                nn.ReLU(),
                nn.Flatten(),
                nn.Linear(64 * (h // 8) * (w // 8), hidden),
                nn.ReLU(),
            )
            self.dec = nn.Sequential(
                nn.Linear(latent_dim, hidden),
                nn.ReLU(),
                nn.Linear(hidden, 64 * (h // 8) * (w // 8)),
                nn.ReLU(),
                nn.Unflatten(1, (64, h // 8, w // 8)),
                nn.ConvTranspose2d(64, 64, 4, 2, 1),
                nn.ReLU(),
                nn.ConvTranspose2d(64, 32, 4, 2, 1),
                nn.ReLU(),
                nn.ConvTranspose2d(32, c, 4, 2, 1),
            )
        else:
            d = int(np.prod(self.in_shape))
            self.enc = nn.Sequential(nn.Flatten(), nn.Linear(d, 256), nn.ReLU(), nn.Linear(256, hidden), nn.ReLU())
            self.dec = nn.Sequential(
                nn.Linear(latent_dim, hidden),
                nn.ReLU(),
                nn.Linear(hidden, 256),
                nn.ReLU(),
                nn.Linear(256, d),
                nn.Unflatten(1, self.in_shape),
            )
        self.mu = nn.Linear(hidden, latent_dim)
        self.logvar = nn.Linear(hidden, latent_dim)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.enc(x)

    def encode(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        h = self.enc(x)
        return self.mu(h), self.logvar(h).clamp(-12.0, 8.0)

    def decode_logits(self, z: torch.Tensor) -> torch.Tensor:
        return self.dec(z)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.dec(z))


@dataclass
class Density:
    """A trained VAE and the adaptive KDE over its training codes, with the data's range."""

    vae: VAE
    mu: torch.Tensor  # (N, D) training codes
    sigma: torch.Tensor  # (N, D) the encoder's sigma: each kernel's bandwidth (Eq. 5)
    clip: Tuple[float, float]
    log_density_ref: float  # the median training input's log density (reported densities are relative to it)
    history: list

    @property
    def device(self) -> torch.device:
        return next(self.vae.parameters()).device

    # ------------------------------------------------------------------------------------------------ mapping
    def _unit(self, x: torch.Tensor) -> torch.Tensor:
        lo, hi = self.clip
        return ((x - lo) / (hi - lo)).clamp(0.0, 1.0)

    def _data(self, u: torch.Tensor) -> torch.Tensor:
        lo, hi = self.clip
        return u * (hi - lo) + lo

    @torch.no_grad()
    def encode(self, X: Any, batch: int = 1024) -> Tuple[np.ndarray, np.ndarray]:
        """Codes (mu, sigma) of inputs ``X`` (n, *shape) in the data's units."""
        mus, sig = [], []
        dev = self.device
        for i in range(0, len(X), batch):
            xb = torch.as_tensor(np.asarray(X[i : i + batch], np.float32), device=dev)
            m, lv = self.vae.encode(self._unit(xb))
            mus.append(m.cpu().numpy())
            sig.append(torch.exp(0.5 * lv).cpu().numpy())
        return np.concatenate(mus), np.concatenate(sig)

    @torch.no_grad()
    def features(self, X: Any, batch: int = 1024) -> np.ndarray:
        """The encoder's last hidden layer: the features FID is computed on."""
        dev = self.device
        out = [
            self.vae.features(self._unit(torch.as_tensor(np.asarray(X[i : i + batch], np.float32), device=dev)))
            .cpu()
            .numpy()
            for i in range(0, len(X), batch)
        ]
        return np.concatenate(out).astype(np.float64)

    @torch.no_grad()
    def decode(self, Z: Any, batch: int = 1024) -> np.ndarray:
        dev = self.device
        out = [
            self._data(self.vae.decode(torch.as_tensor(np.asarray(Z[i : i + batch], np.float32), device=dev)))
            .cpu()
            .numpy()
            for i in range(0, len(Z), batch)
        ]
        return np.concatenate(out).astype(np.float32)

    @torch.no_grad()
    def reconstruction_log_prob(self, X: Any, samples: int = 8, seed: int = 0, batch: int = 512) -> np.ndarray:
        """An and Cho's reconstruction probability (the validity score of OODA, Dola et al.): the decoder's Bernoulli
        log-likelihood of each input, averaged over ``samples`` codes drawn from the encoder's Gaussian."""
        dev, g = self.device, torch.Generator().manual_seed(int(seed))
        out = []
        for i in range(0, len(X), batch):
            u = self._unit(torch.as_tensor(np.asarray(X[i : i + batch], np.float32), device=dev))
            m, lv = self.vae.encode(u)
            tot = torch.zeros(len(u), device=dev)
            for _ in range(int(samples)):
                z = m + torch.exp(0.5 * lv) * torch.randn(m.shape, generator=g).to(dev)
                tot -= (
                    F.binary_cross_entropy_with_logits(self.vae.decode_logits(z), u, reduction="none")
                    .reshape(len(u), -1)
                    .sum(1)
                )
            out.append((tot / int(samples)).cpu().numpy())
        return np.concatenate(out).astype(np.float64) if out else np.zeros(0)

    def log_kde(self, Z: Any, batch: int = 256) -> np.ndarray:
        """Eq. 5: log of (1/N) sum_i N(z; mu_i, diag(sigma_i^2)) for each row of ``Z`` (natural log)."""
        return (
            log_adaptive_kde(
                torch.as_tensor(np.asarray(Z, np.float32), device=self.device), self.mu, self.sigma, batch=batch
            )
            .cpu()
            .numpy()
            .astype(np.float64)
        )

    def log_density(self, X: Any) -> np.ndarray:
        """Relative log density of inputs ``X``: their code's log KDE minus the median training input's."""
        mu, _ = self.encode(X)
        return self.log_kde(mu) - self.log_density_ref

    def sample(self, n: int, seed: int) -> np.ndarray:
        """``n`` codes drawn from the KDE (a training code at random, then its Gaussian)."""
        g = np.random.default_rng(seed)
        i = g.integers(0, len(self.mu), n)
        mu, sig = self.mu.cpu().numpy()[i], self.sigma.cpu().numpy()[i]
        return (mu + sig * g.standard_normal(mu.shape)).astype(np.float32)

    def sample_uniform(self, n: int, seed: int) -> np.ndarray:
        """``n`` codes uniform over the training codes' bounding box (Fig. 3's baseline)."""
        g = np.random.default_rng(seed)
        mu = self.mu.cpu().numpy()
        lo, hi = mu.min(0), mu.max(0)
        return (lo + (hi - lo) * g.random((n, mu.shape[1]))).astype(np.float32)


def log_adaptive_kde(z: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor, *, batch: int = 256) -> torch.Tensor:
    """log (1/N) sum_i prod_d N(z_d; mu_id, sigma_id^2) for each row of ``z`` (m, D), batched over ``z``."""
    if z.ndim != 2 or mu.ndim != 2 or z.shape[1] != mu.shape[1] or mu.shape != sigma.shape:
        raise DataError(
            f"adaptive KDE: codes {tuple(z.shape)}, centres {tuple(mu.shape)} and bandwidths "
            f"{tuple(sigma.shape)} do not match"
        )
    if not bool((sigma > 0).all()):
        raise DataError("adaptive KDE: every bandwidth (the encoder's sigma) must be > 0")
    n, d = mu.shape
    inv = 1.0 / sigma  # (N, D)
    const = -torch.log(sigma).sum(1) - 0.5 * d * LOG_2PI - math.log(n)  # (N,)
    out = []
    for i in range(0, len(z), batch):
        zb = z[i : i + batch]
        q = ((zb[:, None, :] - mu[None]) * inv[None]).pow(2).sum(-1)  # (b, N)
        out.append(torch.logsumexp(const[None] - 0.5 * q, dim=1))
    return torch.cat(out) if out else torch.zeros(0, device=z.device)


def train_density(
    X: np.ndarray,
    *,
    clip: Tuple[float, float],
    latent_dim: int = 8,
    hidden: int = 64,
    epochs: int = 30,
    max_steps: int = 1500,
    lr: float = 2e-3,
    batch_size: int = 128,
    beta: float = 1.0,
    seed: int = 0,
    device: Any = "cpu",
    progress: Optional[Any] = None,
) -> Density:
    """Train the VAE on ``X`` (the target's training inputs, in the data's units ``clip``) and fit the KDE."""
    X = np.asarray(X, np.float32)
    if X.ndim < 2 or len(X) < 2:
        raise DataError(f"HDA density: need at least 2 training inputs of shape (n, ...), got {X.shape}")
    if not np.isfinite(X).all():
        raise DataError("HDA density: the training inputs hold NaN or infinite values")
    lo, hi = float(clip[0]), float(clip[1])
    if not hi > lo:
        raise ConfigError(f"HDA density: clip {clip} must have low < high")
    dev = torch.device(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        vae = VAE(X.shape[1:], latent_dim, hidden).to(dev)
    g = torch.Generator().manual_seed(int(seed))
    U = torch.as_tensor((X - lo) / (hi - lo)).clamp(0, 1)
    opt = torch.optim.Adam(vae.parameters(), lr=lr)
    n = len(U)
    per_epoch = max(1, math.ceil(n / batch_size))
    epochs = max(1, min(int(epochs), max(1, int(max_steps) // per_epoch)))
    history = []
    vae.train()
    for ep in range(epochs):
        perm = torch.randperm(n, generator=g)
        tot = 0.0
        for b in range(per_epoch):
            idx = perm[b * batch_size : (b + 1) * batch_size]
            xb = U[idx].to(dev)
            m, lv = vae.encode(xb)
            eps = torch.randn(m.shape, generator=g).to(dev)
            zz = m + torch.exp(0.5 * lv) * eps
            rec = F.binary_cross_entropy_with_logits(vae.decode_logits(zz), xb, reduction="sum") / len(xb)
            kl = -0.5 * (1 + lv - m.pow(2) - lv.exp()).sum() / len(xb)
            loss = rec + beta * kl
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += float(loss.detach()) * len(xb)
        history.append({"epoch": ep + 1, "loss": tot / n})
        if progress is not None:
            progress("VAE training (epochs)", ep + 1, epochs)
    vae.eval()
    dens = Density(
        vae=vae, mu=torch.zeros(0), sigma=torch.zeros(0), clip=(lo, hi), log_density_ref=0.0, history=history
    )
    mu, sig = dens.encode(X)
    dens.mu = torch.as_tensor(mu, device=dev)
    dens.sigma = torch.as_tensor(np.maximum(sig, 1e-6), device=dev)
    dens.log_density_ref = float(np.median(dens.log_kde(mu)))
    return dens


def latent_quality(
    dens: Density, X: np.ndarray, y: np.ndarray, X_test: np.ndarray, n_classes: int, seed: int = 0
) -> Any:
    """Table 3: VAE encoder against PCA with as many components -- K-means (k = classes) completeness, homogeneity
    and V-measure of the codes against the labels, and the reconstruction error on held-out inputs (sum of squared
    errors per input, in the data's units). ``X, y`` are the data ``dens`` was trained on (its codes are reused)."""
    import pandas as pd
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA
    from sklearn.metrics import completeness_score, homogeneity_score, v_measure_score

    d = dens.mu.shape[1]
    flat = np.asarray(X, np.float64).reshape(len(X), -1)
    flat_t = np.asarray(X_test, np.float64).reshape(len(X_test), -1)
    pca = PCA(n_components=min(d, flat.shape[1], len(flat)), random_state=seed).fit(flat)
    # the VAE's codes of the training data are the KDE's centres (X is the data it was trained on)
    codes = {"PCA": pca.transform(flat), "VAE encoder": dens.mu.cpu().numpy().astype(np.float64)}
    rec = {
        "PCA": pca.inverse_transform(pca.transform(flat_t)),
        "VAE encoder": dens.decode(dens.encode(X_test)[0]).reshape(len(X_test), -1),
    }
    rows = []
    for name, c in codes.items():
        lab = KMeans(n_clusters=int(n_classes), n_init=4, random_state=seed).fit_predict(c)
        rows.append(
            {
                "compression": name,
                "dimensions": d,
                "CS": round(float(completeness_score(y, lab)), 3),
                "HS": round(float(homogeneity_score(y, lab)), 3),
                "VS": round(float(v_measure_score(y, lab)), 3),
                "reconstruction SSE": round(float(((rec[name] - flat_t) ** 2).sum(1).mean()), 3),
            }
        )
    return pd.DataFrame(rows)
