"""The LR search's and the looks' study-folder state files and the grid points they add."""
