"""OpenAI's Responses API (``POST /v1/responses``) on the gateway.

``request`` checks a Responses request and writes it as chat completions; ``answer`` writes a chat answer
as a Response object; ``stream`` turns chat chunks into the Responses event stream (all pure);
``serve`` sends it to the cluster (its own ``/v1/responses`` when the engine serves one) or the fallback.
"""
