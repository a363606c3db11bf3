"""catalog"""

# Entries of a catalog lookup cached per argument where a link can set the argument (a custom accelerator's id carries
# the typed memory, bandwidth and TFLOP/s: unbounded keys). A few hundred bytes each, so at most about 1 MB a cache;
# functools.cache grew by about 2.3 kB per distinct link and never shrank (stop 50's hosting review, LOW 6).
KEYED_CACHE_ENTRIES = 4096
