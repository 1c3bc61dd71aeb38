"""Fused numba loops behind :mod:`crowdlearn.core.kernels` (imported only when numba is present).

The E-step is split in three passes because scalar ``exp`` inside a numba loop costs ~20 ns
(libm, not vectorised) while numpy's SIMD ``exp`` costs ~1 ns: (1) a compiled gather writes
max-shifted logits and the row maxima, (2) ``np.exp`` runs in place over the whole block,
(3) a compiled pass normalises rows and sums the log-normalisers.  The M-step is one
scatter-add pass that also accumulates the class totals.  Everything is compiled on first
use and cached on disk (``cache=True``), so only the first fit on a machine pays the JIT.

Both answer loops read (E-step) or update (M-step) one row of a (W*K x K) table per answer, in
the order of the answers, i.e. at random rows: with 10^5 workers the table (20 MB) no longer
fits in cache and these loads dominate.  The loops therefore prefetch the row of the answer
``PREFETCH_DISTANCE`` positions ahead (an LLVM ``prefetch`` hint, see :func:`prefetch_row`),
which lets many cache misses overlap; at 10^7 answers this cut both loops by about a quarter.
"""

import math

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

#: how many answers ahead the table row is prefetched (16-32 measured best; 8 and 64 a bit slower)
PREFETCH_DISTANCE = 16


@intrinsic
def _llvm_prefetch_row(typingctx, arr, row):  # pragma: no cover - compiled code
    """Hint the CPU to load ``arr[row, 0]`` into cache (``llvm.prefetch``: read, high locality)."""
    sig = types.void(arr, row)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        zero = ir.Constant(ir.IntType(64), 0)
        ptr = cgutils.get_item_pointer2(
            context, builder, data=ary.data, shape=cgutils.unpack_tuple(builder, ary.shape),
            strides=cgutils.unpack_tuple(builder, ary.strides), layout=aryty.layout,
            inds=[index, zero], wraparound=False,
        )
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch")
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                          ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(nogil=True)
def _no_prefetch(arr, row):  # pragma: no cover
    pass


def _probe_prefetch():
    """The prefetch intrinsic if this numba/LLVM compiles it, else a no-op (same results)."""
    try:
        @numba.njit(nogil=True)
        def probe(a):
            _llvm_prefetch_row(a, 0)
            return a[0, 0]

        probe(np.zeros((1, 1)))
        return _llvm_prefetch_row
    except Exception:  # any numba/LLVM version problem: fall back to plain loads
        return _no_prefetch


prefetch_row = _probe_prefetch()


@numba.njit(cache=True, nogil=True, boundscheck=False)
def shifted_logits(task_ptr, keys, log_table, log_prior, shifted, row_max, floor):  # pragma: no cover
    """shifted[n] = max(logits[n] - max(logits[n]), floor); row_max[n] = max(logits[n]).

    ``log_table`` and ``shifted`` may be float32 or float64 (one compiled version each); the
    sum over a task's answers is always accumulated in float64.  ``floor`` keeps ``exp()``
    out of the denormal range, whose slow path costs ~10x: -700 for float64 (exp ~ 1e-304),
    -80 for float32 (exp ~ 2e-35); either is zero for every later use.
    """
    n_tasks, k = shifted.shape
    last = keys.shape[0] - PREFETCH_DISTANCE
    acc = np.empty(k, dtype=np.float64)
    for n in range(n_tasks):
        for j in range(k):
            acc[j] = log_prior[j]
        for i in range(task_ptr[n], task_ptr[n + 1]):
            if i < last:
                prefetch_row(log_table, keys[i + PREFETCH_DISTANCE])
            r = keys[i]
            for j in range(k):
                acc[j] += log_table[r, j]
        m = acc[0]
        for j in range(1, k):
            if acc[j] > m:
                m = acc[j]
        for j in range(k):
            shifted[n, j] = max(acc[j] - m, floor)
        row_max[n] = m


@numba.njit(cache=True, nogil=True, boundscheck=False)
def normalize_rows(expd, row_max, post):  # pragma: no cover
    """post[n] = expd[n] / sum(expd[n]); returns sum_n (row_max[n] + log sum_j expd[n, j]).

    ``expd`` holds exp-shifted logits (float32 or float64); it may be ``post`` itself.
    """
    n_tasks, k = post.shape
    total = 0.0
    for n in range(n_tasks):
        s = 0.0
        for j in range(k):
            s += expd[n, j]
        inv = 1.0 / s
        for j in range(k):
            post[n, j] = expd[n, j] * inv
        total += row_max[n] + np.log(s)
    return total


@numba.njit(cache=True, nogil=True, boundscheck=False)
def mstep(task_ptr, keys, post, out, heavy, class_totals):  # pragma: no cover
    """out[r] += post[n] for every answer with key r >= 0; class_totals += post[n] per task.

    A negative key ``r`` sends the answer to ``heavy[-r - 1]`` instead.  That lets the caller
    accumulate most rows in a float32 ``out`` (half the bytes per random update) and the few
    rows with very many answers in a float64 ``heavy`` table (see ``kernels.mstep``).  With
    no negative key, ``heavy`` may have zero rows and ``out`` may be float64.
    """
    n_tasks, k = post.shape
    last = keys.shape[0] - PREFETCH_DISTANCE
    for n in range(n_tasks):
        for j in range(k):
            class_totals[j] += post[n, j]
        for i in range(task_ptr[n], task_ptr[n + 1]):
            if i < last:
                ahead = keys[i + PREFETCH_DISTANCE]
                if ahead >= 0:
                    prefetch_row(out, ahead)
            r = keys[i]
            if r >= 0:
                for j in range(k):
                    out[r, j] += post[n, j]
            else:
                h = -r - 1
                for j in range(k):
                    heavy[h, j] += post[n, j]


@numba.njit(cache=True, nogil=True, boundscheck=False)
def confusion_table(counts, pseudo, out):  # pragma: no cover
    """Smoothed confusions in the kernels' layout, before the log.

    ``counts[w*K + l, j]`` are soft counts of answer ``l`` on true class ``j``; ``pseudo``
    (1 or W, K true, K answered) Dirichlet pseudo-counts.  Writes
    ``out[w*K + l, j] = (counts + pseudo) / sum_l (counts + pseudo)``, a uniform row where the
    sum is zero, floored at 1e-300 so the log is finite.  One pass instead of numpy's five.
    """
    n_rows, k = counts.shape
    n_workers = n_rows // k
    shared = pseudo.shape[0] == 1
    den = np.empty(k, dtype=np.float64)
    for w in range(n_workers):
        p = 0 if shared else w
        base = w * k
        for j in range(k):
            den[j] = 0.0
        for l in range(k):
            for j in range(k):
                v = counts[base + l, j] + pseudo[p, j, l]
                out[base + l, j] = v
                den[j] += v
        for l in range(k):
            for j in range(k):
                if den[j] > 0:
                    out[base + l, j] = max(out[base + l, j] / den[j], 1e-300)
                else:
                    out[base + l, j] = 1.0 / k


@numba.njit(cache=True, nogil=True, boundscheck=False)
def softmax_in_place(p):  # pragma: no cover
    """``p <- softmax(p)`` for one short vector (shifted by its maximum)."""
    m = -np.inf
    for j in range(len(p)):
        if p[j] > m:
            m = p[j]
    s = 0.0
    for j in range(len(p)):
        p[j] = np.exp(p[j] - m)
        s += p[j]
    for j in range(len(p)):
        p[j] /= s


@numba.njit(cache=True, nogil=True, boundscheck=False)
def minimax_value_grad(worker, task, label, q, sig, tau, gsig, gtau):  # pragma: no cover
    """Data term of the minimax-entropy M-step objective and its gradient, in one pass.

    For every answer ``a`` (worker w, task t, label x) and true class c, with logits
    ``z = sig[w, c] + tau[t, c]``: adds ``-q[t, c] * log_softmax(z)[x]`` to the returned value
    and ``-q[t, c] * (onehot(x) - softmax(z))`` to ``gsig[w, c]`` and ``gtau[t, c]`` (both
    zeroed here).  Replaces five (answers, K, K) temporaries of the numpy version.
    """
    k = q.shape[1]
    gsig[:] = 0.0
    gtau[:] = 0.0
    z = np.empty(k)
    val = 0.0
    for a in range(worker.shape[0]):
        w = worker[a]
        t = task[a]
        x = label[a]
        for c in range(k):
            qc = q[t, c]
            if qc == 0.0:
                continue
            m = -np.inf
            for j in range(k):
                z[j] = sig[w, c, j] + tau[t, c, j]
                if z[j] > m:
                    m = z[j]
            zx = z[x] - m  # the answer's shifted logit, before exp (exp may underflow)
            s = 0.0
            for j in range(k):
                z[j] = np.exp(z[j] - m)
                s += z[j]
            inv = 1.0 / s
            val -= qc * (zx - np.log(s))
            for j in range(k):
                g = qc * z[j] * inv
                if j == x:
                    g -= qc
                gsig[w, c, j] += g
                gtau[t, c, j] += g
    return val


@numba.njit(cache=True, nogil=True, boundscheck=False)
def minimax_task_loglik(worker, task, label, sig, tau, out):  # pragma: no cover
    """``out[t, c] += log p(x_a | y_t = c)`` over every answer ``a`` of task ``t``."""
    k = out.shape[1]
    z = np.empty(k)
    for a in range(worker.shape[0]):
        w = worker[a]
        t = task[a]
        x = label[a]
        for c in range(k):
            m = -np.inf
            for j in range(k):
                z[j] = sig[w, c, j] + tau[t, c, j]
                if z[j] > m:
                    m = z[j]
            s = 0.0
            for j in range(k):
                s += np.exp(z[j] - m)
            out[t, c] += z[x] - m - np.log(s)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _minimax_tau_row_objective(task_ptr_lo, task_ptr_hi, worker, label, sig, c, qc, lam, tau_row):  # pragma: no cover
    k = tau_row.shape[0]
    val = 0.5 * lam * np.sum(tau_row * tau_row)
    for a in range(task_ptr_lo, task_ptr_hi):
        w = worker[a]
        m = -np.inf
        for j in range(k):
            z = sig[w, c, j] + tau_row[j]
            if z > m:
                m = z
        s = 0.0
        for j in range(k):
            s += np.exp(sig[w, c, j] + tau_row[j] - m)
        val -= qc * (sig[w, c, label[a]] + tau_row[label[a]] - m - np.log(s))
    return val


@numba.njit(cache=True, nogil=True, boundscheck=False)
def minimax_tau_newton(task_ptr, worker, label, q, sig, tau, lam, n_steps):  # pragma: no cover
    """Exact block update of every task parameter ``tau[t, c]`` with ``sig`` and ``q`` fixed.

    Each (t, c) row solves an independent K-dim problem,
    ``min q[t, c] sum_a -log softmax(sig[w_a, c] + tau)[x_a] + lam / 2 ||tau||^2``
    (strictly convex), by ``n_steps`` damped Newton steps (step halved until the row objective
    does not increase).  Rows with ``q[t, c] = 0`` have the optimum ``tau = 0``.
    """
    n_tasks, k = q.shape
    g = np.empty(k)
    h = np.empty((k, k))
    p = np.empty(k)
    trial = np.empty(k)
    for t in range(n_tasks):
        lo = task_ptr[t]
        hi = task_ptr[t + 1]
        for c in range(k):
            qc = q[t, c]
            if qc <= 0.0 or hi == lo:
                for j in range(k):
                    tau[t, c, j] = 0.0
                continue
            row = tau[t, c]
            f0 = _minimax_tau_row_objective(lo, hi, worker, label, sig, c, qc, lam, row)
            for _ in range(n_steps):
                for j in range(k):
                    g[j] = lam * row[j]
                    for i in range(k):
                        h[j, i] = lam if i == j else 0.0
                for a in range(lo, hi):
                    w = worker[a]
                    for j in range(k):
                        p[j] = sig[w, c, j] + row[j]
                    softmax_in_place(p)
                    for j in range(k):
                        g[j] += qc * p[j]
                        for i in range(k):
                            h[j, i] -= qc * p[j] * p[i]
                        h[j, j] += qc * p[j]
                    g[label[a]] -= qc
                step = np.linalg.solve(h, g)
                scale = 1.0
                improved = False
                for _ in range(20):
                    for j in range(k):
                        trial[j] = row[j] - scale * step[j]
                    f1 = _minimax_tau_row_objective(lo, hi, worker, label, sig, c, qc, lam, trial)
                    if f1 <= f0:
                        improved = True
                        break
                    scale *= 0.5
                if not improved:
                    break
                for j in range(k):
                    row[j] = trial[j]
                if f0 - f1 < 1e-12 * (1.0 + abs(f0)):
                    f0 = f1
                    break
                f0 = f1


# ==================================================================== belief propagation
#: the one-coin worker factors of :class:`~crowdlearn.aggregation.belief_propagation.BeliefPropagation`
#: (Liu, Peng & Ihler, NIPS 2012) integrated by Gauss-Jacobi quadrature; the node loops are
#: independent sums, so reassociation lets LLVM vectorise them
_bp_jit = numba.njit(
    cache=True, nogil=True, boundscheck=False, fastmath={"reassoc", "contract", "arcp", "nsz"}
)


@_bp_jit
def bp_log_products(w0, w1, e0, e1, q, omq, logw, m, vals, prod):  # pragma: no cover
    """``vals[i] = logw[i] + sum_e log(w0_e (1 - q_i) + w1_e q_i)``; one log per 12 edges
    (each factor is >= exp(-50), so 12 of them stay far above the underflow threshold)."""
    for i in range(m):
        vals[i] = logw[i]
        prod[i] = 1.0
    cnt = 0
    for e in range(e0, e1):
        a0 = w0[e]
        a1 = w1[e]
        for i in range(m):
            prod[i] *= a0 * omq[i] + a1 * q[i]
        cnt += 1
        if cnt == 12:
            for i in range(m):
                vals[i] += np.log(prod[i])
                prod[i] = 1.0
            cnt = 0
    if cnt:
        for i in range(m):
            vals[i] += np.log(prod[i])


@_bp_jit
def bp_worker_messages(
    w0, w1, ptr, rule_of, rule_ptr, q_all, omq_all, logw_all, small_nodes, n_coarse, trunc,
    out, mean_q,
):  # pragma: no cover - compiled; mirrors the numpy path
    """All workers in one compiled pass: the numpy path's arithmetic, without temporaries.

    Inner loops run over nodes (contiguous, independent), so they vectorise.
    """
    max_n = 1
    for r in range(rule_ptr.shape[0] - 1):
        max_n = max(max_n, rule_ptr[r + 1] - rule_ptr[r])
    vals = np.empty(max_n + 1)
    prod = np.empty(max_n + 1)
    amp_q = np.empty(max_n + 1)
    amp_o = np.empty(max_n + 1)
    cq = np.empty(max_n + 1)
    co = np.empty(max_n + 1)
    cw = np.empty(max_n + 1)
    cidx = np.empty(max_n + 1, np.int64)
    for w in range(ptr.shape[0] - 1):
        e0 = ptr[w]
        e1 = ptr[w + 1]
        if e1 == e0:
            continue
        base = rule_ptr[rule_of[w]]
        n = rule_ptr[rule_of[w] + 1] - base
        lo = 0
        hi = n
        if n > small_nodes:  # coarse search for the nodes that carry the mass
            stride = max(n // n_coarse, 1)
            nc = 0
            for j in range(0, n, stride):
                cidx[nc] = j
                nc += 1
            if cidx[nc - 1] != n - 1:
                cidx[nc] = n - 1
                nc += 1
            for c in range(nc):
                cq[c] = q_all[base + cidx[c]]
                co[c] = omq_all[base + cidx[c]]
                cw[c] = logw_all[base + cidx[c]]
            bp_log_products(w0, w1, e0, e1, cq, co, cw, nc, vals, prod)
            peak = 0
            for c in range(1, nc):
                if vals[c] > vals[peak]:
                    peak = c
            thr = vals[peak] - trunc
            for c in range(peak - 1, -1, -1):
                if vals[c] < thr:
                    lo = cidx[c] + 1
                    break
            for c in range(peak + 1, nc):
                if vals[c] < thr:
                    hi = cidx[c]
                    break
        m = hi - lo
        q = q_all[base + lo: base + hi]
        omq = omq_all[base + lo: base + hi]
        bp_log_products(w0, w1, e0, e1, q, omq, logw_all[base + lo: base + hi], m, vals, prod)
        top = vals[0]
        for i in range(1, m):
            top = max(top, vals[i])
        tot = 0.0
        tot_q = 0.0
        for i in range(m):
            a = np.exp(vals[i] - top)
            amp_q[i] = a * q[i]
            amp_o[i] = a * omq[i]
            tot += a
            tot_q += amp_q[i]
        mean_q[w] = tot_q / tot
        for e in range(e0, e1):
            a0 = w0[e]
            a1 = w1[e]
            i1 = 0.0
            i0 = 0.0
            for i in range(m):
                inv = 1.0 / (a0 * omq[i] + a1 * q[i])
                i1 += amp_q[i] * inv
                i0 += amp_o[i] * inv
            out[e] = np.log(i1) - np.log(i0)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def digamma(x):  # pragma: no cover
    """``psi(x)`` for ``x > 0``: the recurrence ``psi(x) = psi(x + 1) - 1/x`` up to ``x >= 6``,
    then the asymptotic series to ``x^-14`` (relative error below 1e-15 there)."""
    shift = 0.0
    while x < 6.0:
        shift -= 1.0 / x
        x += 1.0
    r = 1.0 / (x * x)
    series = r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 - r * (
        1.0 / 132 - r * (691.0 / 32760 - r / 12))))))
    return shift + np.log(x) - 0.5 / x - series


#: a count below this ratio of its pseudo-count enters ``psi(c + a) - psi(a)`` through the
#: Taylor series ``sum_n psi^(n)(a) c^n / n!``, which alternates with terms shrinking at least
#: by ``c / a`` (``|psi^(n)(a)| / n!`` is at most ``1 / (n a^n) + 1 / a^(n+1)``): the first
#: omitted term bounds the error, ``(c / a)^TAYLOR_TERMS`` relative, 1e-8 at this ratio
TAYLOR_RATIO = 0.1
TAYLOR_TERMS = 8  # :func:`_add_powers` is written out for 8


@numba.njit(cache=True, nogil=True, boundscheck=False, inline="always")
def _add_powers(out, c):  # pragma: no cover
    """``out[n - 1] += c^n`` for ``n = 1 .. 8`` (TAYLOR_TERMS), in three multiplications' depth."""
    c2 = c * c
    c4 = c2 * c2
    out[0] += c
    out[1] += c2
    out[2] += c2 * c
    out[3] += c4
    out[4] += c4 * c
    out[5] += c4 * c2
    out[6] += c4 * c2 * c
    out[7] += c4 * c4


@numba.njit(cache=True, nogil=True, boundscheck=False)
def dirichlet_rows_split(counts_lj, a_low, big_low, powers, big_powers,
                         cell_c, cell_jl, tot_t, tot_j):  # pragma: no cover
    """Prepare the sums of Minka's fixed point for pseudo-counts that stay above ``a_low``.

    ``counts_lj[w, l, j]`` is worker ``w``'s soft count of answer ``l`` given truth ``j`` (the
    layout of the Dawid-Skene kernels' M-step, read as is), ``totals[w, j]`` its sum over
    ``l``.  ``num[j, l] = sum_w psi(counts[w, l, j] + a[j, l]) - psi(a[j, l])`` and
    ``den[j] = sum_w psi(totals[w, j] + big_a[j]) - psi(big_a[j])`` are wanted for several
    successive ``a``.  A count below ``TAYLOR_RATIO * a_low`` (soft counts of confident
    posteriors, most cells of a sparse crowd) enters only through its powers, summed here
    once: ``powers[j, l, n - 1] = sum c^n``, ``n = 1 .. TAYLOR_TERMS`` (``big_powers`` for the
    totals against ``big_low``), so that each step costs O(K^2) for them.  Zero counts add
    nothing.  The other counts are listed (``cell_c``, flat index ``cell_jl = j * K + l``;
    ``tot_t``, ``tot_j``) for :func:`dirichlet_rows_listed`.  Returns the two list lengths.
    """
    n_w, k, _ = counts_lj.shape
    powers[:] = 0.0
    big_powers[:] = 0.0
    n_cells = 0
    n_tots = 0
    for w in range(n_w):
        block = counts_lj[w]
        for j in range(k):
            t = 0.0
            for l in range(k):
                t += block[l, j]
            if t <= 0.0:
                continue
            if t < TAYLOR_RATIO * big_low[j]:
                _add_powers(big_powers[j], t)
            else:
                tot_t[n_tots] = t
                tot_j[n_tots] = j
                n_tots += 1
            for l in range(k):
                c = block[l, j]
                if c <= 0.0:
                    continue
                if c < TAYLOR_RATIO * a_low[j, l]:
                    _add_powers(powers[j, l], c)
                else:
                    cell_c[n_cells] = c
                    cell_jl[n_cells] = j * k + l
                    n_cells += 1
    return n_cells, n_tots


@numba.njit(cache=True, nogil=True, boundscheck=False)
def dirichlet_rows_listed(cell_c, cell_jl, n_cells, tot_t, tot_j, n_tots, a, big_a, num, den):  # pragma: no cover
    """The listed counts' part of the fixed point's sums (:func:`dirichlet_rows_split`):
    ``num.flat[jl] = sum psi(c + a.flat[jl]) - psi(a.flat[jl])``, ``den[j]`` likewise."""
    k = a.shape[0]
    a_flat = np.empty(k * k)
    psi_a = np.empty(k * k)
    psi_big = np.empty(k)
    sums = np.zeros(k * k)
    for j in range(k):
        psi_big[j] = digamma(big_a[j])
        den[j] = 0.0
        for l in range(k):
            a_flat[j * k + l] = a[j, l]
            psi_a[j * k + l] = digamma(a[j, l])
    for i in range(n_cells):
        jl = cell_jl[i]
        sums[jl] += digamma(cell_c[i] + a_flat[jl]) - psi_a[jl]
    for j in range(k):
        for l in range(k):
            num[j, l] = sums[j * k + l]
    for i in range(n_tots):
        j = tot_j[i]
        den[j] += digamma(tot_t[i] + big_a[j]) - psi_big[j]


@numba.njit(cache=True, nogil=True, boundscheck=False)
def mace_estep(task, wl, label, n_tasks, log_know, log_spam, log_xi, log_prior, post, know_wl):  # pragma: no cover
    """MACE's E-step in two passes over the answers (:meth:`crowdlearn.aggregation.MACE._e_step`).

    An answer ``l`` of worker ``w`` has probability ``u = spam_w xi_{w,l}`` when the truth is
    not ``l`` and ``v = know_w + u`` when it is: ``post`` (n_tasks, K) gets the normalised
    posteriors, ``know_wl[w K + l]`` the expected number of answers ``l`` of ``w`` given
    knowingly (``sum q_n(l) know_w / v``).  Returns the marginal log-likelihood.
    """
    m, k = log_xi.shape
    # per (worker, label): log u and log v - log u side by side, so that an answer's gather
    # touches one cache line (the answers visit the workers at random)
    uv = np.empty((m * k, 2))
    knows = np.empty(m * k)  # know_w / v: the share of "knows" in an answer l of w given truth l
    # only the (worker, label) cells some answer has: with many workers of one or two answers
    # most cells have none, and their exp and log1p were most of the pass
    used = np.zeros(m * k, np.bool_)
    for i in range(len(wl)):
        used[wl[i]] = True
    for w in range(m):
        for l in range(k):
            if not used[w * k + l]:
                continue
            u = log_spam[w] + log_xi[w, l]
            e = np.exp(-abs(u - log_know[w]))
            uv[w * k + l, 0] = u
            if log_know[w] >= u:
                uv[w * k + l, 1] = log_know[w] + np.log1p(e) - u
                knows[w * k + l] = 1.0 / (1.0 + e)
            else:
                uv[w * k + l, 1] = np.log1p(e)
                knows[w * k + l] = e / (1.0 + e)
    for t in range(n_tasks):
        for j in range(k):
            post[t, j] = log_prior[j]
    last = len(task) - PREFETCH_DISTANCE
    for i in range(len(task)):
        if i < last:
            prefetch_row(uv, wl[i + PREFETCH_DISTANCE])
        t = task[i]
        c = wl[i]
        u = uv[c, 0]
        for j in range(k):
            post[t, j] += u
        post[t, label[i]] += uv[c, 1]
    ll = 0.0
    for t in range(n_tasks):
        top = post[t, 0]
        for j in range(1, k):
            top = max(top, post[t, j])
        total = 0.0
        for j in range(k):
            post[t, j] = np.exp(post[t, j] - top)
            total += post[t, j]
        for j in range(k):
            post[t, j] /= total
        ll += top + np.log(total)
    know_wl[:] = 0.0
    rows = know_wl.reshape(m * k, 1)  # the prefetch hint reads rows of a 2-d array
    for i in range(len(task)):
        if i < last:
            prefetch_row(rows, wl[i + PREFETCH_DISTANCE])
        know_wl[wl[i]] += post[task[i], label[i]]
    for c in range(m * k):
        if used[c]:  # a cell without answers keeps its 0
            know_wl[c] *= knows[c]
    return ll


@numba.njit(cache=True, nogil=True, boundscheck=False)
def mace_vb_mstep(know_wl, n_wl, a, b, g, psi_total, lgamma_total, log_know, log_spam, log_xi):  # pragma: no cover
    """MACE's variational M-step per worker (:meth:`crowdlearn.aggregation.MACE._m_step`).

    From the expected "knows" counts: ``theta_w ~ Beta(know_w + a, spam_w + b)`` and
    ``xi_w ~ Dir(strategy counts + g)``; writes ``E[log theta]``, ``E[log(1 - theta)]`` and
    ``E[log xi]`` and returns minus the summed KL divergences to the priors (the workers'
    part of the ELBO's penalty).  ``know_w + spam_w`` is the worker's answer count
    ``n_w``, the same in every iteration: ``psi_total`` and ``lgamma_total`` hold the
    digamma and log-gamma of ``n_w + a + b``."""
    m, k = log_xi.shape
    beta_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    dir_norm = math.lgamma(k * g) - k * math.lgamma(g)
    # a (worker, label) cell without answers has strategy pseudo-count exactly g: its digamma
    # and log-gamma once (most cells, when many workers give one or two answers)
    psi_g = digamma(g)
    lgamma_g = math.lgamma(g)
    c1 = np.empty(k)  # the worker's strategy pseudo-counts
    penalty = 0.0
    for w in range(m):
        know = 0.0
        n_w = 0.0
        s1 = 0.0
        for l in range(k):
            c = w * k + l
            kn = min(know_wl[c], n_wl[c])
            know += kn
            n_w += n_wl[c]
            c1[l] = n_wl[c] - kn + g
            s1 += c1[l]
        know = min(know, n_w)  # rounding: a1 + b1 stays n_w + a + b
        a1 = know + a
        b1 = n_w - know + b
        lk = digamma(a1) - psi_total[w]
        ls = digamma(b1) - psi_total[w]
        log_know[w] = lk
        log_spam[w] = ls
        kl = (lgamma_total[w] - math.lgamma(a1) - math.lgamma(b1) - beta_norm
              + (a1 - a) * lk + (b1 - b) * ls)
        psi_s = digamma(s1)
        kl += math.lgamma(s1) - dir_norm
        for l in range(k):
            if n_wl[w * k + l] == 0.0:  # c1[l] == g
                e = psi_g - psi_s
                log_xi[w, l] = e
                kl += (c1[l] - g) * e - lgamma_g
            else:
                e = digamma(c1[l]) - psi_s
                log_xi[w, l] = e
                kl += (c1[l] - g) * e - math.lgamma(c1[l])
        penalty -= kl
    return penalty
