"""Trace readers and the columnar model. Never imports Textual."""
