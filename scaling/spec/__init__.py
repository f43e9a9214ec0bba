"""The study spec and its expansion: the spec's sections and checks, the ladder, the grid of
cells, WSD branches, the LR search's added points, hardware and credential checks, and the
loader that reads a file into the one `ResolvedStudy` everything past it takes.

- `scaling.spec.search`: the LR search's and the looks' state files and the grid points they add.
"""
