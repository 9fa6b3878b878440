"""Benchmarks against other systems, run from a checkout (not in the wheel).

``python -m bench.compare`` (``make bench-compare ARGS="..."``) measures
redcron side by side with Celery, Dramatiq, Huey, RQ, arq and BullMQ on one
Redis (docs/benchmarks.md, "Side by side").  The peers come from the
``bench`` extra (``pip install -e '.[bench]'``); a missing one is skipped
with a note.

What a user needs to size a deployment stays in the product, ``redcron
bench``; this package imports from it (its fixtures: the benchmark App, the
embedded Redis, the worker process), never the reverse.
"""
