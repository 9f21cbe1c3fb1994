"""The sandbox's P/D router: an OpenAI-compatible endpoint in front of prefill/decode engine pods."""
