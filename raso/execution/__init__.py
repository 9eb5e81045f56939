"""Rollout execution: where a batch's rollouts run (threads, a local process pool, Dask or Ray workers) and how a
worker reaches the driver's gateway. `options` is the config's `execution` section, `executors` runs batches,
`remote` is the worker-to-driver model-call link (docs/design.md §9)."""
