"""Scale-out on Ray Serve: the same FastAPI app in N replicas behind Ray's HTTP proxy.

    laya serve --ray --replicas 4                     # fixed replica count (one GPU each when CUDA is used)
    laya serve --ray --replicas 1 --max-replicas 8    # Ray autoscaling between 1 and 8
    python -c "from laya.serve.ray import run, ServeConfig; run(ServeConfig(...))"

In code: `serve.run(laya.serve.ray.application(cfg))`. Each replica builds its own Router and batcher
from `cfg` (its dynamic batcher merges the requests Ray routes to it), so every replica is one device.
"""

from __future__ import annotations

import os
import time
from typing import Any

from .config import ServeConfig

DEPLOYMENT_NAME = "laya"


def wants_gpu(cfg: ServeConfig) -> bool:
    """One GPU per replica when the device asks for CUDA, or is unset/auto and this machine has CUDA."""
    device = (cfg.device or "auto").strip().lower()
    if device.startswith("cuda"):
        return True
    if device != "auto":
        return False
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def deployment_options(cfg: ServeConfig) -> dict:
    gpu = wants_gpu(cfg)
    options: dict[str, Any] = {
        "name": DEPLOYMENT_NAME,
        "ray_actor_options": {"num_gpus": 1} if gpu else {"num_cpus": 1},
        # the replica's own admission answers 503 beyond this; Ray queues the rest at the proxy
        "max_ongoing_requests": cfg.max_concurrent,
    }
    if cfg.max_replicas and cfg.max_replicas > cfg.replicas:
        options["autoscaling_config"] = {"min_replicas": cfg.replicas, "max_replicas": cfg.max_replicas,
                                         "target_ongoing_requests": max(1, cfg.max_concurrent // 2)}
    else:
        options["num_replicas"] = cfg.replicas
    return options


def _replica_config(cfg: ServeConfig) -> ServeConfig:
    # inside a replica Ray has already picked the GPU (CUDA_VISIBLE_DEVICES): cuda:N becomes cuda
    if cfg.device and cfg.device.strip().lower().startswith("cuda"):
        return cfg.with_overrides(device="cuda")
    return cfg


def replica_name() -> str | None:
    """This Ray Serve replica's id (the tail of its actor name), sent back as X-Laya-Replica; None elsewhere."""
    from ray import serve

    try:
        return serve.get_replica_context().replica_id.unique_id
    except Exception:  # noqa: BLE001 - not inside a replica (or an older Ray): no header
        return None


def application(cfg: ServeConfig) -> Any:
    """A bound Ray Serve application of the laya app (pass it to `ray.serve.run`)."""
    from ray import serve

    replica_cfg = _replica_config(cfg)

    def build_app() -> Any:  # runs on each replica
        from .app import create_app

        app = create_app(cfg=replica_cfg)
        app.state.server.replica = replica_name()
        return app

    @serve.deployment(**deployment_options(cfg))
    @serve.ingress(build_app)
    class LayaServe:
        pass

    return LayaServe.bind()


def run(cfg: ServeConfig, block: bool = True) -> int:
    """Start (or join, with RAY_ADDRESS) a Ray cluster, deploy, and serve on cfg.host:cfg.port."""
    import ray
    from ray import serve

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, runtime_env=_runtime_env())
    serve.start(http_options={"host": cfg.host, "port": cfg.port})
    serve.run(application(cfg), name=DEPLOYMENT_NAME, route_prefix=cfg.root_path or "/")
    if not block:
        return 0
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()
    return 0


def _runtime_env() -> dict:
    """Replicas import laya from where the driver does (a source checkout works without installing)."""
    import laya

    root = os.path.dirname(os.path.dirname(os.path.abspath(laya.__file__)))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return {"env_vars": {"PYTHONPATH": path}}
