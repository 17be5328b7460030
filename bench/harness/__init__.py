"""What the benches share: nothing here measures anything by itself."""
