"""Standalone mode (`make demo`): the whole product on one machine, outside the product's code."""
