"""Running the real helm on our charts and reading what it renders."""
