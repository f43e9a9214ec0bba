"""The study spec and its expansion: the spec's sections and checks, the ladder, the grid of
cells, WSD branches, hardware and credential checks, and the loader that reads a file into the one
`ResolvedStudy` everything past it takes (with the cells the LR search and the looks added, read
from their state files in `scaling.state.files`).
"""
