"""Reshaped views of buffers and T.im2col, both written as element loops at trace time.

``T.Tensor((rows, cols), dtype, A.data)``, ``T.reshape(buf, shape)`` and ``T.view(buf, shape)`` give a
BufferView: its elements are the base buffer's elements in row-major order (the base may be a global
tensor or an on-chip buffer, which on the CPU is a row-major array too). Element accesses map each
view index to the base buffer's index, with a bounds check on the view's shape (outside it, loads
read 0 and stores are skipped, as for tensors). Tile ops on a view become element loops: ``T.copy``
and ``T.fill`` directly; ``T.reduce_*`` copies a source view into a fresh fragment where the call is
(so it sees the base's contents at that point, like a GPU register view) and a destination view
back from one.
"""
import numbers

from . import _context as ctx
from ._dtypes import canonical
from ._expr import Buffer, BufferRef, Expr, as_node
from ._loops import Parallel
from ._math import if_then_else


class BufferData:
    """``A.data``: the storage of tensor A, to make a view of with T.Tensor(shape, dtype, A.data)."""

    def __init__(self, buffer):
        self.buffer = buffer


def _product(dims):
    n = 1
    for d in dims:
        n = n * d
    return n


def _in_range(indices, shape):
    cond = None
    for i, n in zip(indices, shape):
        c = (i >= 0) & (i < n) if not isinstance(i, numbers.Integral) else (0 <= i < n)
        if c is True:
            continue
        if c is False:
            return False
        cond = c if cond is None else cond & c
    return True if cond is None else cond


class BufferView:
    """A buffer seen with another shape (same dtype, same elements in row-major order)."""

    def __init__(self, base, shape, dtype):
        if canonical(dtype) != base.dtype:
            raise ctx.not_implemented(f"T.Tensor(..., {base.name}.data): a view with dtype {canonical(dtype)} of "
                                      f"'{base.name}' ({base.dtype}) reinterprets bits; only same-dtype views are supported")
        self.base, self.shape, self.dtype = base, tuple(shape), base.dtype
        self.name = f"{base.name}_view"
        self.ndim = len(self.shape)
        a, b = _product(self.shape), _product(base.shape)
        if isinstance(a, numbers.Integral) and isinstance(b, numbers.Integral) and a != b:
            raise ctx.error(f"T.Tensor({list(self.shape)}, ..., {base.name}.data): {a} elements, but "
                            f"'{base.name}' {list(base.shape)} has {b}")

    def base_indices(self, indices):
        linear = 0
        for i, n in zip(indices, self.shape):
            linear = linear * n + i
        out = []
        for n in reversed(self.base.shape[1:]):
            out.append(linear % n)
            linear = linear // n
        out.append(linear)
        return out[::-1]

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) != self.ndim:
            raise ctx.error(f"view of '{self.base.name}' has {self.ndim} dimension(s), indexed with {len(idx)}")
        if any(isinstance(i, slice) for i in idx):
            raise ctx.not_implemented(f"view of '{self.base.name}': slices are not supported; use an element as "
                                      f"the corner of the tile")
        return ViewRef(self, list(idx))

    def __setitem__(self, idx, value):
        ref = self[idx]
        inside = _in_range(ref.indices, self.shape)
        store_guarded(self.base, self.base_indices(ref.indices), value, inside)


class ViewRef(Expr):
    """An element of a BufferView: a value, or the corner of a tile in T.copy."""

    def __init__(self, view, indices):
        super().__init__(None)
        self.view, self.indices = view, indices

    @property
    def node(self):
        inside = _in_range(self.indices, self.view.shape)
        value = self.view.base[tuple(self.view.base_indices(self.indices))]
        return as_node(if_then_else(inside, value, _zero(self.view.dtype)))

    @property
    def dtype(self):
        return self.view.dtype

    @property
    def thread_lazy(self):
        """At a per-thread index it is rebuilt where used (with the thread loop open there), like the index."""
        from ._simt import is_thread_dependent

        return any(is_thread_dependent(i) for i in self.indices)


def _zero(dtype):
    from ._expr import cast

    return cast(dtype, 0)


def store_guarded(buffer, indices, value, inside):
    if inside is False:
        return
    if inside is True:
        buffer[tuple(indices)] = value
        return
    from ._rewrite import _IfScope

    with _IfScope(inside, False):
        buffer[tuple(indices)] = value


def is_view(x):
    return isinstance(x, (BufferView, ViewRef))


def _tile(x, what):
    """(element accessor, extents or None, corner) of a T.copy operand that may be a view."""
    if isinstance(x, BufferView):
        return x, list(x.shape), [0] * x.ndim
    if isinstance(x, ViewRef):
        return x.view, None, list(x.indices)
    if isinstance(x, Buffer):
        return x, list(x.shape), [0] * x.ndim
    if isinstance(x, BufferRef):
        corner, extents, sliced = [], [], False
        for d, i in enumerate(x.indices):
            if isinstance(i, slice):
                sliced = True
                start = 0 if i.start is None else i.start
                stop = x.buffer.shape[d] if i.stop is None else i.stop
                corner.append(start)
                extents.append(stop - start)
            else:
                corner.append(i)
                extents.append(1)
        return x.buffer, extents if sliced else None, corner
    raise ctx.error(f"{what} must be a buffer, a view, a slice or an element, got {type(x).__name__}")


def copy_elementwise(src, dst):
    """T.copy where an operand is a view: one T.Parallel nest over the tile."""
    s, s_ext, s_corner = _tile(src, "T.copy: src")
    d, d_ext, d_corner = _tile(dst, "T.copy: dst")
    extents = s_ext if s_ext is not None else d_ext
    if extents is None:
        raise ctx.error("T.copy: one operand must give the tile's extent (a whole buffer or a slice)")
    s_ext = s_ext if s_ext is not None else _fit(extents, len(s_corner))
    d_ext = d_ext if d_ext is not None else _fit(extents, len(d_corner))
    if s_ext is None or d_ext is None or _squeeze(s_ext) != _squeeze(d_ext):
        raise ctx.error(f"T.copy: tile shapes differ: src {s_ext or extents}, dst {d_ext or extents}")
    s_dims, d_dims = _wide_dims(s_ext), _wide_dims(d_ext)
    loop = _squeeze(s_ext) or [1]
    for idx in Parallel(*loop):
        idx = idx if isinstance(idx, tuple) else (idx,)
        si, di = list(s_corner), list(d_corner)
        for k, v in zip(s_dims, idx):
            si[k] = si[k] + v
        for k, v in zip(d_dims, idx):
            di[k] = di[k] + v
        value = s[tuple(si)]
        d[tuple(di)] = value.astype(d.dtype) if value.dtype != d.dtype else value


def _fit(extents, rank):
    """A tile's extents for an operand of `rank` dims given by its corner (leading dims of 1)."""
    return [1] * (rank - len(extents)) + list(extents) if len(extents) <= rank else None


def _wide_dims(extents):
    return [k for k, n in enumerate(extents) if not (isinstance(n, numbers.Integral) and n == 1)]


def _squeeze(extents):
    return [n for n in extents if not (isinstance(n, numbers.Integral) and n == 1)]


def im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, **_ignored):
    """T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad): fills the (block_M, block_K)
    tile ``col`` with rows nhw_step * block_M ... of the im2col matrix of the NHWC image ``img`` (row: one
    output pixel (n, oh, ow); column: (kh, kw, c) with c fastest). Elements outside the image or the
    matrix are 0."""
    if not isinstance(img, Buffer) or img.ndim != 4:
        raise ctx.error("T.im2col: img must be a 4-d NHWC tensor")
    if not isinstance(col, Buffer) or col.ndim != 2:
        raise ctx.error("T.im2col: col must be a 2-d (block_M, block_K) buffer")
    N, H, W, C = img.shape
    block_m, block_k = col.shape
    oh_n = (H + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    ow_n = (W + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    for i, j in Parallel(block_m, block_k):
        m = nhw_step * block_m + i
        k = c_step * block_k + j
        n, oh, ow = m // (oh_n * ow_n), (m // ow_n) % oh_n, m % ow_n
        kh, kw, c = k // (kernel * C), (k // C) % kernel, k % C
        h = oh * stride + kh * dilation - pad
        w = ow * stride + kw * dilation - pad
        inside = (h >= 0) & (h < H) & (w >= 0) & (w < W) & (m < N * oh_n * ow_n) & (k < kernel * kernel * C)
        col[i, j] = if_then_else(inside, img[n, h, w, c], _zero(img.dtype)).astype(col.dtype)


def reshape(buffer, shape):
    """T.reshape(buf, shape): buf's elements in row-major order seen with another shape (a BufferView;
    the element count must match)."""
    return view(buffer, shape, None, what="T.reshape")


def view(buffer, shape=None, dtype=None, what="T.view"):
    """T.view(buf, shape[, dtype]): like T.reshape. A dtype other than buf's (a reinterpretation of
    the bits) is not supported."""
    if isinstance(buffer, BufferView):
        buffer = buffer.base
    if not isinstance(buffer, Buffer):
        raise ctx.error(f"{what}: expected a tensor or an on-chip buffer, got {type(buffer).__name__}")
    if shape is None:
        shape = buffer.shape
    if isinstance(shape, (numbers.Integral, Expr)):
        shape = (shape,)
    if dtype is not None and canonical(dtype) != buffer.dtype:
        raise ctx.not_implemented(f"{what}({buffer.name}, ..., {canonical(dtype)}): reinterpreting the {buffer.dtype} "
                                  f"elements of '{buffer.name}' as {canonical(dtype)} is not supported (same-dtype "
                                  f"views only)")
    return BufferView(buffer, tuple(shape), buffer.dtype)


def _fragment_like(v):
    from ._ops import alloc_fragment

    shape = []
    for n in v.shape:
        n = n.node.const_int() if isinstance(n, Expr) else n
        if not isinstance(n, numbers.Integral):
            raise ctx.not_implemented(f"a tile op on a view of '{v.base.name}' with the symbolic shape {list(v.shape)}: "
                                      f"only views with constant shapes can be tile-op operands")
        shape.append(int(n))
    return alloc_fragment(tuple(shape), v.dtype)


def reduce_through_views(reduce_fn, src, dst, dim, clear):
    """T.reduce_* where src or dst is a view: reduce between plain fragments, copying the views."""
    s = src
    if isinstance(src, BufferView):
        s = _fragment_like(src)
        copy_elementwise(src, s)
    if not isinstance(dst, BufferView):
        return reduce_fn(s, dst, dim, clear)
    d = _fragment_like(dst)
    if not clear:
        copy_elementwise(dst, d)
    reduce_fn(s, d, dim, clear)
    copy_elementwise(d, dst)


def fill_view(v, value):
    """T.fill / T.clear of a view: every element of the view's shape."""
    for idx in Parallel(*v.shape):
        v[idx if isinstance(idx, tuple) else (idx,)] = value
