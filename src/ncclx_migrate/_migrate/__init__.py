"""Private implementation package."""
