"""Event rows the FTL buffers and its compiled kernel (``_ftl_jit``) replays: ``(op, owner, bytes, kind)``.

Below both, so the kernel need not import the wrapper that lazily imports it."""
OP_WRITE, OP_WRITE_UNCOUNTED, OP_TRIM = 0, 1, 2
