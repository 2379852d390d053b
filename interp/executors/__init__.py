"""Where a stage's work runs, and on how many threads.

- ``work``: the seam: a stage's units of work (collection shards, the exact sweep's shards),
  each returning sums that only the coordinator merges; the local executor
- ``ray_workers``: the units on Ray actors that load the model once (``--executor ray``)
- ``choice``: which executor a stage's config asks for, checked before the model loads
- ``placement``: the config fields every stage that runs the model shares (threads, executor,
  address, workers)
- ``threads``: the torch thread count: the CPUs this process may use that others leave free
"""
