"""Byte units. Decimal GB (1e9 bytes) is what papers and price pages use;
binary GiB (2**30 bytes) is what PyTorch and nvidia-smi report."""

BYTES_PER_GB = 1_000_000_000
BYTES_PER_GIB = 2**30


def bytes_to_gb(n_bytes: float) -> float:
    return n_bytes / BYTES_PER_GB


def bytes_to_gib(n_bytes: float) -> float:
    return n_bytes / BYTES_PER_GIB
