"""Semantics of the nki.isa instructions, grouped by the engine that runs them."""
