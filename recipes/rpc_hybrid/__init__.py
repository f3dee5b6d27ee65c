"""The RPC hybrid recipe: data parallel over workers, each running a two-stage model.

A master process holds the data and the parameters, splits each batch among
the workers with ``torch.distributed.rpc``, and steps the parameters with a
``DistributedOptimizer`` after a distributed-autograd backward. See
``recipes/rpc_hybrid/README.md`` and docs/strategies.md for how it compares with
trainkit's ``HybridStrategy``.
"""
