"""The engine performance model, owned by the product: a continuous-batching scheduler with a prefix cache,
KV transfer between prefill and decode instances, and the router's pod choice. The what-if simulator
(``perfmodel.sim``) and the sandbox's engines (``sandbox/engine/``) both run it."""
