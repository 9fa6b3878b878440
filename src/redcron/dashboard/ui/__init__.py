"""The HTML dashboard."""
