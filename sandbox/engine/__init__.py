"""Simulated P/D inference engines (vLLM, SGLang, MindIE) that the sandbox's kubelet runs per pod."""
