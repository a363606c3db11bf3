"""Units shared by the core. Decimal GB (1e9 bytes) is what papers and price pages use;
binary GiB (2**30 bytes) is what PyTorch and nvidia-smi report. Time constants live here too, so that no
formula writes 3600 or 86,400 inline."""

BYTES_PER_GB = 1_000_000_000
BYTES_PER_GIB = 2**30

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86_400.0
