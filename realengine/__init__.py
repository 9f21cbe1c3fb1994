"""A real engine (vLLM for the CPU) for tests, benchmarks and the demo: installed into a cache of its
own outside the checkout, serving a tiny model made on the spot (see README "Real engines")."""
