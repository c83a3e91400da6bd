"""Shared pytest set-up: hypothesis profile for a 2-core CI machine."""

from hypothesis import settings

settings.register_profile("ropelab", max_examples=60, deadline=None)
settings.load_profile("ropelab")
