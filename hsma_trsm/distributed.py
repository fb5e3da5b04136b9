"""DTensor sharding strategies for torch.ops.hsma (torch.distributed.tensor).

Registers, with DTensor's API for custom operators (``torch.distributed.tensor.experimental.register_sharding``),
the placements under which each operator runs on the local shards with no communication:

- ``trsm(A, B, *, left, ...)``, ``trsm_``: A ``(*, k, k)``, B ``(*, m, n)``, X ``(*batch, m, n)``:
    - a batch dim of X sharded: ``Shard(d)`` on A's and B's matching dim, or ``Replicate()`` for an operand that
      broadcasts there (no such dim, or size 1); X ``Shard(d)``;
    - ``left=True``: A ``Replicate()``, B and X ``Shard(-1)`` (columns: each is an independent solve);
    - ``left=False``: A ``Replicate()``, B and X ``Shard(-2)`` (rows);
    - everything ``Replicate()``.
- ``cholesky_solve(B, L, upper)``: as a left ``trsm`` (B ``(*, k, n)``, L ``(*, k, k)``).
- ``lu_solve(LU, pivots, B, *, left, adjoint)``: as ``trsm`` with pivots ``(*, k)`` placed as LU.
- ``trtri(A, ...)``, ``cholesky_inverse(L, upper)``, ``_lu_permutation(pivots, inverse)``: batch dims sharded
  alike on input and output, or ``Replicate()``.

Inputs placed otherwise are redistributed by DTensor to the cheapest of these (e.g. a left solve with B sharded by
rows: B gathered). ``trsm_`` writes into B, so only strategies that keep B's placement are offered and only A
moves (RuntimeError where none keeps it, e.g. a left solve with B sharded by rows: use ``trsm``). On a mesh of
several dims, every combination of these (one per mesh dim) is allowed.

Autograd: the backward formulas call trsm and ATen ops (matmul, tril_, sum_to). DTensor always replicates
``aten.tril`` / ``triu`` and has no strategy for ``tril_`` / ``triu_``, so this module registers, for all four and
for every caller in the process: batch dims sharded alike, a ``Partial`` sum / avg kept (they are linear), or
``Replicate()``. The gradient of a replicated operand of a sharded solve (A with B's columns or rows sharded, A
broadcast over a sharded batch dim) comes out ``Partial()``: its sum over the shards is pending, no collective yet.

``cholesky_solve``, ``cholesky_inverse`` and ``lu_solve`` are composite operators (csrc/ops/solvers.cpp): outside
``torch.inference_mode`` they decompose into trsm, ``_lu_permutation`` and ATen ops before DTensor sees them, so
trsm's and ``_lu_permutation``'s strategies serve them; their own serve inference mode. ``cholesky_inverse`` and
trtri's autograd (a DTensor A that requires grad) solve against an identity built as a plain tensor, which DTensor
refuses next to DTensors: ``hsma_trsm.cholesky_inverse`` and ``hsma_trsm.inverse_triangular`` run them under
:func:`implicit_replication` (the identity is the same on every rank); calling ``torch.ops.hsma.cholesky_inverse``
(outside inference mode) or ``torch.ops.hsma.trtri`` (with grad) on DTensors directly needs that context too.

Registration: DTensor's sharding cache is keyed on the tensors' specs and the non-tensor arguments its schema info
names; ``register_sharding`` names int arguments only, so ``left`` (it picks the strategies) and trtri's
``out_dtype`` (the result's dtype) are added. ``register_sharding`` itself is called at the first sharding
propagation of one of these ops (importing ``torch.distributed.tensor.experimental`` costs ~20 ms): importing this
module only puts a stand-in in DTensor's table.
"""
import contextlib

import torch

if not torch.distributed.is_available():
    raise ImportError("hsma_trsm.distributed: this torch has no torch.distributed")

from torch.distributed.tensor import DTensor, Partial, Replicate, Shard  # noqa: E402
from torch.distributed.tensor._op_schema import OpStrategy, RuntimeSchemaInfo  # noqa: E402
from torch.distributed.tensor._ops.utils import expand_to_full_mesh_op_strategy  # noqa: E402

__all__ = ["implicit_replication", "replicating"]

_R = Replicate()


def _batch_strategies(operands):
    """Batch-dim strategies: ``[out, *operands]`` placement lists, one per output batch dim of size > 1 (the
    output's batch dims are the operands' broadcast ones, first).

    operands: ``(spec, tail)`` per tensor input, tail its trailing non-batch dims (2 for a matrix, 1 for pivots)."""
    batches = [spec.shape[: spec.ndim - tail] for spec, tail in operands]
    batch = torch.broadcast_shapes(*batches)
    rank = len(batch)
    strategies = []
    for d in range(rank):
        if batch[d] == 1:
            continue
        row = [Shard(d)]
        for spec, tail in operands:
            own = spec.ndim - tail
            dim = d - (rank - own)  # the operand's dim aligned with d (broadcasting from the right)
            row.append(Shard(dim) if dim >= 0 and spec.shape[dim] == batch[d] else _R)
        strategies.append(row)
    return strategies


def _solve_strategies(A, B, left, *, b_first=False, pivots=None):
    """The strategies of a solve with A ``(*, k, k)`` and B ``(*, m, n)``: a list of ``[out, *inputs]``
    placements, inputs in the op's order (B first for cholesky_solve; LU, pivots, B for lu_solve)."""
    ops = [(A, 2)] + ([(pivots, 1)] if pivots is not None else []) + [(B, 2)]
    if b_first:
        ops = ops[::-1]
    rows = _batch_strategies(ops)
    rows.append([_R] * (len(ops) + 1))
    mat = -1 if left else -2  # left: B's columns are independent solves; right: its rows
    if B.shape[mat] > 1:
        b = 0 if b_first else len(ops) - 1
        row = [_R] * (len(ops) + 1)
        row[0], row[1 + b] = Shard(max(A.ndim, B.ndim) + mat), Shard(B.ndim + mat)
        rows.append(row)
    return rows


def _pairs(rows):
    """register_sharding's form: (output placements, input placements) per strategy."""
    return [([row[0]], row[1:]) for row in rows]


def _trsm_sharding(A, B, *, left=True, upper=False, trans="N", unitriangular=False, alpha=1):
    return _pairs(_solve_strategies(A, B, left))


def _trtri_sharding(A, *, upper, unitriangular=False, out_dtype=None):
    return _pairs(_batch_strategies([(A, 2)]) + [[_R, _R]])


def _cholesky_solve_sharding(B, L, upper=False):
    return _pairs(_solve_strategies(L, B, True, b_first=True))


def _cholesky_inverse_sharding(L, upper=False):
    return _pairs(_batch_strategies([(L, 2)]) + [[_R, _R]])


def _lu_solve_sharding(LU, pivots, B, *, left=True, adjoint=False):
    return _pairs(_solve_strategies(LU, B, left, pivots=pivots))


def _lu_permutation_sharding(pivots, inverse=False):
    return _pairs(_batch_strategies([(pivots, 1)]) + [[_R, _R]])


def _triangle_sharding(self, diagonal=0):
    """aten.tril / triu (and in place): any batch dim sharded alike, a linear Partial kept, or Replicate."""
    rows = [[Shard(d), Shard(d)] for d in range(self.ndim - 2) if self.shape[d] > 1]
    linear = [p for p in self.placements if isinstance(p, Partial) and p.reduce_op in ("sum", "avg")]
    rows += [[p, p] for p in dict.fromkeys(linear)]
    return _pairs(rows + [[_R, _R]])


def _trsm_inplace_strategy(op_schema):
    """trsm_'s OpStrategy: the strategies of trsm that keep B (written in place) where it is; A may move."""
    A_strategy, B_strategy = op_schema.args_schema[:2]
    A, B = A_strategy.strategies[0].output_spec, B_strategy.strategies[0].output_spec
    left = op_schema.kwargs_schema.get("left", True)
    rows = [row[1:] for row in _solve_strategies(A, B, left)]  # no output: trsm_ returns ()
    mesh = op_schema.get_mesh_from_args()
    full = expand_to_full_mesh_op_strategy(mesh, op_schema, rows, input_index=0, inplace_op=False)
    kept = [s for s in full.strategies if s.input_specs[1].placements == B.placements]
    if not kept:
        raise RuntimeError(
            f"hsma::trsm_ on DTensors: B (written in place) is placed {B.placements}, which no strategy of a "
            f"{'left' if left else 'right'} solve keeps; redistribute B first or use hsma_trsm.trsm"
        )
    return OpStrategy(kept)


def _functional_ops():
    """(op, sharding function for register_sharding, RuntimeSchemaInfo) of the ops registered through it."""
    hsma, aten = torch.ops.hsma, torch.ops.aten
    # register_sharding keys DTensor's sharding cache on int arguments only: `left` (bool) changes the strategies
    # and `out_dtype` the result's dtype, so they join the key here; tril's `diagonal` (SymInt, position 1) too.
    triangle = RuntimeSchemaInfo(1)
    return [
        (hsma.trsm.default, _trsm_sharding, RuntimeSchemaInfo(static_kwargkey=["left"])),
        (hsma.trtri.default, _trtri_sharding, RuntimeSchemaInfo(static_kwargkey=["out_dtype"])),
        (hsma.cholesky_solve.default, _cholesky_solve_sharding, RuntimeSchemaInfo()),
        (hsma.cholesky_inverse.default, _cholesky_inverse_sharding, RuntimeSchemaInfo()),
        (hsma.lu_solve.default, _lu_solve_sharding, RuntimeSchemaInfo(static_kwargkey=["left"])),
        (hsma._lu_permutation.default, _lu_permutation_sharding, RuntimeSchemaInfo()),
        # DTensor replicates tril / triu and has no strategy for tril_ / triu_: trsm's backward and trtri's
        # autograd use them on (batch-)sharded and Partial gradients.
        (aten.tril.default, _triangle_sharding, triangle),
        (aten.triu.default, _triangle_sharding, triangle),
        (aten.tril_.default, _triangle_sharding, triangle),
        (aten.triu_.default, _triangle_sharding, triangle),
    ]


_registered = False


def _register():
    """register_sharding for the functional ops, with the schema infos above (idempotent). Importing
    torch.distributed.tensor.experimental costs ~20 ms (its context-parallel ops), so the first sharding
    propagation of one of these ops does it, not the import of hsma_trsm."""
    global _registered
    if _registered:
        return
    from torch.distributed.tensor.experimental import register_sharding

    propagator = DTensor._op_dispatcher.sharding_propagator
    for op, fn, info in _functional_ops():
        if propagator.op_strategy_funcs.get(op) is _first_strategy:  # not replaced since (by the user)
            register_sharding(op)(fn)
            propagator.op_to_schema_info[op] = info
    _registered = True


def _first_strategy(op_schema):
    """Stands for every op's strategy until the first call: registers them all, then answers with the real one."""
    _register()
    return DTensor._op_dispatcher.sharding_propagator.op_strategy_funcs[op_schema.op](op_schema)


def _install():
    propagator = DTensor._op_dispatcher.sharding_propagator
    for op, _, info in _functional_ops():
        propagator.register_op_strategy(op, _first_strategy, info)
    propagator.register_op_strategy(torch.ops.hsma.trsm_.default, _trsm_inplace_strategy,
                                    RuntimeSchemaInfo(static_kwargkey=["left"]))


@contextlib.contextmanager
def implicit_replication():
    """Within the block, plain tensors that meet DTensors in an op count as ``Replicate()`` (what
    ``torch.distributed.tensor.experimental.implicit_replication`` sets; this one restores the setting it found,
    where torch's turns it off). For ops that build identities as plain tensors: trtri's autograd
    (``eye(k).expand(A.shape)``) and cholesky_inverse (``cholesky_solve(eye(k), L)``)."""
    dispatcher = DTensor._op_dispatcher
    previous = dispatcher._allow_implicit_replication
    dispatcher._allow_implicit_replication = True
    try:
        yield
    finally:
        dispatcher._allow_implicit_replication = previous


def replicating(*tensors):
    """:func:`implicit_replication` where one of ``tensors`` is a DTensor, else a context that does nothing."""
    if any(isinstance(t, DTensor) for t in tensors):
        return implicit_replication()
    return contextlib.nullcontext()


_install()
