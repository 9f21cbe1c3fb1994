"""The lines an engine prints while it starts, shaped like the real engines' logs."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.engine.engine import SimEngine

Line = tuple[str, str, str]  # (source, level, message)


def startup_lines(engine: SimEngine) -> list[Line]:
    spec = engine.spec
    if spec.engine == "sglang":
        mode = {"prefill": "prefill", "decode": "decode"}.get(engine.role, "null")
        return [
            (
                "server_args.py",
                "INFO",
                f"server_args=ServerArgs(model_path={spec.model!r}, port={engine.port}, "
                f"disaggregation_mode={mode!r})",
            ),
            (
                "http_server.py",
                "INFO",
                f"The server is fired up and ready to roll! (http://{engine.address})",
            ),
        ]
    if spec.engine == "mindie":
        lines = [
            (
                "mindieservice_daemon",
                "INFO",
                f"MindIE-Service daemon start, role={engine.role}, port={engine.port}",
            )
        ]
        if not engine.monitored:
            lines.append(
                (
                    "mindieservice_daemon",
                    "WARNING",
                    "service monitor is disabled (set MIES_SERVICE_MONITOR_MODE=1 for /metrics)",
                )
            )
        lines.append(("mindieservice_daemon", "INFO", "Daemon start success!"))
        return lines
    lines = [
        ("api_server.py", "INFO", "vLLM API server version 0.32.0 (sandbox simulation)"),
        ("utils.py", "INFO", f"non-default args: {' '.join(spec.args)}"),
    ]
    if spec.kv_connector:
        kv_role = {"prefill": "kv_producer", "decode": "kv_consumer"}.get(engine.role, "kv_both")
        lines.append(
            (
                "factory.py",
                "INFO",
                f"Creating v1 connector with name: {spec.kv_connector} and engine_id: {engine.name}, "
                f"kv_role: {kv_role}",
            )
        )
    if spec.mooncake_master:
        lines.append(
            ("mooncake_store.py", "INFO", f"Mooncake Store client connected to master {spec.mooncake_master}")
        )
    lines += [
        (
            "kv_cache_utils.py",
            "INFO",
            f"# GPU blocks: {engine.cfg.num_gpu_blocks}, block size: {engine.cfg.block_size}",
        ),
        ("launcher.py", "INFO", f"Starting vLLM API server 0 on http://{engine.address}"),
        ("uvicorn", "INFO", "Application startup complete."),
    ]
    return lines
