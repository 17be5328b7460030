"""What tests share (no tests here): fakes, paths, and helpers that start trays, bridges and CLIs."""
