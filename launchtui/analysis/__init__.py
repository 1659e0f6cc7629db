"""Pure, vectorised analyses over a Trace. Never imports Textual."""
