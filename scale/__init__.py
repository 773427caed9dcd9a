"""Optional scale paths outside the core import graph: vLLM, serving, Ray, Redis and batching.

``vllm_offline`` (the ``vllm`` backend), ``serving`` (a llama.cpp OpenAI-compatible server),
``resilient`` (a backend wrapper that rides out server outages), ``sweep_ray`` (λ sweeps on Ray
Tune), ``redis_store`` (the call cache shared by a cluster) and ``batching`` / ``batched_rollout``
/ ``batched_vec_env`` (N episodes' LLM calls as one batch). The core packages never import this
package (import-linter contract ``optional-scale-paths``): the registries reach its modules by name
when a config asks for them (``backend=vllm``, ``backend=resilient``, a ``redis://`` cache URL,
``train.vec_env=batched``), and ``python -m scale.serving`` / ``python -m scale.sweep_ray`` are
commands of their own.
"""
