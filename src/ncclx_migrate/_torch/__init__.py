"""What the toolkit knows about torch, in one place and torch-free at import.

* ``releases``: what each torch release does (phases, what a backend name builds, timeouts,
  NCCL floors), measured on the real wheels;
* ``envvars``: the one table of environment variables torch reads, with their fixes;
* ``probe``: what is installed here (torch's build and backend registry, the NCCL/RCCL
  library and its version), asked without importing torch where it can be.

Nothing here imports another part of ncclx_migrate, and this ``__init__`` imports nothing, so
``import ncclx_migrate`` pays only for the module it reads.
"""
