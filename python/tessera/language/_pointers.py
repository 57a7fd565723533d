"""``T.ptr`` and ``T.make_tensor``: tensors whose address is itself data. TileKernels' multilayer mHC
recompute passes tables of tensor addresses (``torch.Tensor.data_ptr()`` values in an int64 tensor) and
makes a tensor of each entry inside the kernel.

A ``T.make_tensor`` buffer is a row-major global tensor, usable until the end of the loop, if or kernel
body it is made in; element accesses check the declared shape as a parameter's do. The caller
guarantees what the GPU's caller does: each address is that of a live tensor of the declared shape and
dtype (tessera cannot check a raw address)."""
import numbers

from . import _context as ctx
from ._dtypes import DType, canonical
from ._expr import Buffer, as_node

# An address: a T.ptr tensor is an int64 tensor of data_ptr() values.
ptr = DType("int64")


def make_tensor(address, shape, dtype="float32", strides=None):
    """The row-major tensor of ``shape`` and ``dtype`` whose first element is at ``address`` (an element
    of a ``T.ptr`` tensor, or any int64 value that is a valid address)."""
    if strides is not None:
        raise ctx.not_implemented("T.make_tensor(strides=...): only row-major tensors (strides=None) are supported")
    t = ctx.current("T.make_tensor")
    if isinstance(shape, (numbers.Integral,)) or not hasattr(shape, "__iter__"):
        shape = (shape,)
    dims = [as_node(d) for d in shape]
    ctx.set_loc()
    return Buffer(t.builder.tensor_at(t.take_name("tensor"), dims, canonical(dtype), as_node(address)))
