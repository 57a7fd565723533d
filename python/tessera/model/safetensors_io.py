"""A small safetensors reader and streaming writer (the format: an 8-byte little-endian header length,
a JSON header of {name: {dtype, shape, data_offsets}}, then the tensors' bytes), so checkpoints can be
written chunk by chunk without holding a whole file in memory and read back as memory maps."""
import json
import mmap
import os
import struct

import ml_dtypes
import numpy as np

from .._errors import invalid_argument

# safetensors dtype name -> numpy dtype of one element.
DTYPES = {
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "F16": np.dtype(np.float16),
    "F32": np.dtype(np.float32),
    "F64": np.dtype(np.float64),
    "I32": np.dtype(np.int32),
    "I64": np.dtype(np.int64),
    "U8": np.dtype(np.uint8),
}


def tensor_nbytes(dtype: str, shape) -> int:
    n = DTYPES[dtype].itemsize
    for d in shape:
        n *= int(d)
    return n


class SafetensorsWriter:
    """Writes one file whose tensor list is fixed up front; each tensor's bytes then arrive in order
    through ``write`` in as many chunks as the caller likes (checked against the declared sizes)."""

    def __init__(self, path, entries):
        """``entries``: a list of (name, dtype, shape), in the order the data will be written."""
        self._path = os.fspath(path)
        header, offset = {}, 0
        self._sizes = []
        for name, dtype, shape in entries:
            if dtype not in DTYPES:
                raise invalid_argument("SafetensorsWriter", "entries", f"dtype {dtype!r} of {name!r} is not one of {list(DTYPES)}")
            size = tensor_nbytes(dtype, shape)
            header[name] = {"dtype": dtype, "shape": [int(d) for d in shape], "data_offsets": [offset, offset + size]}
            self._sizes.append((name, size))
            offset += size
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)  # keep the data 8-byte aligned, as the format's writers do
        self._file = open(self._path, "wb")
        self._file.write(struct.pack("<Q", len(text)))
        self._file.write(text)
        self._index, self._written = 0, 0

    def write(self, chunk: np.ndarray) -> None:
        """Appends the next bytes of the current tensor (moving to the next once it is complete)."""
        data = np.ascontiguousarray(chunk).view(np.uint8).reshape(-1)
        while self._index < len(self._sizes) and self._sizes[self._index][1] == self._written:
            self._index, self._written = self._index + 1, 0
        if self._index >= len(self._sizes):
            raise invalid_argument("SafetensorsWriter.write", "chunk", "goes past the last declared tensor")
        name, size = self._sizes[self._index]
        if self._written + data.size > size:
            raise invalid_argument("SafetensorsWriter.write", "chunk",
                                   f"overruns tensor {name!r} ({self._written + data.size} > {size} bytes)")
        self._file.write(data.tobytes() if data.size < (1 << 16) else memoryview(data))
        self._written += data.size

    def close(self) -> None:
        done = sum(size for _, size in self._sizes[: self._index]) + self._written
        total = sum(size for _, size in self._sizes)
        self._file.close()
        if done != total:
            raise invalid_argument("SafetensorsWriter.close", "data", f"is incomplete ({done} of {total} bytes written)")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self._file.close()


def write_safetensors(path, tensors: dict) -> None:
    """Writes {name: (dtype, array)} to one file (small tensors: tests, hand-made checkpoints)."""
    entries = [(name, dtype, np.shape(array)) for name, (dtype, array) in tensors.items()]
    with SafetensorsWriter(path, entries) as w:
        for name, (dtype, array) in tensors.items():
            w.write(np.asarray(array, dtype=DTYPES[dtype]))


def read_header(path):
    """Returns (header dict without "__metadata__", offset of the data section)."""
    fn = "tessera.model.safetensors_io.read_header"
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise invalid_argument(fn, "path", f"must be a safetensors file; {path} is shorter than 8 bytes")
        (length,) = struct.unpack("<Q", raw)
        size = os.fstat(f.fileno()).st_size
        if length > size - 8:
            raise invalid_argument(fn, "path", f"must be a safetensors file; header length {length} exceeds {path}")
        try:
            header = json.loads(f.read(length))
        except ValueError as e:
            raise invalid_argument(fn, "path", f"must hold a JSON header ({path}): {e}") from None
    header.pop("__metadata__", None)
    for name, info in header.items():
        begin, end = info["data_offsets"]
        if info["dtype"] not in DTYPES:
            raise invalid_argument(fn, "path", f"tensor {name!r} has unsupported dtype {info['dtype']!r}")
        if end - begin != tensor_nbytes(info["dtype"], info["shape"]) or 8 + length + end > size:
            raise invalid_argument(fn, "path", f"tensor {name!r} has data_offsets that do not match its shape")
    return header, 8 + length


def read_safetensors(path) -> dict:
    """Memory-maps a file and returns {name: read-only numpy array} (F8_E4M3 as float8_e4m3fn,
    BF16 as ml_dtypes.bfloat16)."""
    header, base = read_header(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        arr = np.frombuffer(buf, dtype=np.uint8, count=end - begin, offset=base + begin)
        out[name] = arr.view(dtype).reshape(info["shape"])
    return out


def read_checkpoint_tensors(folder) -> dict:
    """All tensors of every ``*.safetensors`` file in a folder, {name: array}; a name in two files is an error."""
    names = sorted(n for n in os.listdir(folder) if n.endswith(".safetensors"))
    if not names:
        raise invalid_argument("tessera.model.safetensors_io.read_checkpoint_tensors", "folder",
                               f"must hold *.safetensors files; {folder} has none")
    out = {}
    for n in names:
        for key, arr in read_safetensors(os.path.join(folder, n)).items():
            if key in out:
                raise invalid_argument("tessera.model.safetensors_io.read_checkpoint_tensors", "folder",
                                       f"holds tensor {key!r} twice")
            out[key] = arr
    return out
