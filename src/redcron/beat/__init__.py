"""The beat: pure schedule arithmetic (``schedule``) and the fire loop that uses it."""
