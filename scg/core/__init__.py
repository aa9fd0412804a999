"""The autodiff core: tape, trace levels and pytrees (the transformations built on them,
`grad`, `jacobian`, ..., are in `scg/differential_operators.py`)."""
