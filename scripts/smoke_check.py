import torch, hsma_trsm, itertools, time
torch.manual_seed(0)
dev = "cuda"
bad = 0; n_ok = 0
for dt in (torch.float32, torch.float64, torch.complex64, torch.complex128):
  for k in (1, 5, 33, 64, 65, 200, 300):
    for left, upper, trans, unit in itertools.product((True, False), (True, False), "NTC", (False, True)):
      A = torch.randn(k, k, dtype=torch.float64) / k**0.5 + torch.diag(1 + torch.rand(k, dtype=torch.float64))
      A = A.to(dt)
      A = A.triu() if upper else A.tril()
      nrhs = 7
      B = torch.randn((k, nrhs) if left else (nrhs, k), dtype=dt)
      Ad, Bd = A.to(dev), B.to(dev)
      X = hsma_trsm.trsm(Ad, Bd, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=2)
      Xr = hsma_trsm.trsm(A.to(torch.complex128 if dt.is_complex else torch.float64), B.to(torch.complex128 if dt.is_complex else torch.float64), left=left, upper=upper, trans=trans, unitriangular=unit, alpha=2)
      err = ((X.cpu().to(Xr.dtype) - Xr).norm() / Xr.norm()).item()
      tol = 1e-4 if dt in (torch.float32, torch.complex64) else 1e-10
      if not err < tol:
        bad += 1
        if bad < 20: print("BAD", dt, k, left, upper, trans, unit, err)
      else: n_ok += 1
print("ok", n_ok, "bad", bad)
