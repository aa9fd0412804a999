"""The autodiff core: tape, trace levels, pytrees and the user-facing transformations."""
